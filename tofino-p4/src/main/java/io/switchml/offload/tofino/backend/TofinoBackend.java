package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendCapabilities;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.SlotRanges;
import io.switchml.appliance.control.JobSpec;
import io.switchml.appliance.control.Job;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.P4Names;
import io.switchml.protocol.ElementType;

import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The {@code tofino} and {@code tofino-model} backends: a job's slot pool in the register arrays of a switch running
 * {@code tofino-p4/p4/switchml.p4}, installed and removed through P4Runtime. {@code tofino} drives a real switch,
 * whose pipeline sees the workers' packets on their way to the appliance; {@code tofino-model} drives the Java
 * pipeline model behind a P4Runtime server on loopback (the same client, the same writes), and the model is the data
 * plane on the appliance's shard threads ({@link io.switchml.appliance.backend.ShardDataPath}).
 * <p>
 * Admission follows what the program can hold and refuses naming the limit: int32 lanes only (float32 jobs travel as
 * int32 already; float16 and bfloat16 wire formats are refused), k = 64 or 256, at most 32 ranks (the seen bitmap is
 * one 32-bit register), MAC off (no SipHash at line rate: sources are pinned per rank instead), the register space
 * and multicast groups left, and a reachable switch on which this appliance is the primary controller.
 */
public final class TofinoBackend implements Backend
{
    public static final String NAME = "tofino";
    public static final String MODEL_NAME = "tofino-model";

    private final String name;
    private final BackendEnvironment environment;
    private final TofinoOptions options;
    private final SwitchConnection connection;
    private final SlotRanges ranges;
    private final BitSet groupsInUse = new BitSet();
    /** How often upkeep retries removing what released jobs left on the switch. */
    static final long LEFTOVER_RETRY_NS = TimeUnit.SECONDS.toNanos(5);

    private final List<TofinoJob> leftOnSwitch = new ArrayList<>();
    /** Jobs admitted at CREATE and not released: a switch that restarted empty must get their entries again. */
    private final Set<TofinoJob> admitted = new LinkedHashSet<>();
    private long lastLeftoverTryNs;
    private final BackendCapabilities capabilities;

    TofinoBackend(final String name, final BackendEnvironment environment, final SwitchConnection connection, final TofinoOptions options)
    {
        this.name = name;
        this.environment = environment;
        this.options = options;
        this.connection = connection;
        this.ranges = new SlotRanges(options.registers());
        this.capabilities = new BackendCapabilities(BackendCapabilities.typeSet(ElementType.INT32, ElementType.FLOAT32),
            P4Names.LANES_PER_PASS, P4Names.LANES_PER_PASS * P4Names.MAX_PASSES, P4Names.MAX_WORLD, 2L * options.registers(), 0, true, true);
        connection.addReconnectStep(this::readmit);
        connection.addReconnectStep(control -> removeLeftovers(control, 0));
        connection.addReconnectStep(control -> removeUnheld(control, "on the new session"));
        connection.addUpkeepStep(control -> removeLeftovers(control, LEFTOVER_RETRY_NS));
        removeUnheld(connection.control(), "at start");
    }

    public String name()
    {
        return name;
    }

    public BackendCapabilities capabilities()
    {
        return capabilities;
    }

    BackendEnvironment environment()
    {
        return environment;
    }

    TofinoOptions options()
    {
        return options;
    }

    SwitchConnection connection()
    {
        return connection;
    }

    public synchronized String refusal(final JobSpec spec)
    {
        if (spec.lanes() != 64 && spec.lanes() != 256)
        {
            return "k=" + spec.lanes() + " not in {64, 256} (64 lanes per pass, 256 by recirculation)";
        }
        final String health = health();
        if (health != null)
        {
            return health;
        }
        if (ranges.largestFree() < spec.slots())
        {
            return "s=" + spec.slots() + " does not fit the free register space: " + ranges.largestFree() + " contiguous of " +
                options.registers() + " slots free";
        }
        if (freeGroup() < 0)
        {
            return "no free multicast group in " + options.firstGroup() + "-" + options.lastGroup();
        }
        return null;
    }

    public synchronized BackendJob reserve(final JobSpec spec, final int jobId) throws BackendException
    {
        final String refusal = refusal(spec);
        if (refusal != null)
        {
            throw new BackendException(refusal);
        }
        final int base = ranges.allocate(spec.slots());
        final int group = freeGroup();
        groupsInUse.set(group);
        final TofinoJob job = new TofinoJob(this, jobId, spec, base, group);
        try
        {
            JobInstaller.admit(connection.control(), job.admission());
            admitted.add(job);
        }
        catch (final PipelineException ex)
        {
            free(base, spec.slots(), group);
            throw new BackendException(ex.detail(), ex);
        }
        return job;
    }

