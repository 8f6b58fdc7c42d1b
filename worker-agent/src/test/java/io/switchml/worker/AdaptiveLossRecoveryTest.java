package io.switchml.worker;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The loss recovery policy alone, on a fake clock: every time below is a number the test chose, nothing sleeps.
 * Defaults: RTO 20 ms before a sample, 10 ms floor; reorder window floor 250 us; tail-probe floor 1 ms.
 */
class AdaptiveLossRecoveryTest
{
    private static final long MS = 1_000_000L;
    private static final long US = 1_000L;

    private final WorkerCounters.Cells counters = new WorkerCounters(1).cells(0);
    private final List<String> actions = new ArrayList<>();
    private final LossRecovery.Actions recorder = new LossRecovery.Actions()
    {
        public void probe(final int l, final boolean tail, final long nowNs)
        {
            actions.add((tail ? "tail-probe " : "probe ") + l);
        }

        public void retransmit(final int l, final long nowNs)
        {
            actions.add("retransmit " + l);
            policy.onTransmit(l, LossRecovery.TIMEOUT, nowNs);
        }
    };
    private AdaptiveLossRecovery policy;

    private AdaptiveLossRecovery policy(final boolean fastRetransmit, final int slots)
    {
        policy = new AdaptiveLossRecovery(new WorkerContext().fastRetransmit(fastRetransmit), slots, counters);
        return policy;
    }

    /** A round trip of 2 ms measured on a slot: SRTT 2 ms, RTTVAR 1 ms, RTO max(10 ms floor, 6 ms). */
    private long warmUp(final long t0)
    {
        policy.onStreamStart(t0);
        policy.onTransmit(0, LossRecovery.FIRST, t0);
        policy.onResult(0, false, 0, t0 + 2 * MS);
        return t0 + 2 * MS;
    }

    @Test
    void roundTripsSetTheTimeoutByRfc6298WithItsFloor()
    {
        policy(true, 4);
        assertEquals(20 * MS, policy.retransmitTimeoutNs(), "before any sample: the initial timeout");
        warmUp(1_000 * MS);
        assertEquals(2 * MS, policy.smoothedRttNs());
        assertEquals(10 * MS, policy.retransmitTimeoutNs(), "SRTT + 4 RTTVAR = 6 ms, raised to the 10 ms floor");
    }

    @Test
    void aSilentStreamGetsOneTailProbeOnItsNewestSlotThenDoublingIntervals()
    {
        policy(true, 4);
        final long t = warmUp(1_000 * MS);
        for (int l = 0; l < 4; l++)
        {
            policy.onTransmit(l, LossRecovery.FIRST, t + l * US);
        }
        // tail-probe timeout max(1 ms, 2 SRTT) = 4 ms after the last progress (t)
        assertEquals(0, policy.poll(t + 3 * MS, recorder));
        assertEquals(1, policy.poll(t + 4 * MS, recorder));
        assertEquals(List.of("tail-probe 3"), actions);
        assertEquals(0, policy.poll(t + 7 * MS, recorder), "the next one waits another probe timeout, then doubling");
        assertEquals(1, policy.poll(t + 8 * MS + 1, recorder));
        assertEquals(List.of("tail-probe 3", "tail-probe 3"), actions);
    }

    @Test
    void aHoleBehindALaterResultIsProbedAfterTheReorderWindow()
    {
        policy(true, 4);
        final long t = warmUp(1_000 * MS);
        policy.onTransmit(1, LossRecovery.FIRST, t);
        policy.onTransmit(2, LossRecovery.FIRST, t + 10 * US);
        policy.onResult(2, false, 4, t + 2 * MS);
        // window max(250 us, SRTT / 4 = 500 us)
        assertEquals(0, policy.poll(t + 2 * MS + 400 * US, recorder));
        assertEquals(1, policy.poll(t + 2 * MS + 500 * US, recorder));
        assertEquals(List.of("probe 1"), actions);

        assertTrue(policy.onNack(1, t + 3 * MS), "a NACK after the probe: resend now");
        policy.onTransmit(1, LossRecovery.NACKED, t + 3 * MS);
        assertFalse(policy.onNack(1, t + 3 * MS + 10 * US), "a second NACK for the same probe resends nothing");
        policy.onResult(1, false, 2, t + 5 * MS);
        assertEquals(0, counters.spuriousProbes, "the NACK proved a loss");
    }

