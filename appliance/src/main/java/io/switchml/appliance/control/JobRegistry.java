package io.switchml.appliance.control;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.protocol.ControlProtocol;
import io.switchml.appliance.backend.SoftwareBackend;
import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.protocol.telemetry.SystemCounter;
import io.switchml.protocol.DataHeaderFlyweight;
import org.agrona.collections.Int2ObjectHashMap;

import java.net.InetSocketAddress;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * Jobs, their membership and admission. Control threads mutate under one lock; the data-plane shards
 * read an immutable snapshot of the active jobs, replaced copy-on-write whenever a job starts or
 * ends, so a shard never takes a lock.
 */
public final class JobRegistry
{
    /** Largest number of ranks in a job. */
    public static final int MAX_WORLD_SIZE = DataHeaderFlyweight.MAX_WORKERS;

    private final Object lock = new Object();
    private final Map<Integer, Job> jobs = new HashMap<>();
    private final Map<String, Job> jobsByName = new HashMap<>();
    private final Map<String, long[]> tenantUsage = new HashMap<>();
    private final long memoryBudgetBytes;
    private final long tenantMemoryQuotaBytes;
    private final int tenantMaxJobs;
    private final int shardCount;
    private final Telemetry telemetry;
    private final SecureRandom random = new SecureRandom();
    private final List<JobEventListener> eventListeners = new ArrayList<>();
    private long memoryUsedBytes;
    private int nextJobId = 1;
    private volatile Int2ObjectHashMap<Job> activeJobs = new Int2ObjectHashMap<>();
    private List<Backend> backends = List.of(new SoftwareBackend());
    private boolean multicast;
    private java.util.function.BiConsumer<String, String> onFallback = (backend, reason) -> { };
    /** Offload slot versions one tenant may hold; 0: no limit. */
    private long tenantOffloadSlots;

    public JobRegistry(
        final long memoryBudgetBytes, final long tenantMemoryQuotaBytes, final int tenantMaxJobs, final int shardCount,
        final Telemetry telemetry)
    {
        this.memoryBudgetBytes = memoryBudgetBytes;
        this.tenantMemoryQuotaBytes = tenantMemoryQuotaBytes;
        this.tenantMaxJobs = tenantMaxJobs;
        this.shardCount = shardCount;
        this.telemetry = telemetry;
    }

    /**
     * @param slots offload slot versions (2 per slot) one tenant's jobs may hold at once on backends other than
     *              software, before any job is created; 0: no limit.
     */
    public void tenantOffloadSlots(final long slots)
    {
        synchronized (lock)
        {
            this.tenantOffloadSlots = slots;
        }
    }

    /**
     * Set the backends jobs are placed on, in order of preference, before any job is created.
     *
     * @param backends   the preference list.
     * @param multicast  whether results are multicast (a backend must support that delivery).
     * @param onFallback told (backend, reason) whenever placement passes a backend over.
     */
    public void placement(
        final List<Backend> backends, final boolean multicast, final java.util.function.BiConsumer<String, String> onFallback)
    {
        synchronized (lock)
        {
            this.backends = List.copyOf(backends);
            this.multicast = multicast;
            this.onFallback = onFallback;
        }
    }

    /**
     * @return the backends in order of preference.
     */
    public List<Backend> backends()
    {
        synchronized (lock)
        {
            return backends;
        }
    }

    private record Placement(Backend backend, String fallback, BackendJob backendJob)
    {
    }

    private String refusalOf(final Backend backend, final JobSpec spec)
    {
        final String limit = backend.capabilities().check(spec, multicast);
        if (limit != null)
        {
            return limit;
        }
        // the backend's own state first: one that is down or reconnecting says so, not that a quota was reached
        final String refusal = backend.refusal(spec);
        if (refusal != null)
        {
            return refusal;
        }
        if (tenantOffloadSlots > 0 && !backend.slotsInShards())
        {
            final long[] usage = tenantUsage.get(spec.tenant());
            final long held = usage == null ? 0 : usage[2];
            if (held + offloadSlots(spec) > tenantOffloadSlots)
            {
                return "tenant '" + spec.tenant() + "' would hold " + (held + offloadSlots(spec)) + " offload slot versions, over " +
                    "its quota of " + tenantOffloadSlots + " (switchml.appliance.tenant.offload.slots)";
            }
        }
        return null;
    }

