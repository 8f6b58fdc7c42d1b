package io.switchml.ops;

import io.switchml.journal.JournalRecord;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Slot-completion latency over a window of the journal's HISTOGRAM_SNAPSHOT events.
 * <p>
 * Each snapshot summarises one shard over one interval: count, min, p50, p90, p99, p99.9, max. The journal
 * keeps no buckets, so percentiles over several snapshots are estimated: each snapshot's distribution is
 * taken as piecewise linear in log(latency) between its six anchors (min at 0, p50 at 0.5, ... max at 1),
 * the snapshots are mixed in proportion to their counts, and the mixture is inverted. Count, min and max
 * are exact; a window of one snapshot gives back its own percentiles.
 */
final class LatencyWindow
{
    /** Quantile of each anchor of a snapshot. */
    static final double[] ANCHOR_QUANTILES = {0.0, 0.5, 0.9, 0.99, 0.999, 1.0};
    /** Quantiles reported for a window. */
    static final double[] REPORTED_QUANTILES = {0.5, 0.9, 0.99, 0.999};
    /** Their names. */
    static final String[] REPORTED_NAMES = {"p50", "p90", "p99", "p99.9"};
    /** {@link #REPORTED_NAMES} as --json keys (snake_case, as the journal's p999_ns). */
    static final String[] JSON_NAMES = {"p50", "p90", "p99", "p999"};

    /**
     * One shard's latency over one interval.
     *
     * @param shard     data-plane shard.
     * @param startMs   interval start, epoch ms.
     * @param endMs     interval end, epoch ms.
     * @param count     slots completed in the interval.
     * @param anchorsNs min, p50, p90, p99, p99.9 and max, non-decreasing.
     */
    record Snapshot(int shard, long startMs, long endMs, long count, long[] anchorsNs)
    {
        static Snapshot of(final JournalRecord record)
        {
            final long[] anchors = {record.minNs(), record.p50Ns(), record.p90Ns(), record.p99Ns(), record.p999Ns(), record.maxNs()};
            for (int i = 1; i < anchors.length; i++)
            {
                anchors[i] = Math.max(anchors[i], anchors[i - 1]);
            }
            return new Snapshot(record.shardId(), record.intervalStartMs(), record.intervalEndMs(), record.count(), anchors);
        }
    }

    /**
     * Slots completed and latency over one interval, all shards (or one shard) together.
     *
     * @param startMs     interval start.
     * @param endMs       interval end.
     * @param count       slots completed.
     * @param slotsPerSec count over the interval's length.
     * @param window      the interval's snapshots, for its percentiles.
     */
    record Interval(long startMs, long endMs, long count, double slotsPerSec, LatencyWindow window)
    {
    }

    /**
     * Latency bucket of the estimated distribution.
     *
     * @param lowNs  lower bound.
     * @param highNs upper bound.
     * @param count  estimated slots in [lowNs, highNs).
     */
    record Bucket(double lowNs, double highNs, double count)
    {
    }

    private final List<Snapshot> snapshots;
    private final List<Snapshot> nonEmpty = new ArrayList<>();
    private long count;
    private long minNs = Long.MAX_VALUE;
    private long maxNs;

    LatencyWindow(final List<Snapshot> snapshots)
    {
        this.snapshots = List.copyOf(snapshots);
        for (final Snapshot snapshot : snapshots)
        {
            if (snapshot.count() > 0)
            {
                nonEmpty.add(snapshot);
                count += snapshot.count();
                minNs = Math.min(minNs, snapshot.anchorsNs()[0]);
                maxNs = Math.max(maxNs, snapshot.anchorsNs()[5]);
            }
        }
    }

    List<Snapshot> snapshots()
    {
        return snapshots;
    }

    /**
     * @return slots completed in the window.
     */
    long count()
    {
        return count;
    }

    /**
     * @return the smallest latency, or 0 when the window saw no slot.
     */
    long minNs()
    {
        return count == 0 ? 0 : minNs;
    }

