package io.switchml.worker;

/**
 * The retransmission timeout of one shard's slots as RFC 6298 computes it: a smoothed round-trip time (SRTT, gain 1/8)
 * and its mean deviation (RTTVAR, gain 1/4) from samples, the timeout SRTT + 4 RTTVAR within [min, max], doubled by
 * each back-off until the next sample sets it again. The first sample sets SRTT to itself and RTTVAR to half of it.
 * <p>
 * Owned by one I/O agent, which alone samples and backs off; {@link #smoothedNs()} and {@link #publishedTimeoutNs()} may
 * be read from any thread (counters, reports). Allocation-free.
 */
final class RttEstimator
{
    private final long minTimeoutNs;
    private final long maxTimeoutNs;
    private long timeoutNs;
    private long varianceNs;
    private long minNs = Long.MAX_VALUE;
    private volatile long smoothedNs;
    private volatile long publishedTimeoutNs;

    /**
     * @param initialTimeoutNs the timeout before the first sample.
     * @param minTimeoutNs     the least timeout a sample may set.
     * @param maxTimeoutNs     the largest timeout a sample or a back-off may set.
     */
    RttEstimator(final long initialTimeoutNs, final long minTimeoutNs, final long maxTimeoutNs)
    {
        this.minTimeoutNs = minTimeoutNs;
        this.maxTimeoutNs = maxTimeoutNs;
        this.timeoutNs = initialTimeoutNs;
        this.publishedTimeoutNs = initialTimeoutNs;
    }

    /**
     * A round trip measured on a result that answered a packet sent once (Karn: never on a retransmitted one).
     *
     * @param rttNs the sample.
     */
    void onSample(final long rttNs)
    {
        minNs = Math.min(minNs, rttNs);
        long srtt = smoothedNs;
        if (srtt == 0)
        {
            srtt = rttNs;
            varianceNs = rttNs / 2;
        }
        else
        {
            varianceNs += (Math.abs(srtt - rttNs) - varianceNs) >> 2;
            srtt += (rttNs - srtt) >> 3;
        }
        smoothedNs = srtt;
        timeoutNs = Math.max(minTimeoutNs, Math.min(maxTimeoutNs, srtt + 4 * varianceNs));
        publishedTimeoutNs = timeoutNs;
    }

    /**
     * A timer expired without an answer: double the timeout, at most to the maximum.
     */
    void backOff()
    {
        timeoutNs = Math.min(timeoutNs * 2, maxTimeoutNs);
        publishedTimeoutNs = timeoutNs;
    }

    /**
     * @return the current timeout, backed off or not; the owning agent's read.
     */
    long timeoutNs()
    {
        return timeoutNs;
    }

    /**
     * @return the current timeout, for any thread.
     */
    long publishedTimeoutNs()
    {
        return publishedTimeoutNs;
    }

    /**
     * @return SRTT, or 0 before the first sample.
     */
    long smoothedNs()
    {
        return smoothedNs;
    }

    /**
     * @return the smallest sample so far, or {@link Long#MAX_VALUE} before the first.
     */
    long minNs()
    {
        return minNs;
    }
}
