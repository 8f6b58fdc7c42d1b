package io.switchml.appliance.control;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.telemetry.SystemCounter;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.status.AtomicCounter;

import java.net.InetSocketAddress;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Jobs, their membership and admission. Control threads mutate under one lock; the data-plane shards
 * read an immutable snapshot of the active jobs, replaced copy-on-write whenever a job starts or
 * ends, so a shard never takes a lock.
 */
public final class JobRegistry
{
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(JobRegistry.class);
    /** How long a caller that ended jobs waits for their backends' release before it goes on. */
    static final long RELEASE_WAIT_MS = 1_000;

    private final Object lock = new Object();
    private final Map<Integer, Job> jobs = new HashMap<>();
    private final Map<String, Job> jobsByName = new HashMap<>();
    private final TenantAccounts accounts;
    private final JobPlacement placement;
    private final int shardCount;
    private final Telemetry telemetry;
    private final SecureRandom random = new SecureRandom();
    private final List<JobEventListener> eventListeners = new ArrayList<>();
    private final JobIds jobIds = new JobIds();
    /** Backend jobs ended under the lock and not yet released: {@link #releaseEnded()}. */
    private final List<BackendJob> toRelease = new ArrayList<>();
    /**
     * Releases of backend jobs under way, each completed by its thread when done: {@link #awaitReleases}. Futures, not
     * the threads: a thread is registered before it starts (else it could end, and deregister, first), and joining one
     * not yet started throws.
     */
    private final Set<CompletableFuture<Void>> releasing =
        ConcurrentHashMap.newKeySet();
    /** Set by {@link #abortAll}: no job is created after it, so none can reserve what the closing backends hold. */
    private String closedReason;
    private volatile Int2ObjectHashMap<Job> activeJobs = new Int2ObjectHashMap<>();