    /**
     * @return the largest latency, or 0 when the window saw no slot.
     */
    long maxNs()
    {
        return maxNs;
    }

    /**
     * @return the first interval start, or 0 when empty.
     */
    long startMs()
    {
        return snapshots.stream().mapToLong(Snapshot::startMs).min().orElse(0);
    }

    /**
     * @return the last interval end, or 0 when empty.
     */
    long endMs()
    {
        return snapshots.stream().mapToLong(Snapshot::endMs).max().orElse(0);
    }

    /**
     * @return the shards that have snapshots, ascending.
     */
    List<Integer> shards()
    {
        return snapshots.stream().map(Snapshot::shard).distinct().sorted().toList();
    }

    /**
     * @return the window restricted to one shard.
     */
    LatencyWindow shard(final int shard)
    {
        return new LatencyWindow(snapshots.stream().filter(s -> s.shard() == shard).toList());
    }

    /**
     * @return the estimated fraction of slots at or under the latency.
     */
    double cdf(final double ns)
    {
        return count == 0 ? 0.0 : cdfLog(log(ns));
    }

    /**
     * @param quantile within [0, 1].
     * @return the estimated latency at the quantile in ns (the smallest latency whose estimated fraction
     * at or under it reaches the quantile), or NaN when the window saw no slot.
     */
    double quantileNs(final double quantile)
    {
        if (count == 0)
        {
            return Double.NaN;
        }
        if (quantile <= 0.0)
        {
            return minNs;
        }
        if (quantile >= 1.0)
        {
            return maxNs;
        }
        final Mixture mixture = mixture();
        int low = 0;
        int high = mixture.positions.length - 1;
        while (low < high)
        {
            final int middle = (low + high) >>> 1;
            if (mixture.cdfAt[middle] >= quantile)
            {
                high = middle;
            }
            else
            {
                low = middle + 1;
            }
        }
        if (low > 0)
        {
            final double previous = mixture.cdfAt[low - 1];
            final double slope = mixture.slopeAfter[low - 1];
            final double leftLimit = previous + slope * (mixture.positions[low] - mixture.positions[low - 1]);
            if (slope > 0 && leftLimit >= quantile)
            {
                return Math.exp(mixture.positions[low - 1] + (quantile - previous) / slope);
            }
        }
        return Math.exp(mixture.positions[low]);
    }

    private double cdfLog(final double logNs)
    {
        final Mixture mixture = mixture();
        final double[] positions = mixture.positions;
        if (logNs < positions[0])
        {
            return 0.0;
        }
        int low = 0;
        int high = positions.length - 1;
        while (low < high)
        {
            final int middle = (low + high + 1) >>> 1;
            if (positions[middle] <= logNs)
            {
                low = middle;
            }
            else
            {
                high = middle - 1;
            }
        }
        return Math.min(1.0, mixture.cdfAt[low] + mixture.slopeAfter[low] * (logNs - positions[low]));
    }

    /**
     * The mixture's distribution function in log(latency), piecewise linear: at each breakpoint (an anchor of
     * some snapshot) its value, jumps included, and its slope up to the next breakpoint. Built once, in
     * O(n log n) for n snapshots.
     */
    private static final class Mixture
    {
        final double[] positions;
        final double[] cdfAt;
        final double[] slopeAfter;

        Mixture(final double[] positions, final double[] cdfAt, final double[] slopeAfter)
        {
            this.positions = positions;
            this.cdfAt = cdfAt;
            this.slopeAfter = slopeAfter;
        }
    }

    private Mixture mixture;

