package io.switchml.worker;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * RFC 6298's arithmetic, on values worked out by hand: the first sample, the gains of later ones, the clamps and the
 * back-off.
 */
class RttEstimatorTest
{
    private static final long MS = 1_000_000L;

    @Test
    void theFirstSampleSetsSrttAndHalfOfItAsVariance()
    {
        final RttEstimator rtt = new RttEstimator(200 * MS, MS, 500 * MS);
        assertEquals(0, rtt.smoothedNs(), "no SRTT before a sample");
        assertEquals(200 * MS, rtt.timeoutNs(), "the initial timeout before a sample");
        assertEquals(Long.MAX_VALUE, rtt.minNs());

        rtt.onSample(8 * MS);
        assertEquals(8 * MS, rtt.smoothedNs());
        assertEquals(8 * MS + 4 * (4 * MS), rtt.timeoutNs(), "SRTT + 4 RTTVAR, RTTVAR = R / 2");
        assertEquals(rtt.timeoutNs(), rtt.publishedTimeoutNs());
        assertEquals(8 * MS, rtt.minNs());
    }

    @Test
    void laterSamplesMoveSrttByAnEighthAndTheVarianceByAQuarter()
    {
        final RttEstimator rtt = new RttEstimator(200 * MS, MS, 500 * MS);
        rtt.onSample(8 * MS);
        rtt.onSample(16 * MS);
        // RTTVAR = 3/4 * 4 + 1/4 * |8 - 16| = 5 ms; SRTT = 7/8 * 8 + 1/8 * 16 = 9 ms
        assertEquals(9 * MS, rtt.smoothedNs());
        assertEquals(9 * MS + 4 * (5 * MS), rtt.timeoutNs());
        assertEquals(8 * MS, rtt.minNs(), "the smallest sample stays");
    }

    @Test
    void theTimeoutStaysWithinItsBounds()
    {
        final RttEstimator low = new RttEstimator(200 * MS, 20 * MS, 500 * MS);
        low.onSample(MS / 10);
        assertEquals(20 * MS, low.timeoutNs(), "raised to the minimum");

        final RttEstimator high = new RttEstimator(200 * MS, MS, 50 * MS);
        high.onSample(40 * MS);
        assertEquals(50 * MS, high.timeoutNs(), "held at the maximum (40 + 4 x 20 ms)");
    }

    @Test
    void backOffDoublesUpToTheMaximumUntilTheNextSample()
    {
        final RttEstimator rtt = new RttEstimator(200 * MS, MS, 500 * MS);
        rtt.onSample(10 * MS);
        assertEquals(30 * MS, rtt.timeoutNs());
        rtt.backOff();
        assertEquals(60 * MS, rtt.timeoutNs());
        assertEquals(60 * MS, rtt.publishedTimeoutNs(), "published for other threads");
        for (int i = 0; i < 10; i++)
        {
            rtt.backOff();
        }
        assertEquals(500 * MS, rtt.timeoutNs());
        rtt.onSample(10 * MS);
        // RTTVAR = 3/4 * 5 + 0 = 3.75 ms; SRTT stays 10 ms: the sample sets the timeout again
        assertEquals(10 * MS + 4 * (3_750_000L), rtt.timeoutNs());
        assertEquals(10 * MS, rtt.smoothedNs());
    }
}