    private static long offloadSlots(final JobSpec spec)
    {
        return 2L * spec.slots();
    }

    /**
     * Choose the backend of a new job and reserve its slots there: the one it asked for (refused, not moved, when
     * that one cannot take it), or the first in the preference list that can, recording every one passed over with
     * its reason. A backend whose reservation fails (a switch that refuses the write) is passed over like one whose
     * limits do not admit the job, with the backend's message as the reason.
     */
    private Placement place(final JobSpec spec, final String requested, final int jobId) throws RefusedException
    {
        if (requested != null && !ControlProtocol.BACKEND_AUTO.equals(requested))
        {
            for (final Backend backend : backends)
            {
                if (backend.name().equals(requested))
                {
                    final String reason = refusalOf(backend, spec);
                    if (reason != null)
                    {
                        telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
                        throw new RefusedException("backend " + requested + " cannot take job '" + spec.name() + "': " + reason);
                    }
                    try
                    {
                        return new Placement(backend, "", backend.reserve(spec, jobId));
                    }
                    catch (final BackendException ex)
                    {
                        telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
                        throw new RefusedException("backend " + requested + " cannot take job '" + spec.name() + "': " + ex.getMessage());
                    }
                }
            }
            throw new RefusedException("unknown backend '" + requested + "' (this appliance has: " + ControlProtocol.BACKEND_AUTO + ", " +
                String.join(", ", backends.stream().map(Backend::name).toList()) + ")");
        }
        final List<String> passed = new ArrayList<>();
        for (final Backend backend : backends)
        {
            String reason = refusalOf(backend, spec);
            if (reason == null)
            {
                try
                {
                    return new Placement(backend, String.join("; ", passed), backend.reserve(spec, jobId));
                }
                catch (final BackendException ex)
                {
                    reason = ex.getMessage();
                }
            }
            passed.add(backend.name() + ": " + reason);
            onFallback.accept(backend.name(), reason);
        }
        telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
        throw new RefusedException("no backend can take job '" + spec.name() + "': " + String.join("; ", passed));
    }

    /**
     * Job lifecycle events, for the journal and logs. Called under the registry lock: do not block.
     */
    public interface JobEventListener
    {
        void onJobCreated(Job job, String description);

        void onJobStarted(Job job, String description);

        void onJobEnded(Job job, String reason, boolean aborted);
    }

    /**
     * Listen to job lifecycle events.
     */
    public void addEventListener(final JobEventListener listener)
    {
        synchronized (lock)
        {
            eventListeners.add(listener);
        }
    }

    /**
     * Data-plane lookup of an active job, lock-free.
     *
     * @return the job or null when no active job has that id.
     */
    public Job activeJob(final int jobId)
    {
        return activeJobs.get(jobId);
    }

    /**
     * @return the active jobs; the snapshot must not be modified.
     */
    public Int2ObjectHashMap<Job> activeJobs()
    {
        return activeJobs;
    }

    /**
     * Thrown to refuse a request; the message goes to the client as is.
     */
    public static final class RefusedException extends Exception
    {
        public RefusedException(final String message)
        {
            super(message, null, false, false);
        }
    }

    /**
     * Create a job, or with ifAbsent find the same job created earlier by another rank.
     *
     * @param spec     the job's parameters.
     * @param token    the job's join token, or null to generate one.
     * @param ifAbsent return an existing job of the same tenant and name when spec and token agree.
     * @return the job.
     * @throws RefusedException naming the conflict, the quota or the budget that refused it.
     */
    public Job create(final JobSpec spec, final String token, final boolean ifAbsent) throws RefusedException
    {
        return create(spec, token, ifAbsent, ControlProtocol.BACKEND_AUTO);
    }

