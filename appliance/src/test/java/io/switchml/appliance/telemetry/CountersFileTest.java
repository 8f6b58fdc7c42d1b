package io.switchml.appliance.telemetry;

import io.switchml.protocol.DropReason;
import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.CountersFileDescriptor;
import io.switchml.protocol.telemetry.CountersFileReader;
import io.switchml.protocol.telemetry.ErrorRecord;
import io.switchml.protocol.telemetry.SystemCounter;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.status.CountersReader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The counters file written by {@link CountersFile} and read through a separate read-only mapping of the
 * same path, as another process would.
 */
class CountersFileTest
{
    @TempDir
    Path directory;

    private CountersFile countersFile;
    private CountersFileReader reader;

    @BeforeEach
    void before()
    {
        countersFile = new CountersFile(directory.resolve("telemetry"));
        reader = io.switchml.protocol.telemetry.CountersFile.open(directory.resolve("telemetry"), 1_000);
    }

    @AfterEach
    void after()
    {
        reader.close();
        countersFile.close();
    }

    @Test
    void readerSeesTheHeaderAndTheSystemCountersAtTheirFixedIds()
    {
        assertEquals(directory.resolve("telemetry").resolve(CountersFileDescriptor.FILENAME), countersFile.file());
        assertEquals(ProcessHandle.current().pid(), reader.pid());
        assertEquals(countersFile.startTimestampMs(), reader.startTimestampMs());
        assertTrue(Math.abs(SystemEpochClock.INSTANCE.time() - reader.startTimestampMs()) < 60_000);
        assertTrue(reader.isWriterAlive());

        final CountersReader counters = reader.countersReader();
        for (final SystemCounter counter : SystemCounter.values())
        {
            assertEquals(CountersReader.RECORD_ALLOCATED, counters.getCounterState(counter.id()));
            assertEquals(CounterTypes.SYSTEM, counters.getCounterTypeId(counter.id()));
            assertEquals(counter.description(), counters.getCounterLabel(counter.id()));
        }

        countersFile.systemCounter(SystemCounter.JOBS_CREATED).increment();
        countersFile.systemCounter(SystemCounter.JOBS_ACTIVE).getAndAdd(3);
        assertSame(countersFile.systemCounter(SystemCounter.JOBS_ACTIVE),
            countersFile.systemCounter(SystemCounter.JOBS_ACTIVE));
        assertEquals(1, counters.getCounterValue(SystemCounter.JOBS_CREATED.id()));
        assertEquals(3, counters.getCounterValue(SystemCounter.JOBS_ACTIVE.id()));
    }

    @Test
    void readerSeesLiveShardValuesLabelsAndKeys()
    {
        final ShardCounters shard = countersFile.newShardCounters(3);
        final Map<String, Integer> idsByLabel = counters(reader.countersReader(), CounterTypes.SHARD);
        assertEquals(12 + 1 + DropReason.values().length - 1, idsByLabel.size(), idsByLabel.toString());
        assertTrue(idsByLabel.containsKey("shard 3 packets_in"), idsByLabel.toString());
        assertTrue(idsByLabel.containsKey("shard 3 drop bad_magic"), idsByLabel.toString());
        assertTrue(idsByLabel.containsKey("shard 3 duty_cycle_max_ns"), idsByLabel.toString());

        final CountersReader counters = reader.countersReader();
        final int packetsIn = idsByLabel.get("shard 3 packets_in");
        final int bytesIn = idsByLabel.get("shard 3 bytes_in");
        final int badMagic = idsByLabel.get("shard 3 drop bad_magic");
        final int dutyCycle = idsByLabel.get("shard 3 duty_cycle_max_ns");
        assertEquals(0, counters.getCounterValue(packetsIn));

        shard.onPacketIn(100);
        shard.onPacketIn(50);
        shard.onDrop(DropReason.BAD_MAGIC);
        shard.onDrop(DropReason.NONE);
        shard.onDutyCycleNs(700);
        shard.onDutyCycleNs(300);
        assertEquals(2, counters.getCounterValue(packetsIn));
        assertEquals(150, counters.getCounterValue(bytesIn));
        assertEquals(1, counters.getCounterValue(badMagic));
        assertEquals(700, counters.getCounterValue(dutyCycle));
        assertEquals(1, shard.totalDrops());
        assertNull(shard.drops(DropReason.NONE));

        counters.forEach((counterId, typeId, keyBuffer, label) ->
        {
            if (counterId == badMagic)
            {
                assertEquals(3, CounterTypes.ownerId(keyBuffer));
                assertEquals("drop_bad_magic", CounterTypes.metricName(keyBuffer));
                assertEquals(CounterTypes.KIND_COUNTER, CounterTypes.kind(keyBuffer));
            }
            else if (counterId == dutyCycle)
            {
                assertEquals(CounterTypes.KIND_GAUGE, CounterTypes.kind(keyBuffer));
            }
        });

        assertThrows(IllegalStateException.class, () -> countersFile.newShardCounters(3));
    }

