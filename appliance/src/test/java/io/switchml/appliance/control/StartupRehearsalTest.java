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
 * shard, take the NACK, PENDING, duplicate and shadow-copy answers, send nothing the shards drop, send results to the
 * members and only the MAC job's last windows to the group, and leave no job behind; when the shards complete nothing
 * it gives up within its window timeout, aborts its job saying why, and lets the appliance start. The budget is
 * generous here (a loaded 2-core CI machine); the appliance's own is {@link StartupRehearsal#BUDGET_NS}.
 */
@Timeout(60)
class StartupRehearsalTest
{
    private static final long BUDGET_NS = 20_000_000_000L;

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
    void completesEverySlotInEveryShardTakesTheRareAnswersAndLeavesNoJob(final String transport) throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().transport(transport).shards(2).dataPort(0).controlPort(0)
            .httpPort(-1).dir(tempDir.toString()));

        final StartupRehearsal.Outcome outcome = appliance.rehearse(BUDGET_NS);

        assertNull(outcome.stopped(), outcome.describe());
        assertNull(outcome.skipped(), outcome.describe());
        assertEquals(2, outcome.jobs());
        final int slots = StartupRehearsal.slotsFor(2);
        final long slotsPerJob = (long)StartupRehearsal.windowsFor(slots) * slots;
        assertEquals(2 * slotsPerJob, outcome.completed());
        for (int shard = 0; shard < 2; shard++)
        {
            final ShardCounters counters = appliance.telemetry().shardCounters(shard);
            // slot s lives in shard s mod 2: half of every window in each
            assertEquals(slotsPerJob, counters.slotsCompleted().get(), "shard " + shard);
            assertEquals(0, counters.totalDrops(), "shard " + shard + " dropped rehearsal packets");
        }
        // every few windows of each job, slot 0: a NACK, a PENDING, a duplicate, then a resend and a probe into the
        // completed slot, both answered from its shadow copy
        final long rare = 2L * (StartupRehearsal.windowsFor(slots) / StartupRehearsal.RARE_EVERY);
        // (the split among the answers assumes the two members' packets reach the shard in send order, as on an idle
        // loopback; the totals do not)
        assertEquals(3 * rare, appliance.counter("probes"));
        assertEquals(4 * rare, appliance.counter("nacks_sent") + appliance.counter("pendings_sent") +
            appliance.counter("retransmissions_served"));
        assertTrue(appliance.counter("nacks_sent") > 0 && appliance.counter("pendings_sent") > 0 &&
            appliance.counter("duplicates") > 0, appliance.counterSnapshot().toString());
        // unicast: every completed slot to both members, and the four answers
        assertEquals(StartupRehearsal.WORLD * outcome.completed() + 4 * rare, appliance.counter("packets_out"));
        assertEquals(0, appliance.registry().jobCount(), appliance.registry().describeJobs().toString());
    }

    @Test
    void sendsOnlyTheMacJobsLastWindowsToTheGroup() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()).multicastBase("239.192.0.0"));

        final StartupRehearsal.Outcome outcome = appliance.rehearse(BUDGET_NS);

        // completion is counted by the shard, not by who received the group's datagram
        assertNull(outcome.stopped(), outcome.describe());
        final int slots = StartupRehearsal.slotsFor(1);
        assertEquals(2L * StartupRehearsal.windowsFor(slots) * slots, outcome.completed());
        final long grouped = (long)StartupRehearsal.GROUP_WINDOWS * slots;
        final long rare = 2L * (StartupRehearsal.windowsFor(slots) / StartupRehearsal.RARE_EVERY);
        assertEquals(StartupRehearsal.WORLD * (outcome.completed() - grouped) + grouped + 4 * rare,
            appliance.counter("packets_out"));
        assertEquals(0, appliance.registry().jobCount());
    }

    @Test
    void givesUpWhenTheShardsCompleteNothingAndAbortsItsJob() throws Exception
    {
        // the members' updates go to a UDP port no shard listens on, as when a firewall drops them
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()));
        final StartupRehearsal rehearsal = new StartupRehearsal(appliance.registry(),
            appliance.context().resolvedBindAddress(), new int[] {deadPort()}, false, BUDGET_NS, () -> false);

        final long startNs = System.nanoTime();
        final StartupRehearsal.Outcome outcome = rehearsal.run();
        final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;

        assertNotNull(outcome.stopped());
        assertTrue(outcome.stopped().contains("no more for " + StartupRehearsal.WINDOW_TIMEOUT_NS / 1_000_000 + " ms"),
            outcome.describe());
        assertEquals(0, outcome.jobs());
        assertTrue(elapsedMs < 10_000, "took " + elapsedMs + " ms");
        assertEquals(0, appliance.registry().jobCount(), appliance.registry().describeJobs().toString());
        assertEquals(1, appliance.counter("jobs_aborted"), appliance.counterSnapshot().toString());
    }

    @Test
    void isSkippedWhenTheApplianceDropsPacketsOnPurpose() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()).lossRate(0.01));

        final StartupRehearsal.Outcome outcome = appliance.rehearse();

        assertNotNull(outcome.skipped(), outcome.describe());
        assertTrue(outcome.describe().contains(ApplianceContext.LOSS_RATE_PROP), outcome.describe());
        assertEquals(0, appliance.counter("packets_in"));
    }

    @Test
    void stopsWhenTheApplianceIsStopping() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()));
        final StartupRehearsal rehearsal = new StartupRehearsal(appliance.registry(),
            appliance.context().resolvedBindAddress(), appliance.dataPorts(), false, BUDGET_NS, () -> true);

        final StartupRehearsal.Outcome outcome = rehearsal.run();

        assertEquals("the appliance is stopping", outcome.stopped());
        assertEquals(0, appliance.registry().jobCount());
    }

    /** A UDP port nothing listens on: bound, read, closed. */
    private static int deadPort() throws Exception
    {
        try (java.nio.channels.DatagramChannel channel = java.nio.channels.DatagramChannel.open()
            .bind(new java.net.InetSocketAddress("127.0.0.1", 0)))
        {
            return ((java.net.InetSocketAddress)channel.getLocalAddress()).getPort();
        }
    }
}
