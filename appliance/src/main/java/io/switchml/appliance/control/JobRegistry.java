package io.switchml.appliance.control;

import io.switchml.appliance.telemetry.ApplianceCounters;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.agrona.collections.Int2ObjectHashMap;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Jobs and their membership. Control threads mutate under one lock; the data plane reads an
 * immutable snapshot of the active jobs, replaced copy-on-write whenever a job starts or ends.
 */
public final class JobRegistry
{
    private final Object lock = new Object();
    private final Map<Integer, Job> jobs = new HashMap<>();
    private final long memoryBudgetBytes;
    private final long joinTimeoutMs;
    private final ApplianceCounters counters;
    private long memoryUsedBytes;
    private volatile Int2ObjectHashMap<Job> activeJobs = new Int2ObjectHashMap<>();

    public JobRegistry(final long memoryBudgetBytes, final long joinTimeoutMs, final ApplianceCounters counters)
    {
        this.memoryBudgetBytes = memoryBudgetBytes;
        this.joinTimeoutMs = joinTimeoutMs;
        this.counters = counters;
    }

    /**
     * Data-plane lookup of an active job.
     *
     * @return the job or null when no active job has that id.
     */
    public Job activeJob(final int jobId)
    {
        return activeJobs.get(jobId);
    }

    /**
     * Thrown to refuse a join; the message is sent to the worker as is.
     */
    static final class JoinRefusedException extends Exception
    {
        JoinRefusedException(final String message)
        {
            super(message, null, false, false);
        }
    }

    /**
     * Join a job as a rank, creating the job on first join, and wait until every rank has joined or
     * the join deadline passes.
     *
     * @return the job, active.
     * @throws JoinRefusedException with a message naming the conflict.
     */
    Job join(
        final int jobId, final int worldSize, final int rank, final byte elementType, final int lanes, final int slots,
        final InetSocketAddress dataAddress, final ControlConnection connection)
        throws JoinRefusedException, InterruptedException
    {
        if (worldSize < 1 || worldSize > DataHeaderFlyweight.MAX_WORKERS)
        {
            throw new JoinRefusedException("world size must be within 1.." + DataHeaderFlyweight.MAX_WORKERS + ": " + worldSize);
        }
        if (rank < 0 || rank >= worldSize)
        {
            throw new JoinRefusedException("rank " + rank + " is out of range for world size " + worldSize);
        }
        if (lanes < 1 || lanes > DataHeaderFlyweight.MAX_ELEMENTS)
        {
            throw new JoinRefusedException("k must be within 1.." + DataHeaderFlyweight.MAX_ELEMENTS + ": " + lanes);
        }
        if (slots < 1 || slots > 1 << 20)
        {
            throw new JoinRefusedException("s must be within 1.." + (1 << 20) + ": " + slots);
        }

        synchronized (lock)
        {
            Job job = jobs.get(jobId);
            if (job == null)
            {
                final long needed = io.switchml.appliance.engine.SlotPool.memoryBytes(slots, lanes);
                if (memoryUsedBytes + needed > memoryBudgetBytes)
                {
                    throw new JoinRefusedException("job " + jobId + " needs " + needed + " bytes of aggregator memory but only " +
                        (memoryBudgetBytes - memoryUsedBytes) + " of " + memoryBudgetBytes + " are free");
                }
                job = new Job(jobId, worldSize, elementType, lanes, slots, System.currentTimeMillis() + joinTimeoutMs);
                jobs.put(jobId, job);
                memoryUsedBytes += job.memoryBytes;
            }
            else
            {
                if (job.state != Job.State.JOINING)
                {
                    throw new JoinRefusedException("job " + jobId + " is already running; rank " + rank + " cannot join it now");
                }
                final String conflict = conflict(job, worldSize, elementType, lanes, slots);
                if (conflict != null)
                {
                    throw new JoinRefusedException("rank " + rank + " of job " + jobId + " asked for " + conflict);
                }
                if (job.connections[rank] != null)
                {
                    throw new JoinRefusedException("rank " + rank + " already joined job " + jobId + " from " + job.members[rank]);
                }
            }

            job.members[rank] = dataAddress;
            job.connections[rank] = connection;
            job.joined++;
            if (job.joined == job.worldSize)
            {
                job.state = Job.State.ACTIVE;
                publishActive();
                lock.notifyAll();
                return job;
            }

            while (job.state == Job.State.JOINING)
            {
                final long remainingMs = job.joinDeadlineMs - System.currentTimeMillis();
                if (remainingMs <= 0)
                {
                    endLocked(job, "join deadline passed; missing ranks " + job.missingRanks());
                    break;
                }
                lock.wait(remainingMs);
            }
            if (job.state != Job.State.ACTIVE)
            {
                throw new JoinRefusedException("job " + jobId + " did not start: " + job.endReason);
            }
            return job;
        }
    }

