package io.switchml.ops;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LatencyWindowTest
{
    private static LatencyWindow.Snapshot snapshot(
        final int shard, final long startMs, final long endMs, final long count, final long... anchors)
    {
        return new LatencyWindow.Snapshot(shard, startMs, endMs, count, anchors);
    }

    @Test
    void oneSnapshotGivesBackItsOwnPercentiles()
    {
        final LatencyWindow window = new LatencyWindow(List.of(snapshot(0, 0, 1000, 500, 2_000, 10_000, 40_000, 90_000, 300_000, 1_000_000)));
        assertEquals(500, window.count());
        assertEquals(2_000, window.minNs());
        assertEquals(1_000_000, window.maxNs());
        final long[] expected = {10_000, 40_000, 90_000, 300_000};
        for (int i = 0; i < expected.length; i++)
        {
            assertEquals(expected[i], window.quantileNs(LatencyWindow.REPORTED_QUANTILES[i]), expected[i] * 1e-6);
        }
    }

    @Test
    void mixingKeepsCountMinMaxExactAndWeighsByCount()
    {
        final LatencyWindow.Snapshot fast = snapshot(0, 0, 1000, 900, 1_000, 10_000, 12_000, 15_000, 20_000, 25_000);
        final LatencyWindow.Snapshot slow = snapshot(1, 0, 1000, 100, 100_000, 1_000_000, 1_200_000, 1_500_000, 2_000_000, 3_000_000);
        final LatencyWindow window = new LatencyWindow(List.of(fast, slow));
        assertEquals(1000, window.count());
        assertEquals(1_000, window.minNs());
        assertEquals(3_000_000, window.maxNs());
        assertTrue(window.quantileNs(0.5) < 25_000, "the median is among the 900 fast slots");
        assertTrue(window.quantileNs(0.95) >= 100_000, "the top 10% are the slow ones");
        assertEquals(0.9, window.cdf(25_000), 1e-9);

        final LatencyWindow twice = new LatencyWindow(List.of(fast, fast));
        assertEquals(new LatencyWindow(List.of(fast)).quantileNs(0.99), twice.quantileNs(0.99), 1e-3);
    }

    @Test
    void quantilesAreMonotoneAndTheDistributionSumsToTheCount()
    {
        final long seed = System.nanoTime();
        final SplittableRandom random = new SplittableRandom(seed);
        final List<LatencyWindow.Snapshot> snapshots = new ArrayList<>();
        for (int i = 0; i < 20; i++)
        {
            final long[] anchors = new long[6];
            long value = 1_000 + random.nextLong(10_000);
            for (int a = 0; a < anchors.length; a++)
            {
                value += random.nextLong(value);
                anchors[a] = value;
            }
            snapshots.add(snapshot(i % 2, i * 100L, (i + 1) * 100L, random.nextLong(1_000), anchors));
        }
        final LatencyWindow window = new LatencyWindow(snapshots);
        double previous = 0;
        for (int q = 0; q <= 1000; q++)
        {
            final double value = window.quantileNs(q / 1000.0);
            assertTrue(value >= previous - 1e-6, "seed " + seed + ": quantile " + q / 1000.0);
            previous = value;
        }
        final double total = window.distribution(25).stream().mapToDouble(LatencyWindow.Bucket::count).sum();
        assertEquals(window.count(), total, 1e-6 * window.count(), "seed " + seed);

        for (int i = 0; i < 200; i++)
        {
            final double quantile = random.nextDouble();
            assertTrue(window.cdf(window.quantileNs(quantile)) >= quantile - 1e-9, "seed " + seed + ": quantile " + quantile);
            final double ns = Math.exp(Math.log(window.minNs()) + random.nextDouble() * Math.log((double)window.maxNs() / window.minNs()));
            assertEquals(bruteForceCdf(snapshots, ns), window.cdf(ns), 1e-9, "seed " + seed + ": cdf at " + ns);
        }
    }

    private static double bruteForceCdf(final List<LatencyWindow.Snapshot> snapshots, final double ns)
    {
        double weighted = 0;
        long total = 0;
        for (final LatencyWindow.Snapshot snapshot : snapshots)
        {
            if (snapshot.count() == 0)
            {
                continue;
            }
            total += snapshot.count();
            final long[] anchors = snapshot.anchorsNs();
            double fraction = ns >= anchors[5] ? 1.0 : 0.0;
            for (int j = 0; j < 5; j++)
            {
                if (ns >= anchors[j] && ns < anchors[j + 1])
                {
                    fraction = LatencyWindow.ANCHOR_QUANTILES[j] + (LatencyWindow.ANCHOR_QUANTILES[j + 1] - LatencyWindow.ANCHOR_QUANTILES[j]) *
                        (Math.log(ns) - Math.log(anchors[j])) / (Math.log(anchors[j + 1]) - Math.log(anchors[j]));
                }
            }
            weighted += snapshot.count() * fraction;
        }
        return weighted / total;
    }

    @Test
    void timelineGivesSlotsPerSecondPerIntervalAndMergesToFit()
    {
        final List<LatencyWindow.Snapshot> snapshots = new ArrayList<>();
        for (int i = 0; i < 10; i++)
        {
            snapshots.add(snapshot(0, i * 1000L, (i + 1) * 1000L, 100 * i, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000));
            snapshots.add(snapshot(1, i * 1000L, (i + 1) * 1000L, 50, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000));
        }
        final LatencyWindow window = new LatencyWindow(snapshots);
        final List<LatencyWindow.Interval> timeline = window.timeline(100);
        assertEquals(10, timeline.size());
        assertEquals(100 * 3 + 50, timeline.get(3).count());
        assertEquals(350.0, timeline.get(3).slotsPerSec(), 1e-9);

        final List<LatencyWindow.Interval> merged = window.timeline(4);
        assertEquals(4, merged.size());
        assertEquals(3_000, merged.get(0).endMs() - merged.get(0).startMs());
        assertEquals((0 + 100 + 200 + 150) / 3.0, merged.get(0).slotsPerSec(), 1e-9);
        assertEquals(window.count(), merged.stream().mapToLong(LatencyWindow.Interval::count).sum());
    }

    @Test
    void anEmptyWindowHasNoPercentiles()
    {
        final LatencyWindow window = new LatencyWindow(List.of(snapshot(0, 0, 1000, 0, 0, 0, 0, 0, 0, 0)));
        assertEquals(0, window.count());
        assertTrue(Double.isNaN(window.quantileNs(0.5)));
        assertTrue(window.distribution(10).isEmpty());
        assertEquals(0.0, window.timeline(10).get(0).slotsPerSec());
    }
}
