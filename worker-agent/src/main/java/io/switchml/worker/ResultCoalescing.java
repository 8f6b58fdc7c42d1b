package io.switchml.worker;

/**
 * How long an idle I/O agent sleeps, while its slots' results are on their way, before it reads them: software
 * interrupt moderation. At 1 Gbit/s a 9 KB result comes every 72 us; an agent that blocks in its selector wakes
 * every 7.5 results on average (measured in the rack with coalescing off), and before each wait the idle strategy's 4
 * spins and 2 yields poll an empty socket (docs/bench/worker-transport-2026-11-25.md, session 30). Sleeping a while
 * instead lets more results queue in the socket (9.5 per wake-up with it on), to be read by one recvmmsg and answered
 * by one sendmmsg (one GSO datagram), with no empty polls.
 * <p>
 * The sleep must not starve the pipeline: while the agent sleeps its answered slots send nothing. It is half the
 * time the slots now in flight take to come back at the rate results have been arriving ({@code inFlight x
 * interval / 2}), at most {@code maxNs}, so the slots not yet answered still cover the link while the agent sleeps.
 * There is no sleep
 * <ul>
 * <li>shorter than {@link #MIN_SLEEP_NS}: not worth a timed sleep (the kernel's default timer slack is 50 us);</li>
 * <li>before a call's first results (not flowing yet: they are a round trip away, and the window is full);</li>
 * <li>in the stream's last window (each of its results is the call's completion), so a short all-reduce keeps its
 * latency;</li>
 * <li>across a loss-recovery timer (a suspect slot's reorder window, the tail probe): the agent then waits as before,
 * woken by the first result, which may clear the suspicion;</li>
 * <li>while sends wait for room in the socket buffer: the selector wakes the agent when there is.</li>
 * </ul>
 * Then the agent blocks in its selector as before.
 * <p>
 * The rate is measured from the first cycle that reads a result while slots are in flight, in batches of
 * {@link #SAMPLE_RESULTS} results, smoothed by 1/4; a gap between cycles longer than {@link #MAX_GAP_NS} (a pause, a
 * timeout, a peer that stalled) is not a result rate and discards the sample under way. One instance per agent
 * thread; no allocation, no locks.
 */
final class ResultCoalescing
{
    /** Below this a timed sleep is not worth it: the agent blocks in its selector instead. */
    static final long MIN_SLEEP_NS = 50_000;
    /** Results per rate sample. */
    static final int SAMPLE_RESULTS = 16;
    /** The longest sleep that may be configured. */
    static final long MAX_SLEEP_NS = 1_000_000;
    /** A longer gap between two duty cycles is not the result rate: twice the longest sleep allowed. */
    static final long MAX_GAP_NS = 2 * MAX_SLEEP_NS;

    private final long maxNs;
    private long lastCycleNs;
    private long busyNs;
    private int results;
    private long intervalNs;

    /**
     * @param maxNs the longest sleep; 0 turns coalescing off (the agent always blocks in its selector).
     */
    ResultCoalescing(final long maxNs)
    {
        if (maxNs < 0 || maxNs > MAX_SLEEP_NS)
        {
            throw new IllegalArgumentException("the longest coalescing sleep must be 0 to " + MAX_SLEEP_NS + " ns: " +
                maxNs + " ns");
        }
        this.maxNs = maxNs;
    }

    /**
     * Account one duty cycle.
     *
     * @param nowNs    the cycle's end.
     * @param inFlight slots in flight at its start.
     * @param received results it read.
     */
    void onCycle(final long nowNs, final int inFlight, final int received)
    {
        if (inFlight == 0)
        {
            lastCycleNs = 0;
            busyNs = 0;
            results = 0;
            return;
        }
        if (lastCycleNs != 0)
        {
            final long gapNs = nowNs - lastCycleNs;
            if (gapNs > MAX_GAP_NS)
            {
                busyNs = 0;
                results = 0;
            }
            else
            {
                busyNs += gapNs;
                results += received;
                if (results >= SAMPLE_RESULTS)
                {
                    final long sample = busyNs / results;
                    intervalNs = intervalNs == 0 ? sample : intervalNs + ((sample - intervalNs) >> 2);
                    busyNs = 0;
                    results = 0;
                }
            }
            lastCycleNs = nowNs;
        }
        else if (received > 0)
        {
            lastCycleNs = nowNs;
        }
    }

    /**
     * @param inFlight    slots in flight now.
     * @param flowing     whether a result was read since the agent last slept or blocked.
     * @param streamTail  whether the stream's last window is in flight.
     * @param untilWakeNs time until the next loss-recovery timer falls due.
     * @param sendsQueued whether sends wait for room in the socket buffer.
     * @return how long to sleep before reading the results, or 0 to block in the selector as usual.
     */
    long sleepNs(
        final int inFlight, final boolean flowing, final boolean streamTail, final long untilWakeNs,
        final boolean sendsQueued)
    {
        if (maxNs == 0 || inFlight == 0 || intervalNs == 0 || !flowing || streamTail || sendsQueued)
        {
            return 0;
        }
        final long sleepNs = Math.min(maxNs, inFlight * intervalNs / 2);
        return sleepNs < MIN_SLEEP_NS || sleepNs >= untilWakeNs ? 0 : sleepNs;
    }

    /** @return the smoothed interval between results while busy, 0 before the first sample. */
    long intervalNs()
    {
        return intervalNs;
    }
}