    /**
     * Create a job on a backend, or with ifAbsent find the same job created earlier by another rank.
     *
     * @param backend {@link ControlProtocol#BACKEND_AUTO} (the first backend of the preference list that can take the job) or a backend's name; with
     *                ifAbsent, an existing job on another backend than the one named is refused, naming both.
     */
    public Job create(final JobSpec spec, final String token, final boolean ifAbsent, final String backend) throws RefusedException
    {
        validate(spec);
        if (token != null && !token.matches("[0-9A-Za-z_\\-]{8,128}"))
        {
            throw new RefusedException("token must be 8 to 128 characters of [0-9A-Za-z_-]");
        }
        synchronized (lock)
        {
            final String key = spec.tenant() + "/" + spec.name();
            final Job existing = jobsByName.get(key);
            if (existing != null)
            {
                if (!ifAbsent)
                {
                    throw new RefusedException("job '" + spec.name() + "' of tenant '" + spec.tenant() + "' already exists as job " +
                        existing.jobId);
                }
                final String conflict = existing.spec().conflictWith(spec);
                if (conflict != null)
                {
                    throw new RefusedException("job '" + spec.name() + "' (" + existing.jobId + ") asked for " + conflict);
                }
                if (token == null || !token.equals(existing.token))
                {
                    throw new RefusedException("job '" + spec.name() + "' (" + existing.jobId + ") exists and the token does not match");
                }
                if (backend != null && !ControlProtocol.BACKEND_AUTO.equals(backend) && !backend.equals(existing.backendName))
                {
                    throw new RefusedException("job '" + spec.name() + "' (" + existing.jobId + ") runs on backend " +
                        existing.backendName + ", not on the " + backend + " this rank asked for" +
                        (existing.fallback.isEmpty() ? "" : " (passed over: " + existing.fallback + ")"));
                }
                return existing;
            }

            final int jobId = nextJobId;
            final Placement placement = place(spec, backend, jobId);
            try
            {
                checkQuotas(spec, placement);
            }
            catch (final RefusedException ex)
            {
                placement.backendJob().release();
                throw ex;
            }
            nextJobId++;
            final String jobToken = token != null ? token : HexFormat.of().formatHex(randomBytes(16));
            final long[] usage = tenantUsage.computeIfAbsent(spec.tenant(), t -> new long[3]);
            final Job job;
            try
            {
                job = new Job(jobId, spec, shardCount, jobToken, random.nextLong(), random.nextLong(),
                    System.currentTimeMillis() + spec.joinTimeoutMs(), telemetry.allocateJobCounters(jobId, spec.tenant(), spec.name()),
                    placement.backend().name(), placement.backend().slotsInShards(), placement.backendJob(), placement.fallback());
            }
            catch (final RuntimeException ex)
            {
                // no counters left, say: give the backend its reservation back (a switch's range, an XDP slot range)
                placement.backendJob().release();
                throw ex;
            }
            telemetry.system(SystemCounter.JOBS_CREATED).increment();
            jobs.put(job.jobId, job);
            jobsByName.put(key, job);
            usage[0] += job.memoryBytes;
            usage[1]++;
            usage[2] += job.slotsInShards() ? 0 : offloadSlots(spec);
            memoryUsedBytes += job.memoryBytes;
            for (final JobEventListener listener : eventListeners)
            {
                listener.onJobCreated(job, job.describe());
            }
            return job;
        }
    }

    /**
     * The aggregator-memory budget and the tenant's quotas, for a job placed where it would go.
     */
    private void checkQuotas(final JobSpec spec, final Placement placement) throws RefusedException
    {
        final boolean inShards = placement.backend().slotsInShards();
        final long needed = inShards ? Job.memoryBytes(spec.slots(), spec.lanes()) : 0;
        if (memoryUsedBytes + needed > memoryBudgetBytes)
        {
            telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
            throw new RefusedException("job '" + spec.name() + "' needs " + needed + " bytes of aggregator memory but only " +
                (memoryBudgetBytes - memoryUsedBytes) + " of " + memoryBudgetBytes + " are free");
        }
        final long[] usage = tenantUsage.computeIfAbsent(spec.tenant(), t -> new long[3]);
        if (usage[0] + needed > tenantMemoryQuotaBytes)
        {
            telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
            throw new RefusedException("tenant '" + spec.tenant() + "' would use " + (usage[0] + needed) +
                " bytes of aggregator memory, over its quota of " + tenantMemoryQuotaBytes);
        }
        if (usage[1] + 1 > tenantMaxJobs)
        {
            telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
            throw new RefusedException("tenant '" + spec.tenant() + "' already runs " + usage[1] + " jobs, its limit");
        }
    }

    private byte[] randomBytes(final int length)
    {
        final byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
    }

    /** Shortest and longest slot and join timeouts a CREATE may ask for. */
    public static final long MIN_TIMEOUT_MS = 10;
    public static final long MAX_TIMEOUT_MS = 3_600_000;