    public JobRegistry(
        final long memoryBudgetBytes, final long tenantMemoryQuotaBytes, final int tenantMaxJobs, final int shardCount,
        final Telemetry telemetry)
    {
        final AtomicCounter admissionRefusals = telemetry.system(SystemCounter.ADMISSION_REFUSALS);
        this.accounts = new TenantAccounts(memoryBudgetBytes, tenantMemoryQuotaBytes, tenantMaxJobs, admissionRefusals);
        this.placement = new JobPlacement(admissionRefusals);
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
            placement.tenantOffloadSlots(slots);
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
            placement.configure(backends, multicast, onFallback);
        }
    }

    /**
     * @return the backends in order of preference.
     */
    public List<Backend> backends()
    {
        synchronized (lock)
        {
            return placement.backends();
        }
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
        final String problem = spec.problem();
        if (problem != null)
        {
            throw new RefusedException(problem);
        }
        if (token != null && !token.matches("[0-9A-Za-z_\\-]{8,128}"))
        {
            throw new RefusedException("token must be 8 to 128 characters of [0-9A-Za-z_-]");
        }
        synchronized (lock)
        {
            if (closedReason != null)
            {
                throw new RefusedException("job '" + spec.name() + "' is not created: " + closedReason);
            }
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
                if (!existing.hasToken(token))
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

            final int jobId = jobIds.peek(jobs.keySet());
            final JobPlacement.Placement placed = placement.place(spec, backend, jobId, accounts.offloadSlots(spec.tenant()));
            try
            {
                accounts.check(spec, placed.backend().slotsInShards() ? Job.memoryBytes(spec.slots(), spec.lanes()) : 0);
            }
            catch (final RefusedException ex)
            {
                placed.backendJob().release();
                throw ex;
            }
            jobIds.take(jobId);
            final String jobToken = token != null ? token : HexFormat.of().formatHex(randomBytes(16));
            final Job job;
            final io.switchml.appliance.telemetry.JobCounters counters;
            try
            {
                counters = telemetry.allocateJobCounters(jobId, spec.tenant(), spec.name());
            }
            catch (final RuntimeException ex)
            {
                // give the backend its reservation back (a switch's range, an XDP slot range)
                placed.backendJob().release();
                telemetry.system(SystemCounter.ADMISSION_REFUSALS).increment();
                throw new RefusedException("job '" + spec.name() + "' cannot get its counters: " + ex.getMessage() +
                    " (too many jobs on this appliance)");
            }
            try
            {
                job = new Job(jobId, spec, shardCount, jobToken, random.nextLong(), random.nextLong(),
                    System.currentTimeMillis() + spec.joinTimeoutMs(), counters,
                    placed.backend().name(), placed.backend().slotsInShards(), placed.backendJob(), placed.fallback());
            }
            catch (final RuntimeException ex)
            {
                counters.close();
                placed.backendJob().release();
                throw ex;
            }
            telemetry.system(SystemCounter.JOBS_CREATED).increment();
            jobs.put(job.jobId, job);
            jobsByName.put(key, job);
            accounts.add(spec.tenant(), job.memoryBytes, job.slotsInShards() ? 0 : JobPlacement.offloadSlots(spec));
            for (final JobEventListener listener : eventListeners)
            {
                listener.onJobCreated(job, job.describe());
            }
            return job;
        }
    }

    private byte[] randomBytes(final int length)
    {
        final byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
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
        final Job job;
        final boolean last;
        synchronized (lock)
        {
            job = jobs.get(jobId);
            if (job == null || !job.hasToken(token))
            {
                // one answer for both, so that a stranger learns nothing of which job ids exist
                throw new RefusedException("no job " + jobId + " with this token (create it first)");
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
            last = job.joined == job.worldSize;
            if (last)
            {
                job.state = Job.State.ACTIVATING;
            }
        }
        if (last)
        {
            activate(job);
            return job;
        }
        try
        {
            synchronized (lock)
            {
                while (job.state == Job.State.JOINING || job.state == Job.State.ACTIVATING)
                {
                    final long remainingMs = job.joinDeadlineMs - System.currentTimeMillis();
                    if (job.state == Job.State.JOINING && remainingMs <= 0)
                    {
                        endLocked(job, "join deadline passed; missing ranks " + job.missingRanks());
                        break;
                    }
                    // an installation has no deadline here: it ends, or the job is aborted meanwhile
                    lock.wait(job.state == Job.State.JOINING ? remainingMs : 1_000);
                }
                if (job.state != Job.State.ACTIVE)
                {
                    throw new RefusedException("job " + jobId + " did not start: " + job.endReason);
                }
                return job;
            }
        }
        finally
        {
            releaseEnded();
        }
    }

    /**
     * The last rank to join installs the job in its backend, outside the registry's lock: a switch's installation is
     * thousands of RPCs, and an unresponsive switch takes seconds per write, during which every tenant's requests and
     * the control thread's timeouts would otherwise wait. A job aborted meanwhile stays ended: its backend job
     * serializes installation and release, and refuses to install once released (BackendJob#activate).
     *
     * @throws RefusedException when the backend refused the job or it was aborted meanwhile.
     */
    private void activate(final Job job) throws RefusedException
    {
        Exception failure = null;
        try
        {
            job.backendJob.activate(job);
        }
        catch (final BackendException | RuntimeException ex)
        {
            // a bug in a backend too must end the job, or its ranks would wait for an installation that never ends
            failure = ex;
        }
        try
        {
            synchronized (lock)
            {
                if (job.state != Job.State.ACTIVATING)
                {
                    throw new RefusedException("job " + job.jobId + " did not start: " + job.endReason);
                }
                if (failure != null)
                {
                    telemetry.system(SystemCounter.JOBS_ABORTED).increment();
                    job.aborted = true;
                    final String reason = "backend " + job.backendName + " failed to install the job: " +
                        (failure instanceof BackendException ? failure.getMessage() : failure.toString());
                    endLocked(job, reason);
                    throw new RefusedException("job " + job.jobId + " did not start: " + reason);
                }
                job.state = Job.State.ACTIVE;
                telemetry.system(SystemCounter.JOBS_ACTIVE).increment();
                publishActive();
                lock.notifyAll();
                for (final JobEventListener listener : eventListeners)
                {
                    listener.onJobStarted(job, job.describe());
                }
            }
        }
        finally
        {
            releaseEnded();
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
        try
        {
            return reapUnjoinedLocked(nowMs);
        }
        finally
        {
            releaseEnded();
        }
    }

    private int reapUnjoinedLocked(final long nowMs)
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
            job.onLeft(rank);
            for (final boolean hasLeft : job.left)
            {
                if (!hasLeft)
                {
                    return;
                }
            }
            endLocked(job, "every rank left");
        }
        releaseEnded();
    }

    /**
     * Abort a job: every member still connected gets an ABORT line with the reason, and the job's
     * slots are freed at once. Returns without waiting for the members to take the line.
     */
    public void abort(final Job job, final String reason)
    {
        abortAndTell(job, reason);
    }

    /**
     * @return the thread telling the members, or null when there is nobody to tell.
     */
    private Thread abortAndTell(final Job job, final String reason)
    {
        final List<ControlConnection> members = new ArrayList<>(job.worldSize);
        synchronized (lock)
        {
            if (job.state == Job.State.ENDED)
            {
                return null;
            }
            telemetry.system(SystemCounter.JOBS_ABORTED).increment();
            job.aborted = true;
            // a rank still joining is refused and its connection goes back to serving requests; a started job's
            // member holds nothing from now on
            final boolean started = job.state == Job.State.ACTIVE;
            endLocked(job, reason);
            for (int rank = 0; rank < job.worldSize; rank++)
            {
                final ControlConnection connection = job.connections[rank];
                if (connection != null && !job.left[rank])
                {
                    if (started)
                    {
                        connection.membershipEnded();
                    }
                    members.add(connection);
                }
            }
        }
        if (members.isEmpty())
        {
            releaseEnded();
            return null;
        }
        // outside the lock and on a thread of its own: a member that reads nothing holds up its own send (until the
        // control server's watchdog cuts it off), never another tenant's requests nor the caller (a connection's
        // thread, or the control thread that runs every job's slot timeouts); started before the release, which may
        // wait for a switch
        final String line = "ABORT job=" + job.jobId + " reason=" + reason;
        final Thread telling = Thread.ofVirtual().name("switchml-abort-" + job.jobId).start(() ->
        {
            for (final ControlConnection connection : members)
            {
                connection.send(line);
            }
        });
        releaseEnded();
        return telling;
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
     * Wait for the backends' releases under way, at shutdown before the backends close (a switch's removal of a large
     * job is tens of RPCs).
     *
     * @return whether they all finished within the time.
     */
    public boolean awaitReleases(final long timeoutMs)
    {
        final long deadlineNs = System.nanoTime() + timeoutMs * 1_000_000L;
        for (final CompletableFuture<Void> release : List.copyOf(releasing))
        {
            try
            {
                release.get(Math.max(1, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS);
            }
            catch (final TimeoutException | ExecutionException ex)
            {
                return false;
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    /**
     * Abort every job and create none from now on, at shutdown: a CREATE that arrived between this and the control
     * server's close would otherwise reserve an offload backend's entries that nobody releases.
     */
    public void abortAll(final String reason)
    {
        final List<Job> all;
        synchronized (lock)
        {
            closedReason = reason;
            all = new ArrayList<>(jobs.values());
        }
        final List<Thread> telling = new ArrayList<>();
        for (final Job job : all)
        {
            final Thread thread = abortAndTell(job, reason);
            if (thread != null)
            {
                telling.add(thread);
            }
        }
        // the members hear why before the appliance closes their connections (a deaf one is cut off meanwhile)
        final long deadlineNs = System.nanoTime() + (ControlServer.SEND_DEADLINE_MS + 2_000) * 1_000_000L;
        for (final Thread thread : telling)
        {
            try
            {
                thread.join(Math.max(1, (deadlineNs - System.nanoTime()) / 1_000_000L));
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                return;
            }
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
        // released by releaseEnded() once the lock is let go: a switch's removal is RPCs that may each wait seconds
        toRelease.add(job.backendJob);
        if (jobs.remove(job.jobId, job))
        {
            jobsByName.remove(job.tenant + "/" + job.name, job);
            accounts.remove(job.tenant, job.memoryBytes, job.slotsInShards() ? 0 : JobPlacement.offloadSlots(job.spec()));
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

    /**
     * Release the backends' reservations of the jobs ended under the lock, outside it. Every method that may end a
     * job calls it after its synchronized block.
     */
    private void releaseEnded()
    {
        final List<BackendJob> ended;
        synchronized (lock)
        {
            if (toRelease.isEmpty())
            {
                return;
            }
            ended = new ArrayList<>(toRelease);
            toRelease.clear();
        }
        // on a thread of its own, waited for a moment: a release is normally done at once, so the slots are free when
        // an abort returns; one that waits for a hung installation or an unresponsive switch holds up no caller (a
        // connection's thread, the control thread that runs slot timeouts) for longer than RELEASE_WAIT_MS
        final CompletableFuture<Void> done = new CompletableFuture<>();
        releasing.add(done);
        final Thread thread = Thread.ofVirtual().name("switchml-release").start(() ->
        {
            try
            {
                for (final BackendJob backendJob : ended)
                {
                    try
                    {
                        backendJob.release();
                    }
                    catch (final RuntimeException ex)
                    {
                        LOG.error("releasing a job's backend reservation failed", ex);
                    }
                }
            }
            finally
            {
                releasing.remove(done);
                done.complete(null);
            }
        });
        try
        {
            thread.join(RELEASE_WAIT_MS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
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
            return accounts.memoryUsedBytes();
        }
    }

    public long memoryBudgetBytes()
    {
        return accounts.memoryBudgetBytes();
    }
}