    synchronized void released(final TofinoJob job)
    {
        admitted.remove(job);
    }

    /**
     * On a new session: admit again the jobs created and not yet joined (a switch that restarted empty lost their
     * entries; one that kept them answers ALREADY_EXISTS). A job that had joined was aborted when the session was lost.
     */
    private void readmit(final PipelineControl control)
    {
        final List<TofinoJob> jobs;
        synchronized (this)
        {
            jobs = new ArrayList<>(admitted);
        }
        for (final TofinoJob job : jobs)
        {
            try
            {
                job.readmit(control);
            }
            catch (final PipelineException ex)
            {
                // its activation will fail and abort it, naming the switch's message
                environment.log().accept(name + ": admitting job " + job.jobId() + " again failed: " + ex.getMessage());
            }
        }
    }

    /**
     * A released job whose entries could not be removed (the session was down, or the switch refused): removed by
     * {@link #removeLeftovers} on the next session, or on this one at the next upkeep.
     */
    synchronized void removeLater(final TofinoJob job)
    {
        leftOnSwitch.add(job);
    }

    /**
     * Remove what released jobs left on the switch, freeing their ranges; outside this backend's lock (P4Runtime
     * calls take up to the timeout each, and CREATE must not wait for them).
     *
     * @param minIntervalNs do nothing if the last try was less than this long ago (upkeep); 0: now (a new session).
     */
    private void removeLeftovers(final PipelineControl control, final long minIntervalNs)
    {
        final List<TofinoJob> pending;
        synchronized (this)
        {
            final long now = System.nanoTime();
            if (leftOnSwitch.isEmpty() || (minIntervalNs > 0 && now - lastLeftoverTryNs < minIntervalNs))
            {
                return;
            }
            lastLeftoverTryNs = now;
            pending = new ArrayList<>(leftOnSwitch);
        }
        for (final TofinoJob job : pending)
        {
            try
            {
                job.removeRemains(control);
                synchronized (this)
                {
                    leftOnSwitch.remove(job);
                }
            }
            catch (final PipelineException ex)
            {
                environment.log().accept(name + ": removing released job " + job.jobId() + " from the switch failed again: " +
                    ex.getMessage() + " (its register range stays reserved; tried again in " +
                    TimeUnit.NANOSECONDS.toSeconds(LEFTOVER_RETRY_NS) + " s)");
            }
        }
    }

    /**
     * Remove from the switch what this appliance does not hold: the entries of the program's tables ({@code job_table},
     * {@code rank_source}, {@code replica_dest}) of jobs that are not admitted here, and the multicast groups of this
     * backend's range that no such job holds. At start (as primary controller) that is everything an earlier run left
     * when it died with the switch up: job ids restart at 1, so its entries would refuse this run's jobs (ALREADY_EXISTS)
     * or, worse, aggregate their packets into a dead job's pool. On a new session, what a failed removal or a failed
     * attach left. Each removal is checked against the jobs held under this backend's lock (a CREATE writes its entry
     * under it), and what was removed is logged. A group that could not be removed is kept out of use.
     *
     * @param when for the log: "at start", "on the new session".
     */
    private void removeUnheld(final PipelineControl control, final String when)
    {
        final List<String> removed = new ArrayList<>();
        final List<String> failed = new ArrayList<>();
        try
        {
            for (final PipelineControl.TableEntry entry : control.readTableEntries(P4Names.JOB_TABLE))
            {
                final long jobId = key(entry, P4Names.JOB_ID);
                removeIfUnheld(control, entry, () -> !holdsJob(jobId), "job_table job " + jobId, removed, failed);
            }
            for (final PipelineControl.TableEntry entry : control.readTableEntries(P4Names.RANK_SOURCE))
            {
                final long jobId = key(entry, P4Names.JOB_ID);
                removeIfUnheld(control, entry, () -> !holdsJob(jobId), "rank_source job " + jobId + " rank " +
                    key(entry, P4Names.WORKER_RANK), removed, failed);
            }
            for (final PipelineControl.TableEntry entry : control.readTableEntries(P4Names.REPLICA_DEST))
            {
                final long rid = key(entry, P4Names.EGRESS_RID);
                final int group = (int)(rid / P4Names.MAX_WORLD);
                removeIfUnheld(control, entry, () -> !holdsGroup(group), "replica_dest rid " + rid + " (group " + group + ")",
                    removed, failed);
            }
            for (final int group : control.readMulticastGroups())
            {
                if (group < options.firstGroup() || group > options.lastGroup())
                {
                    continue;
                }
                synchronized (this)
                {
                    if (holdsGroup(group))
                    {
                        continue;
                    }
                    try
                    {
                        control.writeMulticastGroup(PipelineControl.UpdateType.DELETE, group, List.of());
                        removed.add("multicast group " + group);
                    }
                    catch (final PipelineException ex)
                    {
                        if (!"NOT_FOUND".equals(ex.code()))
                        {
                            groupsInUse.set(group);
                            failed.add("multicast group " + group + " (kept out of use): " + ex.detail());
                        }
                    }
                }
            }
        }
        catch (final PipelineException ex)
        {
            failed.add("reading the switch's entries: " + ex.detail());
        }
        if (!removed.isEmpty())
        {
            environment.log().accept(name + ": removed " + when + " what this appliance does not hold (left by an earlier run or " +
                "a failed removal): " + String.join(", ", removed));
        }
        if (!failed.isEmpty())
        {
            environment.log().accept(name + ": could not remove " + when + ": " + String.join("; ", failed));
        }
    }

