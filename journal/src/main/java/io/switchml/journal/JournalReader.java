package io.switchml.journal;

import net.openhft.chronicle.queue.ExcerptTailer;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueue;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueBuilder;
import net.openhft.chronicle.wire.DocumentContext;
import net.openhft.chronicle.wire.Wire;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Reads a journal directory, from another process (the ops CLI) or the writer's own, while the appliance
 * writes it or after. Opens the queue read-only, so it creates and changes no file, in the directory or
 * outside it (it also sets Chronicle's analytics and announcer switches off unless they are set).
 * <p>
 * Starts at the oldest retained event. Optional filters (job id, minimum severity, types, earliest
 * timestamp) skip events; a scan from a timestamp reads every earlier event of the retained cycles.
 * {@link #poll()} returns the next matching event or null; {@link #poll(long)} is follow mode: it waits
 * for one to be written. Not thread-safe: one thread per reader.
 */
public final class JournalReader implements AutoCloseable
{
    /** Pause between looks at the queue while {@link #poll(long)} waits. */
    static final long FOLLOW_POLL_INTERVAL_MS = 2;

    static
    {
        ChronicleSettings.apply();
    }

    private final SingleChronicleQueue queue;
    private final ExcerptTailer tailer;
    private boolean jobIdFiltered;
    private int jobId;
    private JournalSeverity minSeverity = JournalSeverity.INFO;
    private EnumSet<JournalEvent> types = EnumSet.allOf(JournalEvent.class);
    private long fromTimestampMs = Long.MIN_VALUE;

    private JournalReader(final SingleChronicleQueue queue)
    {
        this.queue = queue;
        this.tailer = queue.createTailer();
        tailer.toStart();
    }

    /**
     * Open the journal in {@code directory} read-only, positioned at its oldest retained event.
     *
     * @throws IllegalArgumentException when {@code directory} holds no journal (nothing has opened a
     *                                  {@link Journal} there).
     */
    public static JournalReader open(final Path directory)
    {
        if (!Files.isDirectory(directory) || !Files.isRegularFile(directory.resolve(JournalSchema.METADATA_FILE)))
        {
            throw new IllegalArgumentException("no journal in " + directory + " (no " + JournalSchema.METADATA_FILE + ")");
        }
        ChronicleSettings.confine(directory, false);
        final SingleChronicleQueue queue = SingleChronicleQueueBuilder.binary(directory).readOnly(true).build();
        try
        {
            return new JournalReader(queue);
        }
        catch (final RuntimeException ex)
        {
            queue.close();
            throw ex;
        }
    }

    /**
     * Go back to the oldest retained event.
     */
    public JournalReader toStart()
    {
        tailer.toStart();
        return this;
    }

    /**
     * Skip to the end: the next event read is the next one written (follow from now).
     */
    public JournalReader toEnd()
    {
        tailer.toEnd();
        return this;
    }

    /**
     * Keep only events about this job.
     */
    public JournalReader jobId(final int jobId)
    {
        this.jobIdFiltered = true;
        this.jobId = jobId;
        return this;
    }

    /**
     * Keep events whatever their job (the default).
     */
    public JournalReader anyJob()
    {
        this.jobIdFiltered = false;
        return this;
    }

    /**
     * Keep only events of this severity or worse (default {@link JournalSeverity#INFO}: all).
     */
    public JournalReader minSeverity(final JournalSeverity minSeverity)
    {
        this.minSeverity = minSeverity;
        return this;
    }

    /**
     * Keep only events of these types (default all).
     */
    public JournalReader types(final Set<JournalEvent> types)
    {
        this.types = types.isEmpty() ? EnumSet.noneOf(JournalEvent.class) : EnumSet.copyOf(types);
        return this;
    }

    /**
     * Keep only events of these types (default all).
     */
    public JournalReader types(final JournalEvent first, final JournalEvent... rest)
    {
        this.types = EnumSet.of(first, rest);
        return this;
    }

    /**
     * Keep only events stamped at or after {@code timestampMs} (epoch ms).
     */
    public JournalReader fromTimestampMs(final long timestampMs)
    {
        this.fromTimestampMs = timestampMs;
        return this;
    }

    /**
     * @return the next event that passes the filters, or null when none has been written yet.
     */
    public JournalRecord poll()
    {
        while (true)
        {
            try (DocumentContext document = tailer.readingDocument())
            {
                if (!document.isPresent())
                {
                    return null;
                }
                if (!document.isData())
                {
                    continue;
                }
                final JournalRecord record = decode(document.index(), document.wire());
                if (null != record && matches(record))
                {
                    return record;
                }
            }
        }
    }

    /**
     * Follow mode: the next event that passes the filters, waiting up to {@code timeoutMs} for one to be
     * written.
     *
     * @return the event, or null when none came in time.
     * @throws InterruptedException when interrupted while waiting.
     */
    public JournalRecord poll(final long timeoutMs) throws InterruptedException
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (true)
        {
            final JournalRecord record = poll();
            if (null != record)
            {
                return record;
            }
            final long remainingNs = deadlineNs - System.nanoTime();
            if (remainingNs <= 0)
            {
                return null;
            }
            if (Thread.interrupted())
            {
                throw new InterruptedException();
            }
            TimeUnit.NANOSECONDS.sleep(Math.min(remainingNs, TimeUnit.MILLISECONDS.toNanos(FOLLOW_POLL_INTERVAL_MS)));
        }
    }

    /**
     * Hand every event written so far that passes the filters to {@code consumer}.
     *
     * @return how many were handed over.
     */
    public int readAvailable(final Consumer<? super JournalRecord> consumer)
    {
        int count = 0;
        JournalRecord record;
        while (null != (record = poll()))
        {
            consumer.accept(record);
            count++;
        }
        return count;
    }

    /**
     * Close the queue. Idempotent.
     */
    public void close()
    {
        tailer.close();
        queue.close();
    }

    private boolean matches(final JournalRecord record)
    {
        return (!jobIdFiltered || record.jobId() == jobId) &&
            record.severity().isAtLeast(minSeverity) &&
            types.contains(record.type()) &&
            record.timestampMs() >= fromTimestampMs;
    }

    private static JournalRecord decode(final long index, final Wire wire)
    {
        final JournalEvent type = JournalEvent.fromName(wire.read(JournalSchema.TYPE).text());
        if (null == type)
        {
            return null;
        }
        final long timestampMs = wire.read(JournalSchema.TIMESTAMP_MS).int64();
        final JournalSeverity decodedSeverity = JournalSeverity.fromName(wire.read(JournalSchema.SEVERITY).text());
        final JournalSeverity severity = null == decodedSeverity ? JournalSeverity.ERROR : decodedSeverity;
        final int jobId = wire.read(JournalSchema.JOB_ID).int32();
        final String tenant = wire.read(JournalSchema.TENANT).text();
        final String jobName = wire.read(JournalSchema.JOB_NAME).text();
        final String message = wire.read(JournalSchema.MESSAGE).text();
        if (JournalEvent.HISTOGRAM_SNAPSHOT != type)
        {
            return new JournalRecord(index, type, timestampMs, severity, jobId, tenant, jobName, message,
                JournalRecord.NO_SHARD_ID, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        }
        return new JournalRecord(index, type, timestampMs, severity, jobId, tenant, jobName, message,
            wire.read(JournalSchema.SHARD_ID).int32(),
            wire.read(JournalSchema.INTERVAL_START_MS).int64(),
            wire.read(JournalSchema.INTERVAL_END_MS).int64(),
            wire.read(JournalSchema.COUNT).int64(),
            wire.read(JournalSchema.MIN_NS).int64(),
            wire.read(JournalSchema.P50_NS).int64(),
            wire.read(JournalSchema.P90_NS).int64(),
            wire.read(JournalSchema.P99_NS).int64(),
            wire.read(JournalSchema.P999_NS).int64(),
            wire.read(JournalSchema.MAX_NS).int64());
    }
}
