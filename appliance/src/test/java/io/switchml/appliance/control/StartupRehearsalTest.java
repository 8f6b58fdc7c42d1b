package io.switchml.appliance.control;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.telemetry.ShardCounters;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The start-up rehearsal on a real appliance (real shards, real UDP on loopback): its jobs complete every slot in every
 * shard, take the retransmission and probe branches, send nothing the shards drop, and leave no job behind; when the
 * shards complete nothing it gives up within its window timeout and says why.
 */
@Timeout(60)
class StartupRehearsalTest
{
    @TempDir
    Path tempDir;

    private Appliance appliance;

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"native", "epoll"})
    void completesEverySlotInEveryShardAndLeavesNoJob(final String transport) throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().transport(transport).shards(2).dataPort(0).controlPort(0)
            .httpPort(-1).dir(tempDir.toString()));

        final StartupRehearsal.Outcome outcome = appliance.rehearse();

        assertNull(outcome.stopped(), outcome.describe());
        assertEquals(2, outcome.jobs());
        final long slotsPerJob = (long)StartupRehearsal.WINDOWS * StartupRehearsal.SLOTS;
        assertEquals(2 * slotsPerJob, outcome.completed());
        for (int shard = 0; shard < 2; shard++)
        {
            final ShardCounters counters = appliance.telemetry().shardCounters(shard);
            // slot s lives in shard s mod 2: half of every window in each
            assertEquals(slotsPerJob, counters.slotsCompleted().get(), "shard " + shard);
            assertEquals(0, counters.totalDrops(), "shard " + shard + " dropped rehearsal packets");
        }
        // every few windows of each job, a resend into a completed slot and a probe about it: both answered from the
        // slot's shadow copy
        final long rare = 2L * (StartupRehearsal.WINDOWS / StartupRehearsal.RARE_EVERY);
        assertEquals(rare, appliance.counter("probes"));
        assertEquals(2 * rare, appliance.counter("retransmissions_served"));
        assertEquals(0, appliance.registry().jobCount(), appliance.registry().describeJobs().toString());
    }

    @Test
    void completesWithMulticastResults() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()).multicastBase("239.192.0.0"));

        final StartupRehearsal.Outcome outcome = appliance.rehearse();

        // completion is counted by the shard, not by who received the group's datagram
        assertNull(outcome.stopped(), outcome.describe());
        assertEquals(2L * StartupRehearsal.WINDOWS * StartupRehearsal.SLOTS, outcome.completed());
        assertEquals(0, appliance.registry().jobCount());
    }

    @Test
    void givesUpWhenTheShardsCompleteNothingAndLeavesNoJob() throws Exception
    {
        // the shards drop (almost) every update they receive, as a firewall on loopback would
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()).lossRate(0.9999));

        final long startNs = System.nanoTime();
        final StartupRehearsal.Outcome outcome = appliance.rehearse();
        final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;

        assertNotNull(outcome.stopped());
        assertTrue(outcome.stopped().contains("no more for " + StartupRehearsal.WINDOW_TIMEOUT_NS / 1_000_000 + " ms"),
            outcome.describe());
        assertEquals(0, outcome.jobs());
        assertTrue(elapsedMs < StartupRehearsal.BUDGET_NS / 1_000_000, "took " + elapsedMs + " ms");
        assertEquals(0, appliance.registry().jobCount(), appliance.registry().describeJobs().toString());
    }
}
