package io.switchml.appliance.journal;

import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalSeverity;
import io.switchml.journal.ChronicleSettings;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueue;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueBuilder;
import org.HdrHistogram.Histogram;
import org.agrona.CloseHelper;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.concurrent.atomic.AtomicLong;

import static io.switchml.appliance.journal.JournalEventFlyweight.*;

/**
 * The appliance's durable event journal: job life-cycle events, faults and latency snapshots, kept in a
 * Chronicle Queue directory that the ops CLI reads with {@link JournalReader}, live or after the fact.
 * <p>
 * Any thread (shards, the control thread) may call the {@code offer...} methods: they copy the event into
 * an Agrona {@link ManyToOneRingBuffer} and return at once, never blocking, never allocating (texts are
 * {@link CharSequence}s encoded in place). When the ring buffer is full, or the event does not fit in it,
 * or the journal is closed, the event is dropped, counted in {@link #droppedEvents()}, and the offer
 * returns false. A single writer ({@link JournalWriterAgent} on its own daemon thread, or driven through
 * {@link #writerInvoker()}) appends the events to the queue.
 * <p>
 * Events are stamped with the context's epoch clock when offered. Texts are truncated at a code point
 * boundary: tenant and job name to {@value #MAX_NAME_BYTES} bytes of UTF-8, message to
 * {@value #MAX_MESSAGE_BYTES}. Do not change a text while it is being offered.
 * <p>
 * {@link #close()} appends what is left in the ring buffer and closes the queue; the appliance calls it on
 * its shutdown path (SIGTERM). An offer racing with close may be lost.
 */
public final class Journal implements AutoCloseable
{
    /** Longest tenant or job name kept, in UTF-8 bytes. */
    public static final int MAX_NAME_BYTES = 256;
    /** Longest message kept, in UTF-8 bytes. */
    public static final int MAX_MESSAGE_BYTES = 4096;

    static
    {
        ChronicleSettings.apply();
    }

    private final JournalContext context;
    private final EpochClock epochClock;
    private final ManyToOneRingBuffer ringBuffer;
    private final AtomicBuffer buffer;
    private final int maxEventLength;
    private final AtomicLong droppedEvents = new AtomicLong();
    private final AtomicLong writtenEvents = new AtomicLong();
    private final JournalWriterAgent writer;
    private final AgentRunner writerRunner;
    private final AgentInvoker writerInvoker;
    private volatile boolean closed;

    private Journal(final JournalContext context)
    {
        this.context = context;
        this.epochClock = context.epochClock();
        this.buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(
            context.ringBufferBytes() + RingBufferDescriptor.TRAILER_LENGTH));
        this.ringBuffer = new ManyToOneRingBuffer(buffer);
        this.maxEventLength = ringBuffer.maxMsgLength();

        try
        {
            Files.createDirectories(context.directory());
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("journal: cannot create " + context.directory(), ex);
        }
        ChronicleSettings.confine(context.directory(), true);
        final SingleChronicleQueueBuilder builder = SingleChronicleQueueBuilder.binary(context.directory())
            .rollCycle(context.rollCycle())
            .timeProvider(epochClock::time);
        if (context.blockSizeBytes() > 0)
        {
            builder.blockSize(context.blockSizeBytes());
        }
        final SingleChronicleQueue queue = builder.build();