    private static void validate(final JobSpec spec) throws RefusedException
    {
        if (!spec.tenant().matches("[0-9A-Za-z_.\\-]{1,64}") || !spec.name().matches("[0-9A-Za-z_.\\-]{1,128}"))
        {
            throw new RefusedException("tenant and name must be 1 to 64 (128 for names) characters of [0-9A-Za-z_.-]");
        }
        if (spec.worldSize() < 1 || spec.worldSize() > MAX_WORLD_SIZE)
        {
            throw new RefusedException("world size must be within 1.." + MAX_WORLD_SIZE + ": " + spec.worldSize());
        }
        if (spec.lanes() < 1 || spec.lanes() > DataHeaderFlyweight.MAX_ELEMENTS)
        {
            throw new RefusedException("k must be within 1.." + DataHeaderFlyweight.MAX_ELEMENTS + ": " + spec.lanes());
        }
        if (spec.slots() < 1 || spec.slots() > 1 << 20)
        {
            throw new RefusedException("s must be within 1.." + (1 << 20) + ": " + spec.slots());
        }
        if (spec.slotTimeoutMs() < MIN_TIMEOUT_MS || spec.slotTimeoutMs() > MAX_TIMEOUT_MS)
        {
            throw new RefusedException("slotTimeoutMs must be within " + MIN_TIMEOUT_MS + ".." + MAX_TIMEOUT_MS + ": " +
                spec.slotTimeoutMs());
        }
        if (spec.joinTimeoutMs() < MIN_TIMEOUT_MS || spec.joinTimeoutMs() > MAX_TIMEOUT_MS)
        {
            throw new RefusedException("joinTimeoutMs must be within " + MIN_TIMEOUT_MS + ".." + MAX_TIMEOUT_MS + ": " +
                spec.joinTimeoutMs());
        }
    }

    /**
     * Join a job as a rank and wait until every rank has joined or the join deadline passes.
     *
     * @param dataAddresses the member's UDP address for each shard.
     * @return the job, active.
     * @throws RefusedException naming the problem: unknown job, bad token, rank out of range or
     *                          taken, or ranks missing at the deadline.
     */
    Job join(
        final int jobId, final int rank, final String token, final InetSocketAddress[] dataAddresses,
        final ControlConnection connection) throws RefusedException, InterruptedException
    {
        synchronized (lock)
        {
            final Job job = jobs.get(jobId);
            if (job == null)
            {
                throw new RefusedException("no job " + jobId + " (create it first)");
            }
            if (token == null || !token.equals(job.token))
            {
                throw new RefusedException("token does not match job " + jobId);
            }
            if (job.state != Job.State.JOINING)
            {
                throw new RefusedException("job " + jobId + " is already running; rank " + rank + " cannot join it now");
            }
            if (rank < 0 || rank >= job.worldSize)
            {
                throw new RefusedException("rank " + rank + " is out of range for job " + jobId + " of world size " + job.worldSize);
            }
            if (job.connections[rank] != null)
            {
                throw new RefusedException("rank " + rank + " already joined job " + jobId + " from " +
                    job.members[rank][0].getAddress().getHostAddress());
            }
            if (dataAddresses.length != shardCount)
            {
                throw new RefusedException("rank " + rank + " gave " + dataAddresses.length + " data ports, the appliance has " +
                    shardCount + " shards");
            }

            job.members[rank] = dataAddresses;
            job.connections[rank] = connection;
            job.joined++;
            if (job.joined == job.worldSize)
            {
                try
                {
                    job.backendJob.activate(job);
                }
                catch (final BackendException ex)
                {
                    telemetry.system(SystemCounter.JOBS_ABORTED).increment();
                    job.aborted = true;
                    final String reason = "backend " + job.backendName + " failed to install the job: " + ex.getMessage();
                    endLocked(job, reason);
                    throw new RefusedException("job " + jobId + " did not start: " + reason);
                }
                job.state = Job.State.ACTIVE;
                telemetry.system(SystemCounter.JOBS_ACTIVE).increment();
                publishActive();
                lock.notifyAll();
                for (final JobEventListener listener : eventListeners)
                {
                    listener.onJobStarted(job, job.describe());
                }
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
                throw new RefusedException("job " + jobId + " did not start: " + job.endReason);
            }
            return job;
        }
    }

