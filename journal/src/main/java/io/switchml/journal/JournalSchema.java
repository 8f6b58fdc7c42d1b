package io.switchml.journal;

/**
 * Field names of a journal event in the queue. Each excerpt is a self-describing binary wire document,
 * fields in this order: type (the {@link JournalEvent} name), timestampMs, severity (the
 * {@link JournalSeverity} name), jobId, tenant, jobName, message (texts may be null); a
 * {@link JournalEvent#HISTOGRAM_SNAPSHOT} follows with shardId, intervalStartMs, intervalEndMs, count,
 * minNs, p50Ns, p90Ns, p99Ns, p999Ns, maxNs. Chronicle's {@code DumpQueueMain} prints them as YAML.
 */
public final class JournalSchema
{
    public static final String TYPE = "type";
    public static final String TIMESTAMP_MS = "timestampMs";
    public static final String SEVERITY = "severity";
    public static final String JOB_ID = "jobId";
    public static final String TENANT = "tenant";
    public static final String JOB_NAME = "jobName";
    public static final String MESSAGE = "message";
    public static final String SHARD_ID = "shardId";
    public static final String INTERVAL_START_MS = "intervalStartMs";
    public static final String INTERVAL_END_MS = "intervalEndMs";
    public static final String COUNT = "count";
    public static final String MIN_NS = "minNs";
    public static final String P50_NS = "p50Ns";
    public static final String P90_NS = "p90Ns";
    public static final String P99_NS = "p99Ns";
    public static final String P999_NS = "p999Ns";
    public static final String MAX_NS = "maxNs";

    /** Suffix of Chronicle Queue cycle files. */
    public static final String CYCLE_FILE_SUFFIX = ".cq4";
    /** Chronicle Queue's metadata file, present in every queue directory. */
    public static final String METADATA_FILE = "metadata.cq4t";

    private JournalSchema()
    {
    }
}