    @Test
    void aTimeoutResendsTheOldestExpiredSlotAndBacksOff()
    {
        policy(true, 4);
        final long t = warmUp(1_000 * MS);
        for (int l = 3; l >= 0; l--)
        {
            policy.onTransmit(l, LossRecovery.FIRST, t + (3 - l) * US);
        }
        // the tail probes (at 4 and 8 ms) come first and go unanswered
        policy.poll(t + 4 * MS + 10 * US, recorder);
        policy.poll(t + 8 * MS + 10 * US, recorder);
        actions.clear();
        assertEquals(1, policy.poll(t + 10 * MS + 10 * US, recorder));
        assertEquals(List.of("retransmit 3"), actions, "slot 3 was sent first");
        assertEquals(20 * MS, policy.retransmitTimeoutNs(), "doubled");
        actions.clear();
        policy.poll(t + 20 * MS, recorder);
        assertFalse(actions.stream().anyMatch(a -> a.startsWith("retransmit")), "the others wait a backed-off timeout: " + actions);
    }

    @Test
    void withoutFastRetransmissionEveryExpiredSlotIsResentAsInThePaper()
    {
        policy(false, 4);
        final long t = warmUp(1_000 * MS);
        for (int l = 0; l < 4; l++)
        {
            policy.onTransmit(l, LossRecovery.FIRST, t);
        }
        assertEquals(0, policy.poll(t + 9 * MS, recorder), "no tail probes in the paper's scheme");
        assertEquals(4, policy.poll(t + 10 * MS, recorder));
        assertEquals(List.of("retransmit 0", "retransmit 1", "retransmit 2", "retransmit 3"), actions);
        assertEquals(20 * MS, policy.retransmitTimeoutNs(), "doubled once for the expiry, not once per slot");
    }

    @Test
    void aPauseOfTheAgentThreadMovesEveryTimer()
    {
        policy(true, 2);
        final long t = warmUp(1_000 * MS);
        policy.onTransmit(1, LossRecovery.FIRST, t);
        policy.onPause(50 * MS);
        assertEquals(0, policy.poll(t + 40 * MS, recorder), "neither the tail probe nor the timer counts the pause");
        assertEquals(1, policy.poll(t + 54 * MS, recorder));
        assertEquals(List.of("tail-probe 1"), actions);
        assertEquals(50 * MS, counters.pausesNs);
    }

    @Test
    void probesAnsweredByTheNormalCompletionAreCountedSpurious()
    {
        policy(true, 2);
        final long t = warmUp(1_000 * MS);
        policy.onTransmit(1, LossRecovery.FIRST, t);
        policy.poll(t + 4 * MS, recorder);
        assertEquals(List.of("tail-probe 1"), actions);
        policy.onResult(1, false, 2, t + 5 * MS);
        assertEquals(1, counters.spuriousProbes, "unmarked result, no NACK: nothing of this rank was lost");

        policy.onTransmit(1, LossRecovery.FIRST, t + 6 * MS);
        policy.poll(t + 10 * MS, recorder);
        policy.onResult(1, true, 4, t + 11 * MS);
        assertEquals(1, counters.spuriousProbes, "a result from the shadow copy: the probe recovered a lost result");
    }

    @Test
    void aResendThatReachesACompletedSlotIsCountedSpurious()
    {
        policy(true, 2);
        final long t = warmUp(1_000 * MS);
        policy.onTransmit(1, LossRecovery.FIRST, t);
        policy.poll(t + 4 * MS, recorder);
        policy.poll(t + 8 * MS, recorder);
        policy.poll(t + 10 * MS, recorder);
        assertEquals(List.of("tail-probe 1", "tail-probe 1", "retransmit 1"), actions);
        // the normal completion arrives 1 ms after the resend: not faster than half the minimum RTT (1 ms), so not yet
        // known to be spurious; the marked answer to the resend then shows the slot had completed without it
        policy.onResult(1, false, 2, t + 11 * MS);
        assertEquals(0, counters.spuriousRetransmissions);
        policy.onStaleResult(1, true, 3, t + 12 * MS);
        assertEquals(0, counters.spuriousRetransmissions, "a duplicate of another round proves nothing");
        policy.onStaleResult(1, true, 2, t + 12 * MS);
        assertEquals(1, counters.spuriousRetransmissions);

        policy.onTransmit(1, LossRecovery.FIRST, t + 20 * MS);
        policy.poll(t + 24 * MS, recorder);
        policy.poll(t + 40 * MS, recorder);
        policy.onResult(1, false, 4, t + 40 * MS + 100 * US);
        assertEquals(2, counters.spuriousRetransmissions, "a result 100 us after the resend cannot answer it");
    }
}
