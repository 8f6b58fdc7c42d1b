package io.switchml.appliance.telemetry;

import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SlotLatencyTest
{
    @Test
    void intervalSnapshotsSplitTheRecordingsAndTheTotalKeepsThemAll()
    {
        final SlotLatency latency = new SlotLatency(2);
        latency.recordNs(5_000);
        latency.recordNs(7_000);
        assertEquals(2, latency.totalSnapshot().getTotalCount());

        final Histogram first = latency.intervalSnapshot();
        assertEquals(2, first.getTotalCount());
        latency.recordNs(1_000_000);
        final Histogram second = latency.intervalSnapshot();
        assertEquals(1, second.getTotalCount());
        assertEquals(1_000_000, second.getMaxValue(), 1_000);
        assertEquals(0, latency.intervalSnapshot().getTotalCount());

        final Histogram total = latency.totalSnapshot();
        assertEquals(3, total.getTotalCount());
        assertEquals(2, first.getTotalCount(), "snapshots are the caller's own copies");
        assertEquals(2, latency.shardId());
    }

    @Test
    void outOfRangeValuesAreClampedNotThrown()
    {
        final SlotLatency latency = new SlotLatency(0);
        latency.recordNs(-5);
        latency.recordNs(0);
        latency.recordNs(Long.MAX_VALUE);
        latency.recordNs(60_000_000_000L);

        final Histogram total = latency.totalSnapshot();
        assertEquals(4, total.getTotalCount());
        assertEquals(0, total.getMinValue());
        assertTrue(total.valuesAreEquivalent(SlotLatency.HIGHEST_TRACKABLE_NS, total.getMaxValue()));
    }

    @Test
    void precisionIsThreeSignificantDigits()
    {
        final SlotLatency latency = new SlotLatency(0);
        latency.recordNs(123_456_789);
        final Histogram total = latency.totalSnapshot();
        assertEquals(123_456_789, total.getValueAtPercentile(50), 123_456_789 / 1000.0);
    }
}
