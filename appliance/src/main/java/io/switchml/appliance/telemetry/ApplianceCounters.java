package io.switchml.appliance.telemetry;

import io.switchml.protocol.DropReason;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * System counters of the appliance. The data-plane thread is the single writer of each counter and
 * publishes with ordered writes; any thread may read a consistent-enough snapshot.
 */
public final class ApplianceCounters
{
    public static final int PACKETS_IN = 0;
    public static final int BYTES_IN = 1;
    public static final int PACKETS_OUT = 2;
    public static final int BYTES_OUT = 3;
    public static final int SLOTS_COMPLETED = 4;
    public static final int DUPLICATES = 5;
    public static final int RETRANSMISSIONS_SERVED = 6;
    public static final int TX_LOSS_INJECTED = 7;
    public static final int JOBS_ABORTED = 8;
    public static final int STALE_UPDATES = 9;
    public static final int ADMISSIONS_REFUSED = 10;
    public static final int DUTY_CYCLE_MAX_NS = 11;
    private static final int DROP_BASE = 12;

    private static final String[] NAMES = {
        "packets_in", "bytes_in", "packets_out", "bytes_out", "slots_completed", "duplicates",
        "retransmissions_served", "tx_loss_injected", "jobs_aborted", "stale_updates", "admissions_refused", "duty_cycle_max_ns"
    };

    private final AtomicLongArray values = new AtomicLongArray(DROP_BASE + DropReason.values().length);

    /**
     * Add to a counter; only the counter's single writer may call this.
     */
    public void add(final int counter, final long delta)
    {
        values.setRelease(counter, values.getPlain(counter) + delta);
    }

    /**
     * Raise a counter to a value if it is larger; only the counter's single writer may call this.
     */
    public void max(final int counter, final long value)
    {
        if (value > values.getPlain(counter))
        {
            values.setRelease(counter, value);
        }
    }

    /**
     * Sum several counter sets (one per shard) into one view by name; maxima take the maximum.
     */
    public static java.util.Map<String, Long> sum(final ApplianceCounters... sets)
    {
        final java.util.Map<String, Long> total = new java.util.LinkedHashMap<>();
        for (final ApplianceCounters set : sets)
        {
            set.snapshot().forEach((name, value) -> total.merge(name, value, name.endsWith("_max_ns") ? Math::max : Long::sum));
        }
        return total;
    }

    /**
     * Count one dropped packet.
     */
    public void drop(final DropReason reason)
    {
        final int index = DROP_BASE + reason.ordinal();
        values.setRelease(index, values.getPlain(index) + 1);
    }

    /**
     * Count from a thread that is not the data plane's.
     */
    public void addConcurrent(final int counter, final long delta)
    {
        values.getAndAdd(counter, delta);
    }

    public long get(final int counter)
    {
        return values.getAcquire(counter);
    }

    public long drops(final DropReason reason)
    {
        return values.getAcquire(DROP_BASE + reason.ordinal());
    }

    /**
     * @return every counter by name, drops as "drop_" + reason.
     */
    public Map<String, Long> snapshot()
    {
        final Map<String, Long> snapshot = new LinkedHashMap<>();
        for (int i = 0; i < NAMES.length; i++)
        {
            snapshot.put(NAMES[i], get(i));
        }
        for (final DropReason reason : DropReason.values())
        {
            if (reason != DropReason.NONE)
            {
                snapshot.put("drop_" + reason.name().toLowerCase(java.util.Locale.ROOT), drops(reason));
            }
        }
        return snapshot;
    }
}
