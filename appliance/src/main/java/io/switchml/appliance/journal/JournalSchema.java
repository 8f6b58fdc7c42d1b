package io.switchml.appliance.journal;

/**
 * Field names of a journal event in the queue. Each excerpt is a self-describing binary wire document,
 * fields in this order: type (the {@link JournalEvent} name), timestampMs, severity (the
 * {@link JournalSeverity} name), jobId, tenant, jobName, message (texts may be null); a
 * {@link JournalEvent#HISTOGRAM_SNAPSHOT} follows with shardId, intervalStartMs, intervalEndMs, count,
 * minNs, p50Ns, p90Ns, p99Ns, p999Ns, maxNs. Chronicle's {@code DumpQueueMain} prints them as YAML.
 */
final class JournalSchema
{
    static final String TYPE = "type";
    static final String TIMESTAMP_MS = "timestampMs";
    static final String SEVERITY = "severity";
    static final String JOB_ID = "jobId";
    static final String TENANT = "tenant";
    static final String JOB_NAME = "jobName";
    static final String MESSAGE = "message";
    static final String SHARD_ID = "shardId";
    static final String INTERVAL_START_MS = "intervalStartMs";
    static final String INTERVAL_END_MS = "intervalEndMs";
    static final String COUNT = "count";
    static final String MIN_NS = "minNs";
    static final String P50_NS = "p50Ns";
    static final String P90_NS = "p90Ns";
    static final String P99_NS = "p99Ns";
    static final String P999_NS = "p999Ns";
    static final String MAX_NS = "maxNs";

    /** Suffix of Chronicle Queue cycle files. */
    static final String CYCLE_FILE_SUFFIX = ".cq4";
    /** Chronicle Queue's metadata file, present in every queue directory. */
    static final String METADATA_FILE = "metadata.cq4t";

    private JournalSchema()
    {
    }
}
