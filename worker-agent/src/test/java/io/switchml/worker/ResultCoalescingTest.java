package io.switchml.worker;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The coalescing rule alone, on times the test chooses (nothing sleeps): half the in-flight window at the measured
 * result rate, capped; never before results flow, in a stream's last window, across a loss-recovery timer, while sends
 * wait, nor below the timer-slack floor; the rate timed from the first result, a long gap discarded.
 */
class ResultCoalescingTest
{
    private static final long US = 1_000L;
    private static final long START = 1_000_000_000L;
    private static final long NO_TIMER = Long.MAX_VALUE;

    /** Whether results flow, not the tail, no timer due, nothing queued: the rate and the cap decide. */
    private static long sleep(final ResultCoalescing coalescing, final int inFlight)
    {
        return coalescing.sleepNs(inFlight, true, false, NO_TIMER, false);
    }

    /** Cycles of one result each, {@code intervalNs} apart, with {@code inFlight} slots in flight. */
    private static void stream(
        final ResultCoalescing coalescing, final int cycles, final long intervalNs, final int inFlight)
    {
        for (int i = 0; i <= cycles; i++)
        {
            coalescing.onCycle(START + i * intervalNs, inFlight, 1);
        }
    }

    @Test
    void sleepsHalfTheWindowAtTheMeasuredRate()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        assertEquals(0, sleep(coalescing, 16), "no rate measured yet");
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 20 * US, 16);
        assertEquals(20 * US, coalescing.intervalNs());
        assertEquals(160 * US, sleep(coalescing, 16), "16 slots x 20 us / 2");
        assertEquals(80 * US, sleep(coalescing, 8), "the sleep shrinks with the window");
    }

    @Test
    void capsTheSleep()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 72 * US, 16);
        assertEquals(500 * US, sleep(coalescing, 16), "16 x 72 us / 2 = 576 us, capped at 500");
    }

    @Test
    void blocksInTheSelectorWhenTheSleepWouldBeShort()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 5 * US, 16);
        assertEquals(0, sleep(coalescing, 16), "16 x 5 us / 2 = 40 us, under the 50 us floor");
        assertEquals(0, sleep(coalescing, 0), "nothing in flight");
    }

    @Test
    void neverBeforeResultsFlowNorInTheLastWindow()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 20 * US, 16);
        assertEquals(0, coalescing.sleepNs(16, false, false, NO_TIMER, false),
            "a call's first results are a round trip away");
        assertEquals(0, coalescing.sleepNs(16, true, true, NO_TIMER, false), "the stream's last window ends the call");
        assertEquals(0, coalescing.sleepNs(16, true, false, 160 * US, false), "a timer falls due within the sleep");
        assertEquals(160 * US, coalescing.sleepNs(16, true, false, 161 * US, false), "the timer falls due after it");
        assertEquals(0, coalescing.sleepNs(16, true, false, NO_TIMER, true), "sends wait for room in the socket");
    }

    @Test
    void offWhenTheCapIsZero()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(0);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 72 * US, 16);
        assertEquals(0, sleep(coalescing, 16));
        assertThrows(IllegalArgumentException.class, () -> new ResultCoalescing(-1));
        assertThrows(IllegalArgumentException.class, () -> new ResultCoalescing(ResultCoalescing.MAX_SLEEP_NS + 1));
    }

    @Test
    void measuresOnlyWhileSlotsAreInFlightAndSmooths()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(1000 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 40 * US, 16);
        assertEquals(40 * US, coalescing.intervalNs());
        // an idle gap between calls is not busy time
        coalescing.onCycle(START + 10_000_000_000L, 0, 0);
        final long next = START + 20_000_000_000L;
        for (int i = 0; i <= ResultCoalescing.SAMPLE_RESULTS; i++)
        {
            coalescing.onCycle(next + i * 80 * US, 16, 1);
        }
        assertEquals(40 * US + (80 * US - 40 * US) / 4, coalescing.intervalNs(), "a quarter of the way to 80 us");
        // several results read in one cycle count as several; timing starts at the first cycle that reads a result,
        // not at the cycle that sent the window (the first round trip is not the result rate)
        final ResultCoalescing batched = new ResultCoalescing(1000 * US);
        batched.onCycle(START, 16, 0);
        batched.onCycle(START + 900 * US, 16, 1);
        batched.onCycle(START + 1060 * US, 16, 8);
        batched.onCycle(START + 1220 * US, 16, 8);
        assertEquals(20 * US, batched.intervalNs());
    }

    @Test
    void aLongGapIsNotTheResultRate()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        coalescing.onCycle(START, 16, 1);
        coalescing.onCycle(START + 20 * US, 16, 1);
        // a 10 ms stall (a pause, a timeout) discards the sample under way instead of making every sleep the cap
        coalescing.onCycle(START + 10_020 * US, 16, 1);
        for (int i = 1; i <= ResultCoalescing.SAMPLE_RESULTS; i++)
        {
            coalescing.onCycle(START + 10_020 * US + i * 20 * US, 16, 1);
        }
        assertEquals(20 * US, coalescing.intervalNs());
    }
}