    /**
     * End the jobs that no rank has joined by their join deadline, freeing the aggregator memory they reserved: a job
     * that is created and never joined (a typo, a crashed launcher, or a stranger's CREATE) must not hold the budget.
     * A job that some rank joined ends at the deadline through that rank's wait in {@link #join}.
     *
     * @return jobs ended.
     */
    public int reapUnjoined(final long nowMs)
    {
        synchronized (lock)
        {
            List<Job> expired = null;
            for (final Job job : jobs.values())
            {
                if (job.state == Job.State.JOINING && job.joined == 0 && nowMs - job.joinDeadlineMs >= 0)
                {
                    (expired == null ? expired = new ArrayList<>() : expired).add(job);
                }
            }
            if (expired == null)
            {
                return 0;
            }
            for (final Job job : expired)
            {
                endLocked(job, "join deadline passed; no rank joined");
            }
            return expired.size();
        }
    }

    /**
     * A member left in an orderly way; the job ends and frees its slots when every member has left.
     */
    void leave(final Job job, final int rank)
    {
        synchronized (lock)
        {
            if (job.state == Job.State.ENDED)
            {
                return;
            }
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
     * slots are freed at once.
     */
    public void abort(final Job job, final String reason)
    {
        synchronized (lock)
        {
            if (job.state == Job.State.ENDED)
            {
                return;
            }
            telemetry.system(SystemCounter.JOBS_ABORTED).increment();
            job.aborted = true;
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
     * @return the job with this id in any state but ended, or null.
     */
    public Job job(final int jobId)
    {
        synchronized (lock)
        {
            return jobs.get(jobId);
        }
    }

    /**
     * @return one line per job of this tenant, or of every tenant when null.
     */
    public List<String> describeJobs(final String tenant)
    {
        synchronized (lock)
        {
            final List<String> lines = new ArrayList<>();
            for (final Job job : jobs.values())
            {
                if (tenant == null || tenant.equals(job.tenant))
                {
                    lines.add(job.describe());
                }
            }
            return lines;
        }
    }

    /**
     * Abort a job by id, for operators.
     *
     * @return false when there is no such job.
     */
    public boolean abort(final int jobId, final String reason)
    {
        final Job job;
        synchronized (lock)
        {
            job = jobs.get(jobId);
        }
        if (job == null)
        {
            return false;
        }
        abort(job, reason);
        return true;
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
        job.backendJob.release();
        if (jobs.remove(job.jobId, job))
        {
            jobsByName.remove(job.tenant + "/" + job.name, job);
            final long[] usage = tenantUsage.get(job.tenant);
            usage[0] -= job.memoryBytes;
            usage[1]--;
            usage[2] -= job.slotsInShards() ? 0 : offloadSlots(job.spec());
            memoryUsedBytes -= job.memoryBytes;
        }
        if (wasActive)
        {
            telemetry.system(SystemCounter.JOBS_ACTIVE).decrement();
            publishActive();
        }
        job.counters.close();
        lock.notifyAll();
        for (final JobEventListener listener : eventListeners)
        {
            listener.onJobEnded(job, reason, job.aborted || reason.startsWith("join deadline"));
        }
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
     * Check the running jobs of offload backends: each job's own poll (slot deadlines, ordering violations) and
     * each backend's health. Aborts what fails, naming the backend. Call periodically from a control thread.
     *
     * @param nowNs {@link System#nanoTime()}.
     */
    public void pollBackends(final long nowNs)
    {
        for (final Backend backend : backends())
        {
            if (backend.slotsInShards())
            {
                continue;   // the software backend: its slots are the shards' own, which scan their deadlines
            }
            final String failure = backend.health();
            // forEachInt, not values(): the map's iterators are shared with the shards that read the snapshot
            activeJobs.forEachInt((jobId, job) ->
            {
                if (!job.backendName.equals(backend.name()))
                {
                    return;
                }
                final String reason = failure != null ? "backend " + backend.name() + " failed: " + failure : job.backendJob.poll(nowNs);
                if (reason != null && job.markAborting())
                {
                    abort(job, failure != null ? reason : backend.name() + ": " + reason);
                }
            });
        }
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

    public long memoryBudgetBytes()
    {
        return memoryBudgetBytes;
    }
}
