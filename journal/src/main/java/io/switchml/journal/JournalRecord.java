package io.switchml.journal;

/**
 * One decoded journal event, as {@link JournalReader} returns it.
 * <p>
 * Text fields are null when the event has none. The histogram fields are set for
 * {@link JournalEvent#HISTOGRAM_SNAPSHOT} only and are 0 otherwise ({@code shardId} is
 * {@link #NO_SHARD_ID}).
 *
 * @param index           Chronicle Queue index of the event (cycle and sequence), increasing in journal order.
 * @param type            what happened.
 * @param timestampMs     when it was offered to the journal, epoch milliseconds.
 * @param severity        how bad it is.
 * @param jobId           job the event is about, or {@link #NO_JOB_ID}.
 * @param tenant          tenant of that job, or null.
 * @param jobName         name of that job, or null.
 * @param message         free text, or null.
 * @param shardId         data-plane shard of a histogram snapshot, else {@link #NO_SHARD_ID}.
 * @param intervalStartMs start of the snapshot's interval, epoch milliseconds.
 * @param intervalEndMs   end of the snapshot's interval, epoch milliseconds.
 * @param count           slot completions recorded in the interval.
 * @param minNs           smallest slot-completion latency.
 * @param p50Ns           median.
 * @param p90Ns           90th percentile.
 * @param p99Ns           99th percentile.
 * @param p999Ns          99.9th percentile.
 * @param maxNs           largest.
 */
public record JournalRecord(
    long index,
    JournalEvent type,
    long timestampMs,
    JournalSeverity severity,
    int jobId,
    String tenant,
    String jobName,
    String message,
    int shardId,
    long intervalStartMs,
    long intervalEndMs,
    long count,
    long minNs,
    long p50Ns,
    long p90Ns,
    long p99Ns,
    long p999Ns,
    long maxNs)
{
    /** Job id of an event that is about no job (job ids the appliance hands out start at 1). */
    public static final int NO_JOB_ID = -1;

    /** Shard id of an event that is not a histogram snapshot. */
    public static final int NO_SHARD_ID = -1;

    /**
     * @return whether the event is about a job.
     */
    public boolean hasJobId()
    {
        return jobId != NO_JOB_ID;
    }
}
