package io.switchml.appliance.telemetry;

import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.CountersFileDescriptor;
import io.switchml.protocol.telemetry.SystemCounter;
import org.agrona.IoUtil;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;
import org.agrona.concurrent.status.CountersReader;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Writer side of the appliance's memory-mapped counters file ({@link CountersFileDescriptor}): creates
 * and maps {@value CountersFileDescriptor#FILENAME} in a directory, allocates the {@link SystemCounter}s
 * first (counter id == enum id), publishes the file, then hands out per-shard and per-job counters and
 * the {@link ErrorLog}. Another process reads it live with
 * {@link io.switchml.protocol.telemetry.CountersFile#open(Path)}.
 * <p>
 * Threading: a {@link CountersManager} is not thread-safe, so every allocation and free here is
 * synchronized (control threads). Updates need no lock: each {@link ShardCounters} has a single writer
 * (its shard), {@link JobCounters} use atomic adds, system counters are updated with atomic operations by
 * control threads, except the data-plane totals ({@link SystemCounter#isShardTotal()}) which only
 * {@link #aggregateShardTotals()} writes.
 */
public final class CountersFile implements AutoCloseable
{
    /** Counters the file holds at once by default: system + 25 per shard + 7 per job. */
    public static final int DEFAULT_MAX_COUNTERS = 4096;
    /** Default length of the error log section. */
    public static final int DEFAULT_ERROR_LOG_LENGTH_BYTES = 1 << 20;
    /**
     * How long a freed counter id stays unused by default, so that a reader (or a shard that has not yet
     * dropped a job's counters) never sees a freed id reused by another job straight away.
     */
    public static final long DEFAULT_FREE_TO_REUSE_TIMEOUT_MS = 1_000;

    private static final int TOTAL_BYTES_IN = 0;
    private static final int TOTAL_PACKETS_IN = 1;
    private static final int TOTAL_BYTES_OUT = 2;
    private static final int TOTAL_PACKETS_OUT = 3;
    private static final int TOTAL_DROPS = 4;
    private static final int TOTALS = 5;

    private final Path file;
    private final long startTimestampMs;
    private final MappedByteBuffer mappedFile;
    private final CountersManager countersManager;
    private int nextBackendCounter;
    private final UnsafeBuffer keyBuffer = new UnsafeBuffer(new byte[CounterTypes.KEY_LENGTH]);
    private final AtomicCounter[] systemCounters;
    private final ErrorLog errorLog;
    private final List<ShardCounters> shards = new ArrayList<>();
    private final long[] retiredShardTotals = new long[TOTALS];
    private final long[] shardTotals = new long[TOTALS];
    private long nextRegistrationId = 1;
    private boolean closed;

    /**
     * Create the counters file in a directory with the defaults.
     *
     * @param directory where {@value CountersFileDescriptor#FILENAME} is created (and the directory, if
     *                  missing); an existing file is replaced.
     */
    public CountersFile(final Path directory)
    {
        this(directory, DEFAULT_MAX_COUNTERS, DEFAULT_ERROR_LOG_LENGTH_BYTES, SystemEpochClock.INSTANCE,
            DEFAULT_FREE_TO_REUSE_TIMEOUT_MS);
    }

    /**
     * Create the counters file in a directory.
     *
     * @param directory            where {@value CountersFileDescriptor#FILENAME} is created (and the
     *                             directory, if missing); an existing file is replaced, so a reader still
     *                             mapping the old one keeps the old, dead values.
     * @param maxCounters          counters the file holds at once.
     * @param errorLogLengthBytes  length of the error log section (rounded up to 128 bytes).
     * @param clock                epoch clock for the start time, counter reuse deadlines and error times.
     * @param freeToReuseTimeoutMs how long a freed counter id stays unused.
     */
    public CountersFile(
        final Path directory,
        final int maxCounters,
        final int errorLogLengthBytes,
        final EpochClock clock,
        final long freeToReuseTimeoutMs)
    {
        final int valuesLength = CountersFileDescriptor.valuesBufferLength(maxCounters);
        final int metadataLength = CountersFileDescriptor.metadataBufferLength(valuesLength);
        final int errorLogLength = CountersFileDescriptor.errorLogBufferLength(errorLogLengthBytes);
        final long fileLength = CountersFileDescriptor.computeFileLength(metadataLength, valuesLength, errorLogLength);
        if (fileLength > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("counters file would be " + fileLength + " bytes, over 2 GiB");
        }

        this.file = directory.resolve(CountersFileDescriptor.FILENAME);
        try
        {
            Files.createDirectories(directory);
            Files.deleteIfExists(file);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot create counters file " + file + ": " + ex.getMessage(), ex);
        }

        this.mappedFile = IoUtil.mapNewFile(file.toFile(), fileLength, false);
        final UnsafeBuffer header = new UnsafeBuffer(mappedFile, 0, CountersFileDescriptor.HEADER_LENGTH);
        this.startTimestampMs = clock.time();
        CountersFileDescriptor.fillHeader(
            header, ProcessHandle.current().pid(), startTimestampMs, metadataLength, valuesLength, errorLogLength);

        this.countersManager = new CountersManager(
            CountersFileDescriptor.createCountersMetadataBuffer(mappedFile, header),
            CountersFileDescriptor.createCountersValuesBuffer(mappedFile, header),
            StandardCharsets.UTF_8,
            clock,
            freeToReuseTimeoutMs);

        final SystemCounter[] counters = SystemCounter.values();
        this.systemCounters = new AtomicCounter[counters.length];
        for (final SystemCounter counter : counters)
        {
            final int kind = counter.isGauge() ? CounterTypes.KIND_GAUGE : CounterTypes.KIND_COUNTER;
            final AtomicCounter atomicCounter = allocate(
                CounterTypes.SYSTEM, counter.id(), kind, counter.metricName(), null, null, counter.description());
            if (atomicCounter.id() != counter.id() || counter.id() != counter.ordinal())
            {
                throw new IllegalStateException(
                    "system counter " + counter + " got id " + atomicCounter.id() + ", expected " + counter.id());
            }
            systemCounters[counter.ordinal()] = atomicCounter;
        }

        this.errorLog = new ErrorLog(
            CountersFileDescriptor.createErrorLogBuffer(mappedFile, header),
            clock,
            systemCounter(SystemCounter.ERRORS));

        CountersFileDescriptor.signalReady(header);
    }

    /**
     * @return the counters file.
     */
    public Path file()
    {
        return file;
    }

    /**
     * @return epoch ms at which the file was created, as written in its header.
     */
    public long startTimestampMs()
    {
        return startTimestampMs;
    }

    /**
     * @return a reader over this file's counters, e.g. for {@link HttpEndpoint}. Read only; allocate
     * through this class.
     */
    public CountersReader countersReader()
    {
        return countersManager;
    }

    /**
     * @return the error log in this file; also an Agrona {@code ErrorHandler} for agent runners.
     */
    public ErrorLog errorLog()
    {
        return errorLog;
    }

    /**
     * The counter for a system-wide statistic; the same instance on every call. Update it from control
     * threads with atomic operations ({@code increment()}, {@code decrement()}, {@code getAndAdd()}); do
     * not update the {@link SystemCounter#isShardTotal() shard totals}, which {@link #aggregateShardTotals()}
     * owns.
     */
    public AtomicCounter systemCounter(final SystemCounter counter)
    {
        return systemCounters[counter.ordinal()];
    }

    /**
     * Allocate the counters of one data-plane shard; the shard's thread is their single writer.
     *
     * @param shardId id of the shard, unique among the live shards.
     * @return the shard's counters; {@link ShardCounters#close()} frees them.
     * @throws IllegalStateException if the shard already has counters or the file is full.
     */
    public synchronized ShardCounters newShardCounters(final int shardId)
    {
        ensureOpen();
        for (final ShardCounters shard : shards)
        {
            if (shard.shardId() == shardId)
            {
                throw new IllegalStateException("shard " + shardId + " already has counters");
            }
        }
        final ShardCounters shardCounters = new ShardCounters(this, shardId);
        shards.add(shardCounters);
        return shardCounters;
    }

    /**
     * Allocate the counters of one job (type {@link CounterTypes#JOB}, owner id = job id, labels naming
     * the job, its name and tenant). Free them with {@link JobCounters#close()} once no shard uses them.
     *
     * @param jobId   id of the job.
     * @param tenant  tenant that owns the job; may be empty.
     * @param jobName name of the job; may be empty.
     * @return the job's counters.
     * @throws IllegalStateException if the file is full (refuse the job).
     */
    public synchronized JobCounters allocateJobCounters(final int jobId, final String tenant, final String jobName)
    {
        ensureOpen();
        return new JobCounters(this, jobId, null == tenant ? "" : tenant, null == jobName ? "" : jobName);
    }

    /**
     * Allocate a counter of an aggregation backend (type {@link CounterTypes#BACKEND}): the backend's name in the
     * key's tenant field, the metric name, and a label (for a fallback counter, the reason).
     *
     * @param backend    the backend's name, e.g. "xdp".
     * @param metricName a valid metric name ([a-z][a-z0-9_]*).
     * @param label      what it counts.
     * @return the counter; it lives as long as the file.
     */
    public synchronized AtomicCounter allocateBackendCounter(final String backend, final String metricName, final String label)
    {
        ensureOpen();
        return allocate(CounterTypes.BACKEND, nextBackendCounter++, CounterTypes.KIND_COUNTER, metricName, backend, null, label);
    }

    /**
     * Write the data-plane totals ({@link SystemCounter#isShardTotal()}) as the sums of every shard's
     * counters, including shards already closed. Call it from one control thread periodically (say every
     * 100 ms to 1 s) and before a final read; the totals lag the shards by that period.
     */
    public synchronized void aggregateShardTotals()
    {
        if (closed)
        {
            return;
        }
        System.arraycopy(retiredShardTotals, 0, shardTotals, 0, TOTALS);
        for (final ShardCounters shard : shards)
        {
            addTotals(shard, shardTotals);
        }
        systemCounter(SystemCounter.BYTES_IN).setRelease(shardTotals[TOTAL_BYTES_IN]);
        systemCounter(SystemCounter.PACKETS_IN).setRelease(shardTotals[TOTAL_PACKETS_IN]);
        systemCounter(SystemCounter.BYTES_OUT).setRelease(shardTotals[TOTAL_BYTES_OUT]);
        systemCounter(SystemCounter.PACKETS_OUT).setRelease(shardTotals[TOTAL_PACKETS_OUT]);
        systemCounter(SystemCounter.DROPS).setRelease(shardTotals[TOTAL_DROPS]);
    }

    /**
     * Stop allocating. The file stays mapped until this object and every counter handed out are
     * unreachable: unmapping while a shard may still write a counter would crash the JVM, so the mapping
     * is left to the garbage collector. The file stays on disk for post-mortem reading.
     */
    public synchronized void close()
    {
        closed = true;
    }

    synchronized AtomicCounter allocate(
        final int typeId,
        final int ownerId,
        final int kind,
        final String metricName,
        final String tenant,
        final String jobName,
        final String label)
    {
        ensureOpen();
        CounterTypes.encodeKey(keyBuffer, ownerId, kind, metricName, tenant, jobName);
        final UnsafeBuffer labelBuffer = new UnsafeBuffer(
            CounterTypes.truncateUtf8(label, CountersReader.MAX_LABEL_LENGTH).getBytes(StandardCharsets.UTF_8));
        final int counterId;
        try
        {
            counterId = countersManager.allocate(
                typeId, keyBuffer, 0, CounterTypes.KEY_LENGTH, labelBuffer, 0, labelBuffer.capacity());
        }
        catch (final IllegalStateException ex)
        {
            throw new IllegalStateException("counters file " + file + " is full (" + countersManager.capacity() +
                " counters) allocating '" + label + "'", ex);
        }
        countersManager.setCounterRegistrationId(counterId, nextRegistrationId++);
        countersManager.setCounterReferenceId(counterId, ownerId);
        return new AtomicCounter(countersManager.valuesBuffer(), counterId);
    }

    synchronized void free(final AtomicCounter counter)
    {
        if (!counter.isClosed())
        {
            counter.close();
            countersManager.free(counter.id());
        }
    }

    synchronized void retire(final ShardCounters shard)
    {
        if (shards.remove(shard))
        {
            addTotals(shard, retiredShardTotals);
        }
    }

    private static void addTotals(final ShardCounters shard, final long[] totals)
    {
        totals[TOTAL_BYTES_IN] += shard.bytesIn().get();
        totals[TOTAL_PACKETS_IN] += shard.packetsIn().get();
        totals[TOTAL_BYTES_OUT] += shard.bytesOut().get();
        totals[TOTAL_PACKETS_OUT] += shard.packetsOut().get();
        totals[TOTAL_DROPS] += shard.totalDrops();
    }

    private void ensureOpen()
    {
        if (closed)
        {
            throw new IllegalStateException("counters file " + file + " is closed");
        }
    }
}
