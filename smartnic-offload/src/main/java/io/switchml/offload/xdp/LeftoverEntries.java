package io.switchml.offload.xdp;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Released jobs whose job-table entries the kernel would not remove. Their slot ranges stay reserved until a retry
 * removes the entry, so that no later job aggregates into slots that a stale entry still claims, as the tofino
 * backend keeps a released job's registers. The backend's monitor retries every {@link #RETRY_NS} at most.
 * Thread-safe: jobs are released on control threads, retried on the monitor's.
 */
final class LeftoverEntries
{
    static final long RETRY_NS = TimeUnit.SECONDS.toNanos(5);

    /** A released job's entry ({@link XdpJob}). */
    interface Entry
    {
        int jobId();

        /**
         * Remove the entry from the job table and, once it is gone, free the job's slot range.
         *
         * @return null when removed (or not there), else why not.
         */
        String removeEntry();
    }

    private final Consumer<String> log;
    private final List<Entry> jobs = new ArrayList<>();
    private long lastTryNs;

    LeftoverEntries(final Consumer<String> log)
    {
        this.log = log;
    }

    synchronized void add(final Entry job)
    {
        if (jobs.isEmpty())
        {
            lastTryNs = System.nanoTime();
        }
        jobs.add(job);
    }

    /** Try the removals again if {@link #RETRY_NS} has passed since the last try; outside this object's lock. */
    void retry(final long nowNs)
    {
        final List<Entry> pending;
        synchronized (this)
        {
            if (jobs.isEmpty() || nowNs - lastTryNs < RETRY_NS)
            {
                return;
            }
            lastTryNs = nowNs;
            pending = new ArrayList<>(jobs);
        }
        for (final Entry job : pending)
        {
            final String failure = job.removeEntry();
            if (failure == null)
            {
                synchronized (this)
                {
                    jobs.remove(job);
                }
                log.accept("xdp: removed released job " + job.jobId() + " from the program's job table at a retry; " +
                    "its slots are free");
            }
            else
            {
                log.accept("xdp: removing released job " + job.jobId() + " from the program's job table " +
                    "failed again: " + failure + " (its slots stay reserved; tried again in " +
                    TimeUnit.NANOSECONDS.toSeconds(RETRY_NS) + " s)");
            }
        }
    }

    /** @return the ids of the jobs whose entries are still in the job table. */
    synchronized List<Integer> jobIds()
    {
        return jobs.stream().map(Entry::jobId).toList();
    }

    /** @return "" or the part of the backend's description naming them. */
    String describe()
    {
        final List<Integer> left = jobIds();
        return left.isEmpty() ? "" :
            "; released jobs still in the job table (their slots reserved, removal retried): " + left;
    }
}