    private static String conflict(final Job job, final int worldSize, final byte elementType, final int lanes, final int slots)
    {
        if (job.worldSize != worldSize)
        {
            return "world size " + worldSize + " but the job has " + job.worldSize;
        }
        if (job.elementType != elementType)
        {
            return "element type " + ElementType.name(elementType) + " but the job has " + ElementType.name(job.elementType);
        }
        if (job.lanes != lanes)
        {
            return "k=" + lanes + " but the job has k=" + job.lanes;
        }
        if (job.slots != slots)
        {
            return "s=" + slots + " but the job has s=" + job.slots;
        }
        return null;
    }

    /**
     * A member left in an orderly way; the job ends and frees its slots when every member has left.
     */
    void leave(final Job job, final int rank)
    {
        synchronized (lock)
        {
            job.left[rank] = true;
            for (final boolean hasLeft : job.left)
            {
                if (!hasLeft)
                {
                    return;
                }
            }
            endLocked(job, "every rank left");
        }
    }

    /**
     * Abort a job: every member still connected gets an ABORT line with the reason, and the job's
     * slots are freed.
     */
    public void abort(final Job job, final String reason)
    {
        synchronized (lock)
        {
            if (job.state == Job.State.ENDED)
            {
                return;
            }
            counters.addConcurrent(ApplianceCounters.JOBS_ABORTED, 1);
            endLocked(job, reason);
            for (int rank = 0; rank < job.worldSize; rank++)
            {
                final ControlConnection connection = job.connections[rank];
                if (connection != null && !job.left[rank])
                {
                    connection.send("ABORT job=" + job.jobId + " reason=" + reason);
                }
            }
        }
    }

    /**
     * Abort every job, for example at shutdown.
     */
    public void abortAll(final String reason)
    {
        final List<Job> all;
        synchronized (lock)
        {
            all = new ArrayList<>(jobs.values());
        }
        for (final Job job : all)
        {
            abort(job, reason);
        }
    }

    boolean isEnded(final Job job)
    {
        synchronized (lock)
        {
            return job.state == Job.State.ENDED;
        }
    }

    private void endLocked(final Job job, final String reason)
    {
        final boolean wasActive = job.state == Job.State.ACTIVE;
        job.state = Job.State.ENDED;
        job.endReason = reason;
        if (jobs.remove(job.jobId, job))
        {
            memoryUsedBytes -= job.memoryBytes;
        }
        if (wasActive)
        {
            publishActive();
        }
        lock.notifyAll();
    }

    private void publishActive()
    {
        final Int2ObjectHashMap<Job> snapshot = new Int2ObjectHashMap<>();
        for (final Job job : jobs.values())
        {
            if (job.state == Job.State.ACTIVE)
            {
                snapshot.put(job.jobId, job);
            }
        }
        activeJobs = snapshot;
    }

    /**
     * @return one line per job describing state and membership.
     */
    public List<String> describeJobs()
    {
        synchronized (lock)
        {
            final List<String> lines = new ArrayList<>();
            for (final Job job : jobs.values())
            {
                lines.add(job.describe());
            }
            return lines;
        }
    }

    public int jobCount()
    {
        synchronized (lock)
        {
            return jobs.size();
        }
    }

    public long memoryUsedBytes()
    {
        synchronized (lock)
        {
            return memoryUsedBytes;
        }
    }
}
