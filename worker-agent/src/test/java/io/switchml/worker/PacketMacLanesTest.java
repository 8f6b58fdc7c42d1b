package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMacBatch;
import io.switchml.worker.transport.DatagramTransport;
import io.switchml.worker.transport.TransportKind;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An agent with MACs on signs the slots' updates and checks a receive batch's results eight at a time in vector
 * lanes once they are warm (PacketMacBatch), over real loopback sockets with the native transport (sendmmsg and
 * recvmmsg batches): every all-reduce's result is exact, the peer accepts every update's MAC, and a result whose
 * payload was altered after signing is dropped alone, counted, and recovered by the agent's loss recovery.
 */
@Timeout(60)
final class PacketMacLanesTest
{
    private static final int LANES = 256;
    private static final int SLOTS = 64;
    private static final int ELEMENTS = LANES * SLOTS * 4;
    private static final int CALLS = 20;
    /** The peer alters the payload of every this many results after signing them. */
    private static final int FORGE_EVERY = 997;
    private static final long K0 = 0x0706050403020100L;
    private static final long K1 = 0x0f0e0d0c0b0a0908L;

    @Test
    void updatesAreSignedAndResultsCheckedInLanesAndAnAlteredResultIsDroppedAndRecovered() throws Exception
    {
        final boolean lanes = PacketMacBatch.warmUp(DataHeaderFlyweight.packetLength(LANES), PacketMacBatch.WARM_UP_CALLS);
        assertEquals(PacketMacBatch.vectorized(), lanes, PacketMacBatch.description());
        final Inet4Address loopback = (Inet4Address)InetAddress.getByAddress(new byte[] {127, 0, 0, 1});
        final WorkerContext context = new WorkerContext()
            .applianceHost(loopback.getHostAddress())
            .jobName("mac-lanes")
            .token("mac-lanes")
            .worldSize(1)
            .rank(0)
            .elementType(ElementType.INT32)
            .lanes(LANES)
            .slots(SLOTS)
            .macEnabled(true)
            .transport(TransportKind.NATIVE)
            .progressTimeoutMs(20_000)
            .conclude();
        final int[] values = new int[ELEMENTS];
        for (int i = 0; i < ELEMENTS; i++)
        {
            values[i] = i * 3 - 5000;
        }
        final int[] result = new int[ELEMENTS];
        try (ServerSocket server = new ServerSocket(0, 1, loopback);
            Socket control = new Socket(loopback, server.getLocalPort());
            Socket controlPeer = server.accept())
        {
            assertTrue(controlPeer.isConnected());
            final DatagramTransport worker = JobJoin.openTransport(TransportKind.NATIVE, context, loopback);
            final SigningPeer peer = new SigningPeer(JobJoin.openTransport(TransportKind.NATIVE, context, loopback));
            try (WorkerClient client = peer.connectClient(context, worker, loopback, control, 1))
            {
                for (int call = 0; call < CALLS; call++)
                {
                    java.util.Arrays.fill(result, 0);
                    client.allReduce(values, result);
                    assertArrayEquals(values, result, "all-reduce " + call + " (world 1: the sum is the tensor)");
                }
                final WorkerCounters counters = client.counters();
                assertEquals(0, peer.badMacs, "updates whose MAC the peer found wrong");
                assertTrue(peer.forged > 0, "the peer altered results");
                assertEquals(peer.forged, counters.malformedResults(), "each altered result dropped and counted: " + counters);
                assertTrue(counters.retransmissions() + counters.probesSent() >= peer.forged,
                    "each dropped result recovered by a probe or a resend: " + counters);
                if (lanes)
                {
                    // most of both directions' MACs: sends of 8 slots and receive batches of results
                    assertTrue(counters.macsInLanes() > counters.packetsSent(), "MACs in lanes: " + counters);
                }
                else
                {
                    assertEquals(0, counters.macsInLanes());
                }
            }
            finally
            {
                peer.close();
            }
        }
    }

    /**
     * Returns every update as its result, signed under the job's key, checking the update's MAC first; alters the
     * payload of one result in {@link #FORGE_EVERY} after signing it. Ignores probes: the agent then resends.
     */
    private static final class SigningPeer extends LoopbackPeer
    {
        private final UnsafeBuffer copy = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(LANES)]);
        private long results;
        volatile long forged;
        volatile long badMacs;

        SigningPeer(final DatagramTransport transport)
        {
            super(transport, "signing-peer", new JobJoin.JoinTerms("test", true, K0, K1));
        }

        public void onDatagram(final UnsafeBuffer buffer, final int length)
        {
            if (length < DataHeaderFlyweight.HEADER_LENGTH ||
                buffer.getByte(DataHeaderFlyweight.TYPE_OFFSET) != DataHeaderFlyweight.TYPE_UPDATE)
            {
                return;
            }
            if (!io.switchml.protocol.security.PacketMac.verify(K0, K1, buffer, 0, length))
            {
                badMacs++;
                return;
            }
            copy.putBytes(0, buffer, 0, length);
            toResult(copy);
            if (++results % FORGE_EVERY == 0)
            {
                // signed, then one payload bit flipped: only the MAC can tell
                io.switchml.protocol.security.PacketMac.sign(K0, K1, copy, 0, length);
                copy.putByte(length - 1, (byte)(copy.getByte(length - 1) ^ 1));
                transport.send(copy, length);
                forged++;
                return;
            }
            send(copy, length);
        }
    }
}
