package io.switchml.worker;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The coalescing rule alone, on times the test chooses (nothing sleeps): half the in-flight window at the measured
 * result rate, capped, never before results flow, never in a stream's last window, never below the timer-slack floor.
 */
class ResultCoalescingTest
{
    private static final long US = 1_000L;
    private static final long START = 1_000_000_000L;

    /** Cycles of one result each, {@code intervalNs} apart, with {@code inFlight} slots in flight. */
    private static void stream(final ResultCoalescing coalescing, final int cycles, final long intervalNs, final int inFlight)
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
        assertEquals(0, coalescing.sleepNs(16, true, false), "no rate measured yet");
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 20 * US, 16);
        assertEquals(20 * US, coalescing.intervalNs());
        assertEquals(160 * US, coalescing.sleepNs(16, true, false), "16 slots x 20 us / 2");
        assertEquals(80 * US, coalescing.sleepNs(8, true, false), "the sleep shrinks with the window");
    }

    @Test
    void capsTheSleep()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 72 * US, 16);
        assertEquals(500 * US, coalescing.sleepNs(16, true, false), "16 x 72 us / 2 = 576 us, capped at 500");
    }

    @Test
    void blocksInTheSelectorWhenTheSleepWouldBeShort()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 5 * US, 16);
        assertEquals(0, coalescing.sleepNs(16, true, false), "16 x 5 us / 2 = 40 us, under the 50 us floor");
        assertEquals(0, coalescing.sleepNs(0, true, false), "nothing in flight");
    }

    @Test
    void neverBeforeResultsFlowNorInTheLastWindow()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(500 * US);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 20 * US, 16);
        assertEquals(0, coalescing.sleepNs(16, false, false), "a call's first results are a round trip away");
        assertEquals(0, coalescing.sleepNs(16, true, true), "the stream's last window ends the call");
    }

    @Test
    void offWhenTheCapIsZero()
    {
        final ResultCoalescing coalescing = new ResultCoalescing(0);
        stream(coalescing, ResultCoalescing.SAMPLE_RESULTS, 72 * US, 16);
        assertEquals(0, coalescing.sleepNs(16, true, false));
        assertThrows(IllegalArgumentException.class, () -> new ResultCoalescing(-1));
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
        // several results read in one cycle count as several
        final ResultCoalescing batched = new ResultCoalescing(1000 * US);
        batched.onCycle(START, 16, 0);
        batched.onCycle(START + 160 * US, 16, 8);
        batched.onCycle(START + 320 * US, 16, 8);
        assertEquals(20 * US, batched.intervalNs());
    }
}
