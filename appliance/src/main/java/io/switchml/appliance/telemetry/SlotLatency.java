package io.switchml.appliance.telemetry;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.SingleWriterRecorder;

/**
 * Slot latency of one data-plane shard: a HdrHistogram {@link SingleWriterRecorder} with fixed bounds
 * ({@value #LOWEST_DISCERNIBLE_NS} ns to {@value #HIGHEST_TRACKABLE_NS} ns, {@value #SIGNIFICANT_DIGITS}
 * significant digits), so recording never resizes or allocates.
 * <p>
 * The shard's thread is the only one that may call {@link #recordNs(long)}; any other thread may take
 * snapshots (they are synchronized among themselves, never with the writer).
 */
public final class SlotLatency
{
    /** Smallest latency told apart from 0: 1 µs. */
    public static final long LOWEST_DISCERNIBLE_NS = 1_000L;
    /** Largest latency recorded; longer ones are recorded as this: 10 s. */
    public static final long HIGHEST_TRACKABLE_NS = 10_000_000_000L;
    /** Precision of the recorded values. */
    public static final int SIGNIFICANT_DIGITS = 3;

    private final int shardId;
    private final SingleWriterRecorder recorder =
        new SingleWriterRecorder(LOWEST_DISCERNIBLE_NS, HIGHEST_TRACKABLE_NS, SIGNIFICANT_DIGITS);
    private final Histogram drained = newHistogram();
    private final Histogram sinceLastInterval = newHistogram();
    private final Histogram total = newHistogram();

    /**
     * @param shardId id of the shard whose latency this records.
     */
    public SlotLatency(final int shardId)
    {
        this.shardId = shardId;
    }

    /**
     * @return id of the shard whose latency this records.
     */
    public int shardId()
    {
        return shardId;
    }

    /**
     * Record one slot latency; negative values count as 0, values over {@link #HIGHEST_TRACKABLE_NS} as
     * that. Single writer (the shard), wait-free, allocation-free.
     */
    public void recordNs(final long latencyNs)
    {
        recorder.recordValue(latencyNs < 0 ? 0 : Math.min(latencyNs, HIGHEST_TRACKABLE_NS));
    }

    /**
     * @return a new histogram of the latencies recorded since the previous call (or since creation),
     * owned by the caller.
     */
    public synchronized Histogram intervalSnapshot()
    {
        drain();
        final Histogram snapshot = sinceLastInterval.copy();
        sinceLastInterval.reset();
        return snapshot;
    }

    /**
     * @return a new histogram of every latency recorded since creation, owned by the caller. Does not
     * disturb {@link #intervalSnapshot()}.
     */
    public synchronized Histogram totalSnapshot()
    {
        drain();
        return total.copy();
    }

    /**
     * @return a histogram with the bounds this class records with, e.g. to merge snapshots into.
     */
    public static Histogram newHistogram()
    {
        return new Histogram(LOWEST_DISCERNIBLE_NS, HIGHEST_TRACKABLE_NS, SIGNIFICANT_DIGITS);
    }

    private void drain()
    {
        drained.reset();
        recorder.getIntervalHistogramInto(drained);
        sinceLastInterval.add(drained);
        total.add(drained);
    }
}
