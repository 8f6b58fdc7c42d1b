package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.worker.transport.DatagramTransport;
import io.switchml.worker.transport.TransportKind;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A NACK or a PENDING answers one rank's probe and names that rank: the agent acts on it only when it names its own.
 * With MAC off anyone who sees a probe can forge such an answer; one naming another rank must not make the agent
 * resend (NACK) nor hold its slot as waiting for a peer (PENDING), which would delay a real loss's recovery. A
 * scripted appliance on real loopback sockets holds every update of one all-reduce for a second (the agent probes at
 * its tail-probe pace, about a millisecond on loopback), answers each probe meanwhile with the given type naming the
 * given rank, then returns every result; each case runs against its control, where the answer
 * names the agent's own rank and is acted on, so the test fails if the check goes.
 */
final class ProbeAnswerRankTest
{
    private static final int LANES = 256;
    private static final int SLOTS = 4;
    private static final int ELEMENTS = LANES * SLOTS;
    private static final int RANK = 1;
    /** The job's other rank: a real one, so that only the rank check (not a range check) can refuse its answers. */
    private static final int OTHER_RANK = 0;
    private static final int WARM_UP_CALLS = 3;
    private static final int JOB_ID = 0x7E57;
    private static final long HOLD_MS = 1_000;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aPendingNamingAnotherRankIsDroppedAsMalformed() throws Exception
    {
        final WorkerCounters own = allReduceAgainst(DataHeaderFlyweight.TYPE_PENDING, RANK);
        assertTrue(own.pendingsReceived() > 0 && own.malformedResults() == 0, "control, own rank: " + own);

        final WorkerCounters forged = allReduceAgainst(DataHeaderFlyweight.TYPE_PENDING, OTHER_RANK);
        assertEquals(0, forged.pendingsReceived(), "a PENDING naming rank " + OTHER_RANK + " was taken: " + forged);
        assertTrue(forged.malformedResults() > 0, "counted as malformed: " + forged);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aNackNamingAnotherRankResendsNothing() throws Exception
    {
        final WorkerCounters own = allReduceAgainst(DataHeaderFlyweight.TYPE_NACK, RANK);
        assertTrue(own.nacksReceived() > 0 && own.fastRetransmissions() > 0 && own.malformedResults() == 0,
            "control, own rank: " + own);

        final WorkerCounters forged = allReduceAgainst(DataHeaderFlyweight.TYPE_NACK, OTHER_RANK);
        assertEquals(0, forged.nacksReceived(), "a NACK naming rank " + OTHER_RANK + " was taken: " + forged);
        assertEquals(0, forged.fastRetransmissions(), "resent on a NACK naming another rank: " + forged);
        assertTrue(forged.malformedResults() > 0, "counted as malformed: " + forged);
    }

    /**
     * One int32 all-reduce of {@link #ELEMENTS} through a {@link ScriptedAppliance}.
     *
     * @return the agent's counters once the all-reduce has completed (its result checked).
     */
    private static WorkerCounters allReduceAgainst(final byte answerType, final int answerRank) throws Exception
    {
        final Inet4Address loopback = (Inet4Address)InetAddress.getByAddress(new byte[] {127, 0, 0, 1});
        // the retransmission timer well above the hold: within it only probes and their answers act
        final WorkerContext context = new WorkerContext()
            .applianceHost(loopback.getHostAddress())
            .jobName("probe-answers")
            .token("probe-answers")
            .worldSize(2)
            .rank(RANK)
            .elementType(ElementType.INT32)
            .lanes(LANES)
            .slots(SLOTS)
            .macEnabled(false)
            .transport(TransportKind.NIO)
            .retransmitTimeoutMs(2_000)
            .minRetransmitTimeoutMs(2_000)
            .maxRetransmitTimeoutMs(2_000)
            .progressTimeoutMs(20_000)
            .conclude();
        final int[] values = new int[ELEMENTS];
        for (int i = 0; i < ELEMENTS; i++)
        {
            values[i] = i * 7 - 1000;
        }
        final int[] result = new int[ELEMENTS];
        final int[] warmUpResult = new int[ELEMENTS];
        try (ServerSocket server = new ServerSocket(0, 1, loopback);
            Socket control = new Socket(loopback, server.getLocalPort());
            Socket controlPeer = server.accept())
        {
            // the control connection stays open and silent: the data path alone is under test
            assertTrue(controlPeer.isConnected());
            final DatagramTransport worker = JobJoin.openTransport(TransportKind.NIO, context, loopback);
            final ScriptedAppliance appliance =
                new ScriptedAppliance(JobJoin.openTransport(TransportKind.NIO, context, loopback), answerType, answerRank);
            try (WorkerClient client = appliance.connectClient(context, worker, loopback, control, JOB_ID))
            {
                for (int i = 0; i < WARM_UP_CALLS; i++)
                {
                    client.allReduce(values, warmUpResult);   // answered at once: the agent's round-trip samples
                }
                client.allReduce(values, result);
                assertArrayEquals(values, result, "the scripted appliance returns each update as its result");
                assertTrue(appliance.answered > 0, "no probe was answered within the hold");
                return client.counters();
            }
            finally
            {
                appliance.close();
            }
        }
    }

    /**
     * The appliance's part: returns the warm-up all-reduces' updates (one per slot each) as their results at once, so
     * that the agent has round-trip samples and probes at its tail-probe pace; then holds every update for
     * {@link #HOLD_MS} from the first of the next all-reduce, answering each probe meanwhile
     * with the probe's header retyped and naming {@code answerRank} (as the appliance answers, MAC zero); then returns
     * every held update as its result, and any later update or resend at once.
     */
    private static final class ScriptedAppliance extends LoopbackPeer
    {
        private final byte answerType;
        private final int answerRank;
        private final List<byte[]> held = new ArrayList<>();
        private long releaseNs;
        private int updates;
        private volatile int answered;

        ScriptedAppliance(final DatagramTransport transport, final byte answerType, final int answerRank)
        {
            super(transport, "scripted-appliance");
            this.answerType = answerType;
            this.answerRank = answerRank;
        }

        void onTurn()
        {
            if (releaseNs != 0 && System.nanoTime() - releaseNs >= 0 && !held.isEmpty())
            {
                for (final byte[] update : held)
                {
                    sendAsResult(new UnsafeBuffer(update), update.length);
                }
                held.clear();
            }
        }

        public void onDatagram(final UnsafeBuffer buffer, final int length)
        {
            if (length < DataHeaderFlyweight.HEADER_LENGTH)
            {
                return;
            }
            final byte type = buffer.getByte(DataHeaderFlyweight.TYPE_OFFSET);
            if (type == DataHeaderFlyweight.TYPE_UPDATE && ++updates <= WARM_UP_CALLS * SLOTS)
            {
                sendAsResult(buffer, length);
                return;
            }
            final boolean holding = releaseNs == 0 || System.nanoTime() - releaseNs < 0;
            if (type == DataHeaderFlyweight.TYPE_UPDATE)
            {
                if (releaseNs == 0)
                {
                    releaseNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(HOLD_MS);
                }
                if (holding)
                {
                    final byte[] copy = new byte[length];
                    buffer.getBytes(0, copy);
                    held.add(copy);
                }
                else
                {
                    sendAsResult(buffer, length);
                }
            }
            else if (type == DataHeaderFlyweight.TYPE_PROBE && releaseNs != 0 && holding)
            {
                header.wrap(buffer, 0).type(answerType).workerRank(answerRank).mac(0L);
                transport.send(buffer, length);
                answered++;
            }
        }
    }
}