    private Mixture mixture()
    {
        if (mixture != null)
        {
            return mixture;
        }
        final int segments = ANCHOR_QUANTILES.length - 1;
        final double[][] events = new double[nonEmpty.size() * segments * 2][];
        int eventCount = 0;
        for (final Snapshot snapshot : nonEmpty)
        {
            final double weight = (double)snapshot.count() / count;
            final long[] anchors = snapshot.anchorsNs();
            for (int j = 0; j < segments; j++)
            {
                final double left = log(anchors[j]);
                final double right = log(anchors[j + 1]);
                final double mass = weight * (ANCHOR_QUANTILES[j + 1] - ANCHOR_QUANTILES[j]);
                if (right > left)
                {
                    final double slope = mass / (right - left);
                    events[eventCount++] = new double[] {left, slope, 0.0};
                    events[eventCount++] = new double[] {right, -slope, 0.0};
                }
                else
                {
                    events[eventCount++] = new double[] {left, 0.0, mass};
                }
            }
        }
        java.util.Arrays.sort(events, 0, eventCount, (a, b) -> Double.compare(a[0], b[0]));
        final double[] positions = new double[eventCount];
        final double[] cdfAt = new double[eventCount];
        final double[] slopeAfter = new double[eventCount];
        int points = 0;
        double value = 0.0;
        double slope = 0.0;
        double position = eventCount > 0 ? events[0][0] : 0.0;
        for (int i = 0; i < eventCount; i++)
        {
            final double[] event = events[i];
            if (points == 0 || event[0] > positions[points - 1])
            {
                value += slope * (event[0] - position);
                position = event[0];
                positions[points] = position;
                points++;
            }
            slope += event[1];
            value += event[2];
            cdfAt[points - 1] = Math.min(1.0, value);
            slopeAfter[points - 1] = Math.max(0.0, slope);
        }
        mixture = new Mixture(
            java.util.Arrays.copyOf(positions, points), java.util.Arrays.copyOf(cdfAt, points), java.util.Arrays.copyOf(slopeAfter, points));
        return mixture;
    }

    /**
     * @return the estimated number of slots per latency bucket, bucket bounds evenly spaced in log(latency)
     * from min to max.
     */
    List<Bucket> distribution(final int buckets)
    {
        final List<Bucket> result = new ArrayList<>();
        if (count == 0)
        {
            return result;
        }
        final double low = log(minNs);
        final double high = Math.max(log(maxNs), low + Math.log(1.01));
        final double step = (high - low) / buckets;
        double previous = 0;
        for (int i = 0; i < buckets; i++)
        {
            final double bucketHigh = low + step * (i + 1);
            final double cumulative = i == buckets - 1 ? 1.0 : cdfLog(bucketHigh);
            result.add(new Bucket(Math.exp(low + step * i), Math.exp(bucketHigh), (cumulative - previous) * count));
            previous = cumulative;
        }
        return result;
    }

    /**
     * @return the intervals in time order, all shards together; consecutive intervals merged so that there
     * are at most maxPoints.
     */
    List<Interval> timeline(final int maxPoints)
    {
        final Map<Long, List<Snapshot>> byEnd = new TreeMap<>();
        for (final Snapshot snapshot : snapshots)
        {
            byEnd.computeIfAbsent(snapshot.endMs(), ignore -> new ArrayList<>()).add(snapshot);
        }
        final List<List<Snapshot>> groups = new ArrayList<>(byEnd.values());
        final int perPoint = Math.max(1, (groups.size() + maxPoints - 1) / maxPoints);
        final List<Interval> intervals = new ArrayList<>();
        for (int i = 0; i < groups.size(); i += perPoint)
        {
            final List<Snapshot> merged = new ArrayList<>();
            for (int j = i; j < Math.min(groups.size(), i + perPoint); j++)
            {
                merged.addAll(groups.get(j));
            }
            final LatencyWindow window = new LatencyWindow(merged);
            final long startMs = window.startMs();
            final long endMs = window.endMs();
            final double seconds = Math.max(1, endMs - startMs) / 1000.0;
            intervals.add(new Interval(startMs, endMs, window.count(), window.count() / seconds, window));
        }
        return intervals;
    }

    private static double log(final double ns)
    {
        return Math.log(Math.max(1.0, ns));
    }
}