    @Test
    void jobCountersCarryTheJobInLabelsAndKeysAndAreGoneOnceFreed()
    {
        final JobCounters job = countersFile.allocateJobCounters(7, "acme", "resnet");
        final JobCounters other = countersFile.allocateJobCounters(8, null, "résnet");
        final Map<String, Integer> idsByLabel = counters(reader.countersReader(), CounterTypes.JOB);
        assertEquals(14, idsByLabel.size(), idsByLabel.toString());
        final Integer packetsIn = idsByLabel.get("job 7 packets_in: tenant=acme name=resnet");
        assertTrue(idsByLabel.containsKey("job 8 drops: tenant= name=résnet"), idsByLabel.toString());
        assertEquals("", other.tenant());
        assertTrue(null != packetsIn, idsByLabel.toString());

        job.onPacketIn(64);
        job.onPacketIn(64);
        job.onSlotCompleted();
        assertEquals(2, reader.countersReader().getCounterValue(packetsIn));
        reader.countersReader().forEach((counterId, typeId, keyBuffer, label) ->
        {
            if (counterId == packetsIn)
            {
                assertEquals(7, CounterTypes.ownerId(keyBuffer));
                assertEquals("packets_in", CounterTypes.metricName(keyBuffer));
                assertEquals("acme", CounterTypes.tenant(keyBuffer));
                assertEquals("resnet", CounterTypes.jobName(keyBuffer));
                assertEquals(7L, reader.countersReader().getCounterReferenceId(counterId));
            }
        });

        job.close();
        job.close();
        final Map<String, Integer> remaining = counters(reader.countersReader(), CounterTypes.JOB);
        assertEquals(7, remaining.size(), remaining.toString());
        assertTrue(remaining.keySet().stream().allMatch((label) -> label.startsWith("job 8 ")), remaining.toString());
        assertEquals(CountersReader.RECORD_RECLAIMED, reader.countersReader().getCounterState(packetsIn));

        other.close();
        assertTrue(counters(reader.countersReader(), CounterTypes.JOB).isEmpty());
    }

    @Test
    void shardTotalsAreAggregatedIncludingClosedShards()
    {
        final ShardCounters shard0 = countersFile.newShardCounters(0);
        final ShardCounters shard1 = countersFile.newShardCounters(1);
        shard0.onPacketIn(10);
        shard0.onPacketsOut(2, 40);
        shard0.onDrop(DropReason.TRUNCATED);
        shard1.onPacketsIn(3, 300);
        shard1.onPacketOut(7);
        shard1.onDrop(DropReason.UNKNOWN_JOB);
        shard1.onDrop(DropReason.UNKNOWN_JOB);

        countersFile.aggregateShardTotals();
        final CountersReader counters = reader.countersReader();
        assertEquals(4, counters.getCounterValue(SystemCounter.PACKETS_IN.id()));
        assertEquals(310, counters.getCounterValue(SystemCounter.BYTES_IN.id()));
        assertEquals(3, counters.getCounterValue(SystemCounter.PACKETS_OUT.id()));
        assertEquals(47, counters.getCounterValue(SystemCounter.BYTES_OUT.id()));
        assertEquals(3, counters.getCounterValue(SystemCounter.DROPS.id()));

        shard1.close();
        shard0.onPacketIn(5);
        countersFile.aggregateShardTotals();
        assertEquals(5, counters.getCounterValue(SystemCounter.PACKETS_IN.id()));
        assertEquals(315, counters.getCounterValue(SystemCounter.BYTES_IN.id()));
        assertEquals(3, counters.getCounterValue(SystemCounter.DROPS.id()));
        assertTrue(counters(counters, CounterTypes.SHARD).keySet().stream().noneMatch((l) -> l.startsWith("shard 1 ")));

        final ShardCounters again = countersFile.newShardCounters(1);
        again.onPacketIn(1);
        countersFile.aggregateShardTotals();
        assertEquals(6, counters.getCounterValue(SystemCounter.PACKETS_IN.id()));
    }

