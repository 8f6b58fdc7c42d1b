package io.switchml.appliance.transport;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMacBatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Drives a native shard agent directly from the test thread (Aeron's SenderTest style): a window of
 * updates waiting in the socket is taken by one recvmmsg, processed, and answered by one sendmmsg.
 * The job comes from a running appliance's control plane (the agent shares its registry); the appliance's
 * own shard is never sent anything, so the agent under test is the only one touching the job's slots.
 */
@Timeout(30)
class NativeShardAgentTest
{
    private static final int SLOTS = 32;

    @TempDir
    Path tempDir;

    private Appliance appliance;
    private NativeShardAgent agent;

    @BeforeEach
    void start() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1).dir(tempDir.toString()));
    }

    @AfterEach
    void stop()
    {
        if (agent != null)
        {
            agent.onClose();
        }
        appliance.close();
    }

    private NativeShardAgent agent(final int batch) throws Exception
    {
        return agent(batch, 1 << 20);
    }

    private NativeShardAgent agent(final int batch, final int socketBufferBytes) throws Exception
    {
        return new NativeShardAgent(0,
            sender -> new ShardProcessor(0, 1, appliance.registry(), appliance.telemetry().shardCounters(0),
                appliance.telemetry().slotLatency(0), LossGenerator.of(0.0, 1), LossGenerator.of(0.0, 2), Runnable::run, sender,
                0, false),
            appliance.telemetry().shardCounters(0), appliance.telemetry().errorLog(),
            (Inet4Address)InetAddress.getByName("127.0.0.1"), 0, -1, batch, 0, socketBufferBytes, -1, 100_000_000L);
    }

    @Test
    void aWindowWaitingInTheSocketIsReceivedAndAnsweredWithOneCallEach() throws Exception
    {
        agent = agent(64);
        agent.onStart();
        try (ProtocolPeer peer = new ProtocolPeer(appliance.controlPort(), agent.port(), 256, SLOTS, true))
        {
            peer.createAndJoin("direct");
            for (int round = 0; round < 3; round++)
            {
                peer.sendWindow();
                final long receiveCalls = agent.receiveCalls();
                final long sendCalls = agent.sendCalls();
                assertTrue(agent.doWork() >= SLOTS);
                assertEquals(receiveCalls + 1, agent.receiveCalls(), "one recvmmsg for the window");
                assertEquals(sendCalls + 1, agent.sendCalls(), "one sendmmsg for the window's results");
                assertEquals(SLOTS, peer.receiveWindow());
            }
            assertEquals(0, agent.doWork(), "nothing left to do");
            assertEquals(0L, agent.sendDrops());
            assertEquals(0L, agent.syscallErrors());
        }
    }

    @Test
    void aWindowsMacsAreCheckedAndItsResultsSignedInVectorLanesAndAForgedUpdateAmongThemIsDroppedAlone() throws Exception
    {
        final boolean lanes = PacketMacBatch.warmUp(DataHeaderFlyweight.packetLength(256), PacketMacBatch.WARM_UP_CALLS);
        assertEquals(PacketMacBatch.vectorized(), lanes, PacketMacBatch.description());
        agent = agent(64);
        agent.onStart();
        try (ProtocolPeer peer = new ProtocolPeer(appliance.controlPort(), agent.port(), 256, SLOTS, true))
        {
            peer.createAndJoin("signed");
            final long inLanesBefore = counter("shard_macs_in_lanes");
            peer.sendWindow();
            assertTrue(agent.doWork() >= SLOTS);
            assertEquals(SLOTS, peer.receiveWindow());
            // one recvmmsg took the window: its 32 MACs in two batches of sixteen, and its 32 results' (each update
            // completes its slot at world 1) when the batch is sent; the peer checks every result's MAC
            assertEquals(lanes ? 2 * SLOTS : 0, counter("shard_macs_in_lanes") - inLanesBefore);

            final long badMacBefore = counter("shard_drop_bad_mac");
            peer.sendWindow(13);
            assertTrue(agent.doWork() >= SLOTS);
            assertEquals(SLOTS - 1, peer.receiveWindow(SLOTS - 1), "every update's result but the forged one's");
            assertEquals(1, counter("shard_drop_bad_mac") - badMacBefore);
            assertEquals(lanes ? 4 * SLOTS - 1 : 0, counter("shard_macs_in_lanes") - inLanesBefore);
        }
    }

    private long counter(final String name)
    {
        return appliance.counterSnapshot().getOrDefault(name, 0L);
    }

    @Test
    void largeDatagramsAreReceivedFourAtATimeAndSmallOnesInFullBatches() throws Exception
    {
        agent = agent(64, 8 << 20);
        agent.onStart();
        final int slots = 16;
        try (ProtocolPeer large = new ProtocolPeer(appliance.controlPort(), agent.port(), 8176, slots, false);
            ProtocolPeer small = new ProtocolPeer(appliance.controlPort(), agent.port(), 256, SLOTS, false))
        {
            large.createAndJoin("large");
            small.createAndJoin("small");

            large.sendWindow();
            long receiveCalls = agent.receiveCalls();
            // the window, and 1 more when the slots' deadline scan (every 100 ms) fell due during the joins
            final int work = agent.doWork();
            assertTrue(work == slots || work == slots + 1, "the size is not known yet: the whole window at once: " + work);
            assertEquals(receiveCalls + 1, agent.receiveCalls());
            assertEquals(slots, large.receiveWindow());

            large.sendWindow();
            receiveCalls = agent.receiveCalls();
            assertDrained(slots, drain(slots));
            assertEquals(receiveCalls + slots / 4, agent.receiveCalls(), "32,744-byte datagrams, 128 KiB a call: 4");
            assertEquals(slots, large.receiveWindow());

            small.sendWindow();
            receiveCalls = agent.receiveCalls();
            assertDrained(SLOTS, drain(SLOTS));
            assertEquals(receiveCalls + 2, agent.receiveCalls(), "4 at the large datagrams' batch, then the other 28");
            assertEquals(SLOTS, small.receiveWindow());
            assertEquals(0L, agent.syscallErrors());
        }
    }

    /** The packets' work, and 1 more when the slots' deadline scan (every 100 ms) fell due meanwhile. */
    private static void assertDrained(final int packets, final int work)
    {
        assertTrue(work == packets || work == packets + 1, "work " + work + " for " + packets + " packets");
    }

    private int drain(final int packets)
    {
        int work = 0;
        for (int turns = 0; work < packets && turns < 1_000; turns++)
        {
            work += agent.doWork();
        }
        return work;
    }

    @Test
    void aWindowLargerThanTheBatchTakesSeveralReceivesAndIsAllAnswered() throws Exception
    {
        agent = agent(8);
        agent.onStart();
        try (ProtocolPeer peer = new ProtocolPeer(appliance.controlPort(), agent.port(), 256, SLOTS, false))
        {
            peer.createAndJoin("small-batch");
            peer.sendWindow();
            final long receiveCalls = agent.receiveCalls();
            int work = 0;
            while (work < SLOTS)
            {
                work += agent.doWork();
            }
            assertEquals(receiveCalls + SLOTS / 8, agent.receiveCalls(), "batches of 8");
            assertEquals(SLOTS, peer.receiveWindow());
        }
    }
}
