package io.switchml.appliance.journal;

import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalSchema;
import net.openhft.chronicle.queue.ExcerptAppender;
import net.openhft.chronicle.queue.RollCycle;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueue;
import net.openhft.chronicle.wire.DocumentContext;
import net.openhft.chronicle.wire.Wire;
import org.agrona.ErrorHandler;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.MessageHandler;
import org.agrona.concurrent.ringbuffer.RingBuffer;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static io.switchml.appliance.journal.JournalEventFlyweight.*;

/**
 * The journal's only writer: drains the ring buffer that {@link Journal}'s offers fill and appends each
 * event to the Chronicle Queue as a self-describing document ({@link JournalSchema}). Runs on its own
 * thread (or an invoker), so page faults and file creation never stall an offering thread. After each
 * roll to a new cycle it applies {@link JournalRetention}.
 * <p>
 * The appender is created on the first duty cycle, on the thread that runs the agent, because Chronicle
 * appenders are confined to one thread.
 */
final class JournalWriterAgent implements Agent, MessageHandler
{
    /** Events appended per duty cycle at most. */
    static final int DRAIN_LIMIT = 256;
    /** How long {@link #onClose()} waits for offers that claimed space but have not committed yet. */
    static final long CLOSE_DRAIN_TIMEOUT_NS = TimeUnit.MILLISECONDS.toNanos(100);

    private final RingBuffer ringBuffer;
    private final SingleChronicleQueue queue;
    private final Path directory;
    private final RollCycle rollCycle;
    private final int retainedCycles;
    private final ErrorHandler errorHandler;
    private final AtomicLong writtenEvents;
    private final StringBuilder tenant = new StringBuilder(64);
    private final StringBuilder jobName = new StringBuilder(64);
    private final StringBuilder message = new StringBuilder(256);
    private ExcerptAppender appender;
    private int lastCycle = Integer.MIN_VALUE;
    private boolean closed;

    JournalWriterAgent(
        final RingBuffer ringBuffer,
        final SingleChronicleQueue queue,
        final Path directory,
        final RollCycle rollCycle,
        final int retainedCycles,
        final ErrorHandler errorHandler,
        final AtomicLong writtenEvents)
    {
        this.ringBuffer = ringBuffer;
        this.queue = queue;
        this.directory = directory;
        this.rollCycle = rollCycle;
        this.retainedCycles = retainedCycles;
        this.errorHandler = errorHandler;
        this.writtenEvents = writtenEvents;
    }

    public String roleName()
    {
        return "switchml-journal";
    }

    public int doWork()
    {
        if (closed)
        {
            return 0;
        }
        final int events = ringBuffer.read(this, DRAIN_LIMIT);
        if (events > 0)
        {
            checkRoll();
        }
        return events;
    }

    /**
     * Append what is left in the ring buffer, waiting up to {@link #CLOSE_DRAIN_TIMEOUT_NS} for offers
     * still in progress, then close the queue.
     */
    public void onClose()
    {
        if (closed)
        {
            return;
        }
        if (null != appender)
        {
            // with an invoker, close() may come from another thread than the duty cycles did
            appender.singleThreadedCheckReset();
        }
        try
        {
            final long deadlineNs = System.nanoTime() + CLOSE_DRAIN_TIMEOUT_NS;
            while (true)
            {
                try
                {
                    while (ringBuffer.read(this) > 0)
                    {
                        checkRoll();
                    }
                }
                catch (final Throwable error)
                {
                    errorHandler.onError(error);
                }
                if (ringBuffer.producerPosition() <= ringBuffer.consumerPosition() || System.nanoTime() > deadlineNs)
                {
                    break;
                }
                Thread.onSpinWait();
            }
        }
        finally
        {
            closed = true;
            closeQueue();
        }
    }

    public void onMessage(final int msgTypeId, final MutableDirectBuffer buffer, final int index, final int length)
    {
        final JournalEvent type = JournalEvent.fromTypeId(msgTypeId);
        if (null == type)
        {
            errorHandler.onError(new IllegalStateException("journal: unknown event type id " + msgTypeId));
            return;
        }
        if (null == appender)
        {
            appender = queue.createAppender();
        }

        final int tenantLength = tenantLength(buffer, index);
        final int jobNameLength = jobNameLength(buffer, index);
        final int messageLength = messageLength(buffer, index);
        int textIndex = index + HEADER_LENGTH;
        final CharSequence tenantText = text(buffer, textIndex, tenantLength, tenant);
        textIndex += storedLength(tenantLength);
        final CharSequence jobNameText = text(buffer, textIndex, jobNameLength, jobName);
        textIndex += storedLength(jobNameLength);
        final CharSequence messageText = text(buffer, textIndex, messageLength, message);

        try (DocumentContext document = appender.writingDocument())
        {
            final Wire wire = document.wire();
            wire.write(JournalSchema.TYPE).text(type.name())
                .write(JournalSchema.TIMESTAMP_MS).int64(timestampMs(buffer, index))
                .write(JournalSchema.SEVERITY).text(severity(buffer, index).name())
                .write(JournalSchema.JOB_ID).int32(jobId(buffer, index))
                .write(JournalSchema.TENANT).text(tenantText)
                .write(JournalSchema.JOB_NAME).text(jobNameText)
                .write(JournalSchema.MESSAGE).text(messageText);
            if (JournalEvent.HISTOGRAM_SNAPSHOT == type)
            {
                wire.write(JournalSchema.SHARD_ID).int32(buffer.getInt(index + SHARD_ID_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.INTERVAL_START_MS).int64(buffer.getLong(index + INTERVAL_START_MS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.INTERVAL_END_MS).int64(buffer.getLong(index + INTERVAL_END_MS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.COUNT).int64(buffer.getLong(index + COUNT_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.MIN_NS).int64(buffer.getLong(index + MIN_NS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.P50_NS).int64(buffer.getLong(index + P50_NS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.P90_NS).int64(buffer.getLong(index + P90_NS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.P99_NS).int64(buffer.getLong(index + P99_NS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.P999_NS).int64(buffer.getLong(index + P999_NS_OFFSET, BYTE_ORDER))
                    .write(JournalSchema.MAX_NS).int64(buffer.getLong(index + MAX_NS_OFFSET, BYTE_ORDER));
            }
        }
        writtenEvents.setRelease(writtenEvents.getPlain() + 1);
    }

    private static CharSequence text(
        final MutableDirectBuffer buffer, final int index, final int length, final StringBuilder out)
    {
        if (length < 0)
        {
            return null;
        }
        getUtf8(buffer, index, length, out);
        return out;
    }

    private void checkRoll()
    {
        if (null == appender)
        {
            return;
        }
        final int cycle = appender.cycle();
        if (cycle != lastCycle)
        {
            lastCycle = cycle;
            try
            {
                if (!JournalRetention.deleteOldCycles(directory, rollCycle, retainedCycles).isEmpty())
                {
                    queue.refreshDirectoryListing();
                }
            }
            catch (final Exception error)
            {
                errorHandler.onError(error);
            }
        }
    }

    private void closeQueue()
    {
        try
        {
            if (null != appender)
            {
                appender.close();
            }
        }
        catch (final Throwable error)
        {
            errorHandler.onError(error);
        }
        finally
        {
            queue.close();
        }
    }
}