    @Test
    void aFullFileRefusesAJobAndFreesWhatItHadAllocated()
    {
        final int systemCounters = SystemCounter.values().length;
        final int perShard = 9 + 1 + DropReason.values().length - 1;
        try (CountersFile small = new CountersFile(
            directory.resolve("small"), systemCounters + perShard + 10, 1024, SystemEpochClock.INSTANCE, 0))
        {
            small.newShardCounters(0);
            final JobCounters first = small.allocateJobCounters(1, "t", "a");
            final IllegalStateException ex =
                assertThrows(IllegalStateException.class, () -> small.allocateJobCounters(2, "t", "b"));
            assertTrue(ex.getMessage().contains("is full"), ex.getMessage());
            assertEquals(7, counters(small.countersReader(), CounterTypes.JOB).size());

            first.close();
            final JobCounters second = small.allocateJobCounters(2, "t", "b");
            assertEquals(7, counters(small.countersReader(), CounterTypes.JOB).size());
            second.close();
        }
    }

    @Test
    void errorLogKeepsDistinctErrorsWithACount()
    {
        for (int i = 0; i < 3; i++)
        {
            countersFile.errorLog().record(sameError());
        }
        countersFile.errorLog().onError(new IllegalArgumentException("another"));

        final List<ErrorRecord> errors = reader.readErrors();
        assertEquals(2, errors.size(), errors.toString());
        assertEquals(3, errors.get(0).observationCount());
        assertTrue(errors.get(0).encodedException().contains("IllegalStateException: slot pool corrupt"));
        assertTrue(errors.get(0).firstObservationTimestampMs() <= errors.get(0).lastObservationTimestampMs());
        assertEquals(1, errors.get(1).observationCount());
        assertTrue(errors.get(1).encodedException().contains("another"));
        assertEquals(4, reader.countersReader().getCounterValue(SystemCounter.ERRORS.id()));
        assertTrue(reader.readErrors(Long.MAX_VALUE).isEmpty());
    }

    @Test
    void errorLogIsThreadSafe() throws Exception
    {
        final List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++)
        {
            threads.add(Thread.ofPlatform().start(() ->
            {
                for (int i = 0; i < 250; i++)
                {
                    countersFile.errorLog().record(sameError());
                }
            }));
        }
        for (final Thread thread : threads)
        {
            thread.join(5_000);
        }

        final List<ErrorRecord> errors = reader.readErrors();
        assertEquals(1, errors.size(), errors.toString());
        assertEquals(1_000, errors.get(0).observationCount());
        assertEquals(1_000, reader.countersReader().getCounterValue(SystemCounter.ERRORS.id()));
    }

    @Test
    void aNewWriterReplacesTheFile()
    {
        final ShardCounters shard = countersFile.newShardCounters(0);
        shard.onPacketIn(1);
        try (CountersFile replacement = new CountersFile(directory.resolve("telemetry"));
            CountersFileReader newReader = io.switchml.protocol.telemetry.CountersFile.open(replacement.file(), 1_000))
        {
            assertTrue(counters(newReader.countersReader(), CounterTypes.SHARD).isEmpty());
            assertEquals(1, counters(reader.countersReader(), CounterTypes.SHARD).values().stream()
                .mapToLong((id) -> reader.countersReader().getCounterValue(id)).max().orElse(0));
        }
    }

    private static IllegalStateException sameError()
    {
        return new IllegalStateException("slot pool corrupt");
    }

    static Map<String, Integer> counters(final CountersReader counters, final int typeId)
    {
        final Map<String, Integer> idsByLabel = new LinkedHashMap<>();
        counters.forEach((counterId, counterTypeId, keyBuffer, label) ->
        {
            if (counterTypeId == typeId)
            {
                idsByLabel.put(label, counterId);
            }
        });
        return idsByLabel;
    }
}
