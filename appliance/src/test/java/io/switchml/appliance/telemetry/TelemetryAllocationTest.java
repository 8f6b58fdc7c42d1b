package io.switchml.appliance.telemetry;

import io.switchml.protocol.DropReason;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The hot-path telemetry calls allocate nothing in steady state: measured with the thread's allocated
 * bytes around 100 000 calls, after a warm-up long enough for the JIT to compile them.
 */
class TelemetryAllocationTest
{
    private static final int WARM_UP_ROUNDS = 3;
    private static final int CALLS = 100_000;
    private static final int MAX_MEASURED_ROUNDS = 5;

    @TempDir
    Path directory;

    @Test
    void shardCountersJobCountersAndSlotLatencyDoNotAllocate()
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        try (CountersFile countersFile = new CountersFile(directory))
        {
            final ShardCounters shard = countersFile.newShardCounters(0);
            final JobCounters job = countersFile.allocateJobCounters(1, "tenant", "job");
            final SlotLatency latency = new SlotLatency(0);
            final DropReason[] reasons = DropReason.values();

            for (int i = 0; i < WARM_UP_ROUNDS; i++)
            {
                burst(shard, job, latency, reasons);
            }
            threads.getCurrentThreadAllocatedBytes();

            // A late JIT recompilation can allocate a few dozen bytes once on a loaded machine; steady
            // state means some burst of CALLS calls allocates nothing at all.
            long allocatedBytes = -1;
            int measured = 0;
            while (allocatedBytes != 0 && measured < MAX_MEASURED_ROUNDS)
            {
                final long beforeBytes = threads.getCurrentThreadAllocatedBytes();
                burst(shard, job, latency, reasons);
                allocatedBytes = threads.getCurrentThreadAllocatedBytes() - beforeBytes;
                measured++;
            }

            assertEquals(0, allocatedBytes, "bytes allocated by " + CALLS + " telemetry calls in each of " + measured + " bursts");
            assertEquals((WARM_UP_ROUNDS + (long)measured) * CALLS, shard.packetsIn().get());
            assertEquals((WARM_UP_ROUNDS + (long)measured) * CALLS, latency.totalSnapshot().getTotalCount());
        }
    }

    private static void burst(
        final ShardCounters shard, final JobCounters job, final SlotLatency latency, final DropReason[] reasons)
    {
        for (int i = 0; i < CALLS; i++)
        {
            shard.onPacketIn(1_064);
            shard.onPacketOut(1_064);
            shard.onSlotCompleted();
            shard.onDuplicate();
            shard.onStaleUpdate();
            shard.onRetransmissionServed();
            shard.onDrop(reasons[i % reasons.length]);
            shard.onDutyCycleNs(i);
            job.onPacketIn(1_064);
            job.onPacketOut();
            job.onSlotCompleted();
            latency.recordNs(1_000L + (i * 7_919L) % 5_000_000L);
        }
    }
}
