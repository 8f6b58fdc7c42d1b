package io.switchml.protocol.telemetry;

/**
 * System-wide counters of the appliance, with fixed ids: the appliance allocates them first and in this
 * order, so counter id == {@link #id()} == ordinal and a reader may look them up by id. Never reorder or
 * renumber; add new ones at the end.
 * <p>
 * The data-plane totals ({@link #isShardTotal()}) are sums over the shards' own counters, written by
 * one aggregating control thread, so that shards never contend on a shared cache line. The others are
 * updated by control threads with atomic operations.
 */
public enum SystemCounter
{
    BYTES_IN(0, "bytes_in", false, true, "Bytes received by the data plane, all shards"),
    PACKETS_IN(1, "packets_in", false, true, "Datagrams received by the data plane, all shards"),
    BYTES_OUT(2, "bytes_out", false, true, "Bytes sent by the data plane, all shards"),
    PACKETS_OUT(3, "packets_out", false, true, "Datagrams sent by the data plane, all shards"),
    DROPS(4, "drops", false, true, "Received datagrams dropped, all reasons, all shards"),
    JOBS_CREATED(5, "jobs_created", false, false, "Jobs created (all ranks joined)"),
    JOBS_ACTIVE(6, "jobs_active", true, false, "Jobs currently active"),
    JOBS_ABORTED(7, "jobs_aborted", false, false, "Jobs aborted (member lost, explicit abort, deadline)"),
    JOINS_REFUSED(8, "joins_refused", false, false, "Join requests refused (conflicting parameters or rank)"),
    ADMISSION_REFUSALS(9, "admission_refusals", false, false, "Jobs refused admission (memory budget or limits)"),
    ERRORS(10, "errors", false, false, "Errors recorded in the error log, repeats included"),
    CONTROL_CONNECTIONS(11, "control_connections", true, false, "Control connections currently open");

    private static final SystemCounter[] BY_ID = values();

    static
    {
        for (int i = 0; i < BY_ID.length; i++)
        {
            if (BY_ID[i].id != i)
            {
                throw new IllegalStateException("SystemCounter " + BY_ID[i] + " has id " + BY_ID[i].id + " at " + i);
            }
        }
    }

    private final int id;
    private final String metricName;
    private final boolean gauge;
    private final boolean shardTotal;
    private final String description;

    SystemCounter(
        final int id, final String metricName, final boolean gauge, final boolean shardTotal, final String description)
    {
        this.id = id;
        this.metricName = metricName;
        this.gauge = gauge;
        this.shardTotal = shardTotal;
        this.description = description;
    }

    /**
     * @return the fixed counter id in the counters file.
     */
    public int id()
    {
        return id;
    }

    /**
     * @return the metric name, e.g. "bytes_in" (exported as {@code switchml_bytes_in}).
     */
    public String metricName()
    {
        return metricName;
    }

    /**
     * @return whether the value is a level that may go down rather than a monotonic count.
     */
    public boolean isGauge()
    {
        return gauge;
    }

    /**
     * @return whether the value is the sum of the shards' counters, written only by the aggregator.
     */
    public boolean isShardTotal()
    {
        return shardTotal;
    }

    /**
     * @return one line saying what is counted; also the counter's label.
     */
    public String description()
    {
        return description;
    }

    /**
     * @return the counter with that id, or null if there is none (a file from a newer release).
     */
    public static SystemCounter get(final int id)
    {
        return id >= 0 && id < BY_ID.length ? BY_ID[id] : null;
    }
}