        writer = new JournalWriterAgent(ringBuffer, queue, context.directory(), context.rollCycle(),
            context.retainedCycles(), context.errorHandler(), writtenEvents);
        if (context.useWriterInvoker())
        {
            writerRunner = null;
            writerInvoker = new AgentInvoker(context.errorHandler(), null, writer);
            writerInvoker.start();
        }
        else
        {
            writerInvoker = null;
            writerRunner = new AgentRunner(context.idleStrategy(), context.errorHandler(), null, writer);
            AgentRunner.startOnThread(writerRunner, runnable -> Thread.ofPlatform()
                .name(writer.roleName())
                .daemon(true)
                .unstarted(runnable));
        }
    }

    /**
     * Open (or create) the journal in the context's directory and start its writer.
     *
     * @param context configuration; concluded here.
     */
    public static Journal open(final JournalContext context)
    {
        return new Journal(context.conclude());
    }

    /**
     * Offer a job life-cycle event with its type's default severity.
     *
     * @param type    {@link JournalEvent#JOB_CREATED}, {@link JournalEvent#JOB_STARTED},
     *                {@link JournalEvent#JOB_ENDED} or {@link JournalEvent#JOB_ABORTED}.
     * @param jobId   the job.
     * @param tenant  its tenant, or null.
     * @param jobName its name, or null.
     * @param message free text, or null.
     * @return whether the event was queued for the writer.
     */
    public boolean offerJobEvent(
        final JournalEvent type,
        final int jobId,
        final CharSequence tenant,
        final CharSequence jobName,
        final CharSequence message)
    {
        return offer(type, type.defaultSeverity(), jobId, tenant, jobName, message);
    }

    /**
     * Offer {@link JournalEvent#JOB_CREATED} (INFO).
     *
     * @return whether the event was queued for the writer.
     */
    public boolean offerJobCreated(
        final int jobId, final CharSequence tenant, final CharSequence jobName, final CharSequence message)
    {
        return offer(JournalEvent.JOB_CREATED, JournalSeverity.INFO, jobId, tenant, jobName, message);
    }

    /**
     * Offer {@link JournalEvent#JOB_STARTED} (INFO).
     *
     * @return whether the event was queued for the writer.
     */
    public boolean offerJobStarted(
        final int jobId, final CharSequence tenant, final CharSequence jobName, final CharSequence message)
    {
        return offer(JournalEvent.JOB_STARTED, JournalSeverity.INFO, jobId, tenant, jobName, message);
    }

    /**
     * Offer {@link JournalEvent#JOB_ENDED} (INFO).
     *
     * @return whether the event was queued for the writer.
     */
    public boolean offerJobEnded(
        final int jobId, final CharSequence tenant, final CharSequence jobName, final CharSequence message)
    {
        return offer(JournalEvent.JOB_ENDED, JournalSeverity.INFO, jobId, tenant, jobName, message);
    }

    /**
     * Offer {@link JournalEvent#JOB_ABORTED} (WARN).
     *
     * @param message why it was aborted.
     * @return whether the event was queued for the writer.
     */
    public boolean offerJobAborted(
        final int jobId, final CharSequence tenant, final CharSequence jobName, final CharSequence message)
    {
        return offer(JournalEvent.JOB_ABORTED, JournalSeverity.WARN, jobId, tenant, jobName, message);
    }

    /**
     * Offer a {@link JournalEvent#FAULT}: a slot deadline, a lost control connection, an error.
     *
     * @param severity how bad it is.
     * @param jobId    the job it concerns, or {@link JournalRecord#NO_JOB_ID}.
     * @param tenant   that job's tenant, or null.
     * @param jobName  that job's name, or null.
     * @param message  what happened.
     * @return whether the event was queued for the writer.
     */
    public boolean offerFault(
        final JournalSeverity severity,
        final int jobId,
        final CharSequence tenant,
        final CharSequence jobName,
        final CharSequence message)
    {
        return offer(JournalEvent.FAULT, severity, jobId, tenant, jobName, message);
    }

    /**
     * Offer {@link JournalEvent#APPLIANCE_STARTED} (INFO).
     *
     * @param message e.g. the version and the resolved configuration, or null.
     * @return whether the event was queued for the writer.
     */
    public boolean offerApplianceStarted(final CharSequence message)
    {
        return offer(JournalEvent.APPLIANCE_STARTED, JournalSeverity.INFO, JournalRecord.NO_JOB_ID, null, null,
            message);
    }

    /**
     * Offer {@link JournalEvent#APPLIANCE_STOPPING} (INFO).
     *
     * @param message e.g. why, or null.
     * @return whether the event was queued for the writer.
     */
    public boolean offerApplianceStopping(final CharSequence message)
    {
        return offer(JournalEvent.APPLIANCE_STOPPING, JournalSeverity.INFO, JournalRecord.NO_JOB_ID, null, null,
            message);
    }

    /**
     * Offer any text event.
     *
     * @param type     any type but {@link JournalEvent#HISTOGRAM_SNAPSHOT}.
     * @param severity how bad it is.
     * @param jobId    the job it concerns, or {@link JournalRecord#NO_JOB_ID}.
     * @param tenant   that job's tenant, or null.
     * @param jobName  that job's name, or null.
     * @param message  free text, or null.
     * @return whether the event was queued for the writer; false when dropped (counted).
     * @throws IllegalArgumentException for {@link JournalEvent#HISTOGRAM_SNAPSHOT}.
     */
    public boolean offer(
        final JournalEvent type,
        final JournalSeverity severity,
        final int jobId,
        final CharSequence tenant,
        final CharSequence jobName,
        final CharSequence message)
    {
        if (JournalEvent.HISTOGRAM_SNAPSHOT == type)
        {
            throw new IllegalArgumentException("use offerHistogramSnapshot for " + type);
        }
        if (closed)
        {
            return drop();
        }
        final long timestampMs = epochClock.time();
        final int tenantLength = utf8Length(tenant, MAX_NAME_BYTES);
        final int jobNameLength = utf8Length(jobName, MAX_NAME_BYTES);
        final int messageLength = utf8Length(message, MAX_MESSAGE_BYTES);
        final int length = HEADER_LENGTH + storedLength(tenantLength) + storedLength(jobNameLength) +
            storedLength(messageLength);
        if (length > maxEventLength)
        {
            return drop();
        }
        final int index = ringBuffer.tryClaim(type.typeId(), length);
        if (index <= 0)
        {
            return drop();
        }
        try
        {
            putHeader(buffer, index, timestampMs, jobId, severity, tenantLength, jobNameLength, messageLength);
            int textIndex = index + HEADER_LENGTH;
            putUtf8(buffer, textIndex, tenant, tenantLength);
            textIndex += storedLength(tenantLength);
            putUtf8(buffer, textIndex, jobName, jobNameLength);
            textIndex += storedLength(jobNameLength);
            putUtf8(buffer, textIndex, message, messageLength);
        }
        catch (final RuntimeException ex)
        {
            ringBuffer.abort(index);
            return drop();
        }
        ringBuffer.commit(index);
        return true;
    }

    /**
     * Offer a {@link JournalEvent#HISTOGRAM_SNAPSHOT} (INFO) of one shard's slot-completion latency: count,
     * min, p50, p90, p99, p99.9 and max of {@code histogram}, read here (the caller may reuse it on return).
     * Does not allocate.
     *
     * @param shardId   the data-plane shard.
     * @param startMs   start of the interval the histogram covers, epoch ms.
     * @param endMs     end of that interval, epoch ms.
     * @param histogram latencies in nanoseconds.
     * @return whether the event was queued for the writer; false when dropped (counted).
     */
    public boolean offerHistogramSnapshot(
        final int shardId, final long startMs, final long endMs, final Histogram histogram)
    {
        if (closed)
        {
            return drop();
        }
        final long timestampMs = epochClock.time();
        final long count = histogram.getTotalCount();
        final long minNs = count > 0 ? histogram.getMinValue() : 0;
        final long p50Ns = histogram.getValueAtPercentile(50.0);
        final long p90Ns = histogram.getValueAtPercentile(90.0);
        final long p99Ns = histogram.getValueAtPercentile(99.0);
        final long p999Ns = histogram.getValueAtPercentile(99.9);
        final long maxNs = histogram.getMaxValue();
        if (HISTOGRAM_LENGTH > maxEventLength)
        {
            return drop();
        }
        final int index = ringBuffer.tryClaim(JournalEvent.HISTOGRAM_SNAPSHOT.typeId(), HISTOGRAM_LENGTH);
        if (index <= 0)
        {
            return drop();
        }
        putHeader(buffer, index, timestampMs, JournalRecord.NO_JOB_ID, JournalSeverity.INFO,
            NULL_LENGTH, NULL_LENGTH, NULL_LENGTH);
        buffer.putInt(index + SHARD_ID_OFFSET, shardId, BYTE_ORDER);
        buffer.putInt(index + SHARD_ID_OFFSET + 4, 0, BYTE_ORDER);
        buffer.putLong(index + INTERVAL_START_MS_OFFSET, startMs, BYTE_ORDER);
        buffer.putLong(index + INTERVAL_END_MS_OFFSET, endMs, BYTE_ORDER);
        buffer.putLong(index + COUNT_OFFSET, count, BYTE_ORDER);
        buffer.putLong(index + MIN_NS_OFFSET, minNs, BYTE_ORDER);
        buffer.putLong(index + P50_NS_OFFSET, p50Ns, BYTE_ORDER);
        buffer.putLong(index + P90_NS_OFFSET, p90Ns, BYTE_ORDER);
        buffer.putLong(index + P99_NS_OFFSET, p99Ns, BYTE_ORDER);
        buffer.putLong(index + P999_NS_OFFSET, p999Ns, BYTE_ORDER);
        buffer.putLong(index + MAX_NS_OFFSET, maxNs, BYTE_ORDER);
        ringBuffer.commit(index);
        return true;
    }

    /**
     * @return events dropped since open: ring buffer full, event too long for it, or offered after close.
     */
    public long droppedEvents()
    {
        return droppedEvents.get();
    }

    /**
     * @return events the writer has appended to the queue since open.
     */
    public long writtenEvents()
    {
        return writtenEvents.get();
    }

    /**
     * @return the invoker that drives the writer when the context asked for
     * {@link JournalContext#useWriterInvoker(boolean)}, else null (the writer has its own thread).
     */
    public AgentInvoker writerInvoker()
    {
        return writerInvoker;
    }

    /**
     * @return the resolved configuration.
     */
    public JournalContext context()
    {
        return context;
    }

    /**
     * Stop taking events, append those still in the ring buffer, close the queue. Idempotent. Waits for
     * the writer thread to finish.
     */
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        if (null != writerRunner)
        {
            CloseHelper.close(context.errorHandler(), writerRunner);
        }
        else
        {
            CloseHelper.close(context.errorHandler(), writerInvoker);
        }
    }

    private boolean drop()
    {
        droppedEvents.getAndIncrement();
        return false;
    }
}
