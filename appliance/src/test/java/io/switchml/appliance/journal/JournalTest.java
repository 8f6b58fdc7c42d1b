package io.switchml.appliance.journal;

import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalSeverity;
import net.openhft.chronicle.queue.rollcycles.TestRollCycles;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.CachedEpochClock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class JournalTest
{
    private static final long START_MS = 1_790_000_000_000L;
    private static final long SMALL_BLOCK_BYTES = 256 << 10;

    @TempDir
    Path directory;

    private final CachedEpochClock clock = new CachedEpochClock();

    private JournalContext context()
    {
        clock.update(START_MS);
        return new JournalContext()
            .directory(directory)
            .blockSizeBytes(SMALL_BLOCK_BYTES)
            .epochClock(clock);
    }

    private List<JournalRecord> readAll(final JournalReader reader)
    {
        final List<JournalRecord> records = new ArrayList<>();
        reader.readAvailable(records::add);
        return records;
    }

    @Test
    void everyEventTypeIsReadBackAfterClose()
    {
        final Histogram histogram = new Histogram(1_000, 10_000_000_000L, 3);
        for (int i = 1; i <= 1000; i++)
        {
            histogram.recordValue(i * 1_000L);
        }
        try (Journal journal = Journal.open(context()))
        {
            assertTrue(journal.offerApplianceStarted("appliance 0.1 on 127.0.0.1:7471"));
            clock.advance(1);
            assertTrue(journal.offerJobCreated(7, "tenant-a", "résumé-job", "world 4, k 8192, s 32"));
            clock.advance(1);
            assertTrue(journal.offerJobStarted(7, "tenant-a", "résumé-job", null));
            clock.advance(1);
            assertTrue(journal.offerFault(JournalSeverity.WARN, 7, "tenant-a", "résumé-job", "slot 3 deadline: missing ranks [2] 😀"));
            clock.advance(1);
            assertTrue(journal.offerHistogramSnapshot(2, START_MS - 1000, START_MS + 3, histogram));
            clock.advance(1);
            assertTrue(journal.offerJobAborted(7, "tenant-a", "résumé-job", "rank 2 control connection lost"));
            clock.advance(1);
            assertTrue(journal.offerJobEnded(8, null, null, null));
            clock.advance(1);
            assertTrue(journal.offer(JournalEvent.FAULT, JournalSeverity.ERROR, JournalRecord.NO_JOB_ID, null, null, "disk full"));
            clock.advance(1);
            assertTrue(journal.offerApplianceStopping("SIGTERM"));
            assertThrows(IllegalArgumentException.class, () ->
                journal.offer(JournalEvent.HISTOGRAM_SNAPSHOT, JournalSeverity.INFO, 1, null, null, null));
        }

        try (JournalReader reader = JournalReader.open(directory))
        {
            final List<JournalRecord> records = readAll(reader);
            assertEquals(9, records.size(), records.toString());

            final JournalRecord started = records.get(0);
            assertEquals(JournalEvent.APPLIANCE_STARTED, started.type());
            assertEquals(START_MS, started.timestampMs());
            assertEquals(JournalSeverity.INFO, started.severity());
            assertFalse(started.hasJobId());
            assertNull(started.tenant());
            assertEquals("appliance 0.1 on 127.0.0.1:7471", started.message());

            final JournalRecord created = records.get(1);
            assertEquals(JournalEvent.JOB_CREATED, created.type());
            assertEquals(START_MS + 1, created.timestampMs());
            assertEquals(7, created.jobId());
            assertEquals("tenant-a", created.tenant());
            assertEquals("résumé-job", created.jobName());
            assertEquals("world 4, k 8192, s 32", created.message());
            assertEquals(JournalRecord.NO_SHARD_ID, created.shardId());

            assertNull(records.get(2).message());
            assertEquals(JournalEvent.JOB_STARTED, records.get(2).type());

            final JournalRecord fault = records.get(3);
            assertEquals(JournalEvent.FAULT, fault.type());
            assertEquals(JournalSeverity.WARN, fault.severity());
            assertEquals("slot 3 deadline: missing ranks [2] 😀", fault.message());

            final JournalRecord snapshot = records.get(4);
            assertEquals(JournalEvent.HISTOGRAM_SNAPSHOT, snapshot.type());
            assertEquals(JournalSeverity.INFO, snapshot.severity());
            assertEquals(2, snapshot.shardId());
            assertEquals(START_MS - 1000, snapshot.intervalStartMs());
            assertEquals(START_MS + 3, snapshot.intervalEndMs());
            assertEquals(1000, snapshot.count());
            assertEquals(histogram.getMinValue(), snapshot.minNs());
            assertEquals(histogram.getValueAtPercentile(50), snapshot.p50Ns());
            assertEquals(histogram.getValueAtPercentile(90), snapshot.p90Ns());
            assertEquals(histogram.getValueAtPercentile(99), snapshot.p99Ns());
            assertEquals(histogram.getValueAtPercentile(99.9), snapshot.p999Ns());
            assertEquals(histogram.getMaxValue(), snapshot.maxNs());
            assertTrue(snapshot.p50Ns() > 400_000 && snapshot.p50Ns() < 600_000, snapshot.toString());

            assertEquals(JournalEvent.JOB_ABORTED, records.get(5).type());
            assertEquals(JournalSeverity.WARN, records.get(5).severity());
            assertEquals(JournalEvent.JOB_ENDED, records.get(6).type());
            assertEquals(8, records.get(6).jobId());
            assertNull(records.get(6).jobName());
            assertEquals(JournalSeverity.ERROR, records.get(7).severity());
            assertEquals(JournalEvent.APPLIANCE_STOPPING, records.get(8).type());
            assertEquals("SIGTERM", records.get(8).message());

            for (int i = 1; i < records.size(); i++)
            {
                assertTrue(records.get(i).index() > records.get(i - 1).index());
            }
        }
    }

    @Test
    void readerTailsTheJournalWhileTheWriterRuns() throws InterruptedException
    {
        try (Journal journal = Journal.open(context());
            JournalReader reader = JournalReader.open(directory))
        {
            assertNull(reader.poll());
            assertNull(reader.poll(20));
            for (int i = 0; i < 50; i++)
            {
                assertTrue(journal.offerJobCreated(i, "t", "job-" + i, null));
                final JournalRecord record = reader.poll(5_000);
                assertNotNull(record, "event " + i + " not seen by the live reader");
                assertEquals(i, record.jobId());
                assertEquals("job-" + i, record.jobName());
            }
            assertNull(reader.poll());
            assertEquals(50, journal.writtenEvents());
        }
    }

    @Test
    void filtersSelectByJobSeverityTypeAndTime()
    {
        try (Journal journal = Journal.open(context()))
        {
            journal.offerApplianceStarted(null);
            clock.advance(1_000);
            journal.offerJobCreated(1, "t", "one", null);
            journal.offerJobCreated(2, "t", "two", null);
            clock.advance(1_000);
            journal.offerFault(JournalSeverity.WARN, 1, "t", "one", "slot deadline");
            journal.offerFault(JournalSeverity.ERROR, 2, "t", "two", "error");
            clock.advance(1_000);
            journal.offerJobAborted(1, "t", "one", "aborted");
            journal.offerJobEnded(2, "t", "two", null);
        }

        try (JournalReader reader = JournalReader.open(directory))
        {
            assertEquals(7, readAll(reader).size());

            reader.toStart().jobId(1);
            assertEquals(List.of(JournalEvent.JOB_CREATED, JournalEvent.FAULT, JournalEvent.JOB_ABORTED),
                readAll(reader).stream().map(JournalRecord::type).toList());

            reader.toStart().anyJob().minSeverity(JournalSeverity.WARN);
            assertEquals(List.of("slot deadline", "error", "aborted"),
                readAll(reader).stream().map(JournalRecord::message).toList());

            reader.toStart().minSeverity(JournalSeverity.ERROR);
            assertEquals(List.of("error"), readAll(reader).stream().map(JournalRecord::message).toList());

            reader.toStart().minSeverity(JournalSeverity.INFO).types(JournalEvent.JOB_CREATED, JournalEvent.JOB_ENDED);
            assertEquals(List.of(1, 2, 2), readAll(reader).stream().map(JournalRecord::jobId).toList());

            reader.toStart().types(EnumSet.allOf(JournalEvent.class)).fromTimestampMs(START_MS + 2_000);
            assertEquals(4, readAll(reader).size());

            reader.toStart().jobId(2).fromTimestampMs(START_MS + 2_000).types(JournalEvent.FAULT);
            final List<JournalRecord> records = readAll(reader);
            assertEquals(1, records.size());
            assertEquals("error", records.get(0).message());

            reader.toEnd().anyJob().types(EnumSet.allOf(JournalEvent.class)).fromTimestampMs(Long.MIN_VALUE);
            assertNull(reader.poll());
        }
    }

    @Test
    void fullRingBufferDropsAndCountsWithoutBlocking()
    {
        try (Journal journal = Journal.open(context().ringBufferBytes(1024).useWriterInvoker(true)))
        {
            int accepted = 0;
            final long startNs = System.nanoTime();
            while (journal.offerFault(JournalSeverity.WARN, accepted, "t", "j", "event " + accepted))
            {
                accepted++;
                assertTrue(accepted < 1024, "ring buffer of 1 KiB never filled");
            }
            assertTrue(accepted > 5, "accepted " + accepted);
            assertEquals(1, journal.droppedEvents());
            assertFalse(journal.offerJobEnded(1, "t", "j", null));
            assertFalse(journal.offerHistogramSnapshot(0, 0, 1, new Histogram(3)));
            assertEquals(3, journal.droppedEvents());
            assertTrue(System.nanoTime() - startNs < TimeUnit.SECONDS.toNanos(5));

            // an event longer than the ring buffer's longest message (1024 / 8) is dropped, never blocks
            assertFalse(journal.offerFault(JournalSeverity.ERROR, 1, null, null, "x".repeat(200)));
            assertEquals(4, journal.droppedEvents());

            int drained = 0;
            for (int work; (work = journal.writerInvoker().invoke()) > 0; )
            {
                drained += work;
            }
            assertEquals(accepted, drained);
            assertEquals(accepted, journal.writtenEvents());
            assertTrue(journal.offerJobEnded(1, "t", "j", "after drain"));
            // where the ring buffer wraps, a read may consume only the padding record (and report no work)
            for (int i = 0; i < 3 && journal.writtenEvents() < accepted + 1; i++)
            {
                journal.writerInvoker().invoke();
            }
            assertEquals(accepted + 1, journal.writtenEvents());

            try (JournalReader reader = JournalReader.open(directory))
            {
                final List<JournalRecord> records = readAll(reader);
                assertEquals(accepted + 1, records.size());
                assertEquals("event 0", records.get(0).message());
                assertEquals("after drain", records.get(accepted).message());
            }
        }
    }

    @Test
    void closeAppendsPendingEvents()
    {
        final Journal stalled = Journal.open(context().useWriterInvoker(true));
        for (int i = 0; i < 100; i++)
        {
            assertTrue(stalled.offerJobStarted(i, "t", "j", null));
        }
        assertEquals(0, stalled.writtenEvents());
        stalled.close();
        assertEquals(100, stalled.writtenEvents());
        assertFalse(stalled.offerJobStarted(1, "t", "j", null), "offer after close");
        stalled.close();

        try (Journal journal = Journal.open(context()))
        {
            for (int i = 100; i < 2_100; i++)
            {
                assertTrue(journal.offerJobStarted(i, "t", "j", null));
            }
        }

        try (JournalReader reader = JournalReader.open(directory))
        {
            final List<JournalRecord> records = readAll(reader);
            assertEquals(2_100, records.size());
            for (int i = 0; i < records.size(); i++)
            {
                assertEquals(i, records.get(i).jobId());
            }
        }
    }

    @Test
    void invokerJournalClosedFromAnotherThreadAppendsEverything() throws Exception
    {
        final Journal journal = Journal.open(context().useWriterInvoker(true));
        assertTrue(journal.offerJobCreated(1, "t", "j", null));
        assertEquals(1, journal.writerInvoker().invoke());
        assertTrue(journal.offerJobEnded(1, "t", "j", null));
        final Thread closer = Thread.ofPlatform().start(journal::close);
        closer.join();
        assertEquals(2, journal.writtenEvents());
        try (JournalReader reader = JournalReader.open(directory))
        {
            assertEquals(List.of(JournalEvent.JOB_CREATED, JournalEvent.JOB_ENDED),
                readAll(reader).stream().map(JournalRecord::type).toList());
        }
    }

    @Test
    void concurrentOffersAreAllWrittenInEachThreadsOrder() throws Exception
    {
        final int threads = 3;
        final int perThread = 2_000;
        try (Journal journal = Journal.open(context()))
        {
            final Thread[] offerers = new Thread[threads];
            for (int t = 0; t < threads; t++)
            {
                final int thread = t;
                offerers[t] = Thread.ofPlatform().start(() ->
                {
                    final StringBuilder message = new StringBuilder();
                    for (int i = 0; i < perThread; i++)
                    {
                        message.setLength(0);
                        message.append(i);
                        journal.offerFault(JournalSeverity.INFO, thread, null, null, message);
                    }
                });
            }
            for (final Thread offerer : offerers)
            {
                offerer.join();
            }
            assertEquals(0, journal.droppedEvents());
        }

        try (JournalReader reader = JournalReader.open(directory))
        {
            final int[] next = new int[threads];
            final int count = reader.readAvailable(record ->
                assertEquals(next[record.jobId()]++, Integer.parseInt(record.message()), record.toString()));
            assertEquals(threads * perThread, count);
        }
    }

    @Test
    void retentionKeepsTheNewestCycles() throws Exception
    {
        try (Journal journal = Journal.open(context()
            .rollCycle(TestRollCycles.TEST_SECONDLY)
            .retainedCycles(3)
            .useWriterInvoker(true)))
        {
            for (int i = 0; i < 6; i++)
            {
                clock.advance(1_000);
                assertTrue(journal.offerJobCreated(i, "t", "j", null));
                assertEquals(1, journal.writerInvoker().invoke());
            }
            assertEquals(3, JournalRetention.cycleFiles(directory, TestRollCycles.TEST_SECONDLY).size());
        }

        try (JournalReader reader = JournalReader.open(directory))
        {
            assertEquals(List.of(3, 4, 5), readAll(reader).stream().map(JournalRecord::jobId).toList());
        }
    }

    @Test
    void textsAreTruncatedAtACodePoint()
    {
        final String longMessage = "é".repeat(Journal.MAX_MESSAGE_BYTES);
        final String longName = "n".repeat(Journal.MAX_NAME_BYTES - 1) + "😀";
        try (Journal journal = Journal.open(context().useWriterInvoker(true)))
        {
            assertTrue(journal.offerJobCreated(1, longName, longName, longMessage));
        }
        try (JournalReader reader = JournalReader.open(directory))
        {
            final JournalRecord record = reader.poll();
            assertNotNull(record);
            assertEquals("é".repeat(Journal.MAX_MESSAGE_BYTES / 2), record.message());
            assertEquals("n".repeat(Journal.MAX_NAME_BYTES - 1), record.tenant());
            assertEquals("n".repeat(Journal.MAX_NAME_BYTES - 1), record.jobName());
        }
    }

    @Test
    void readerRefusesADirectoryWithoutAJournal()
    {
        final IllegalArgumentException error =
            assertThrows(IllegalArgumentException.class, () -> JournalReader.open(directory.resolve("none")));
        assertTrue(error.getMessage().contains("no journal"), error.getMessage());
    }

    @Test
    void contextNamesTheBadOption()
    {
        final IllegalArgumentException ring = assertThrows(IllegalArgumentException.class,
            () -> new JournalContext().ringBufferBytes(1000).conclude());
        assertTrue(ring.getMessage().contains(JournalContext.RING_BUFFER_BYTES_PROP), ring.getMessage());
        final IllegalArgumentException retained = assertThrows(IllegalArgumentException.class,
            () -> new JournalContext().retainedCycles(0).conclude());
        assertTrue(retained.getMessage().contains(JournalContext.RETAINED_CYCLES_PROP), retained.getMessage());
        final java.util.Properties properties = new java.util.Properties();
        properties.setProperty(JournalContext.ROLL_CYCLE_PROP, "weekly");
        final IllegalArgumentException roll = assertThrows(IllegalArgumentException.class,
            () -> new JournalContext().apply(properties));
        assertTrue(roll.getMessage().contains(JournalContext.ROLL_CYCLE_PROP), roll.getMessage());
    }
}