    private void removeIfUnheld(final PipelineControl control, final PipelineControl.TableEntry entry,
        final java.util.function.BooleanSupplier unheld, final String what, final List<String> removed, final List<String> failed)
    {
        synchronized (this)
        {
            if (!unheld.getAsBoolean())
            {
                return;
            }
            try
            {
                control.writeTableEntry(PipelineControl.UpdateType.DELETE, entry);
                removed.add(what);
            }
            catch (final PipelineException ex)
            {
                if (!"NOT_FOUND".equals(ex.code()))
                {
                    failed.add(what + ": " + ex.detail());
                }
            }
        }
    }

    private static long key(final PipelineControl.TableEntry entry, final String field)
    {
        for (final PipelineControl.ExactMatch match : entry.match())
        {
            if (match.field().equals(field))
            {
                return new java.math.BigInteger(1, match.value()).longValue();
            }
        }
        return -1;
    }

    private boolean holdsJob(final long jobId)
    {
        assert Thread.holdsLock(this);
        for (final TofinoJob job : admitted)
        {
            if ((job.jobId() & 0xFFFF_FFFFL) == jobId)
            {
                return true;
            }
        }
        return false;
    }

    private boolean holdsGroup(final int group)
    {
        assert Thread.holdsLock(this);
        for (final TofinoJob job : admitted)
        {
            if (job.group() == group)
            {
                return true;
            }
        }
        return false;
    }

    synchronized void free(final int base, final int cells, final int group)
    {
        ranges.release(base, cells);
        groupsInUse.clear(group);
    }

    /**
     * The job as the switch holds it: each rank's source address and port (where results go back to) and its switch
     * port (from the {@code ports} option, or numbered by the model).
     */
    JobInstaller.JobImage image(final Job job, final int jobId, final int base, final int group) throws BackendException
    {
        final int world = job.worldSize();
        final int[] addrs = new int[world];
        final int[] ports = new int[world];
        final int[] switchPorts = new int[world];
        for (int rank = 0; rank < world; rank++)
        {
            final InetSocketAddress member = job.member(rank, 0);
            if (!(member.getAddress() instanceof Inet4Address))
            {
                throw new BackendException(name + ": rank " + rank + " joined from " + member + ", not IPv4: the program pins IPv4 sources");
            }
            addrs[rank] = ByteBuffer.wrap(member.getAddress().getAddress()).getInt();
            ports[rank] = member.getPort();
            final Integer port = options.hostPorts().get(addrs[rank]);
            if (port == null && !options.hostPorts().isEmpty())
            {
                throw new BackendException(name + ": rank " + rank + " joined from " + member.getAddress().getHostAddress() +
                    ", which " + environment.optionPrefix() + "ports does not map to a switch port");
            }
            switchPorts[rank] = port != null ? port : rank + 1;
        }
        return new JobInstaller.JobImage(jobId, world, job.elementType(), job.lanes(), job.slots(), base, group, addrs, ports, switchPorts);
    }

    private int freeGroup()
    {
        final int group = groupsInUse.nextClearBit(options.firstGroup());
        return group <= options.lastGroup() ? group : -1;
    }

    public String health()
    {
        return connection.health();
    }

    public synchronized String describe()
    {
        return name + " on " + connection.describe() + ", " + ranges.freeTotal() + "/" + options.registers() +
            " register cells free, multicast groups " + options.firstGroup() + "-" + options.lastGroup() +
            (health() != null ? "; FAILED: " + health() : "");
    }

    public void close()
    {
        connection.close();
    }
}
