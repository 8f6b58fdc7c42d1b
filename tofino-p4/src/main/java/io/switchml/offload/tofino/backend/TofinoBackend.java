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
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.P4Names;
import io.switchml.protocol.ElementType;

import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import java.util.BitSet;

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
    private final java.util.List<TofinoJob> leftOnSwitch = new java.util.ArrayList<>();
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
        connection.onReconnected(this::removeLeftovers);
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
        }
        catch (final PipelineException ex)
        {
            free(base, spec.slots(), group);
            throw new BackendException(ex.detail(), ex);
        }
        return job;
    }

    /**
     * A released job whose entries could not be removed (the session was down): removed after reconnecting.
     */
    synchronized void removeLater(final TofinoJob job)
    {
        leftOnSwitch.add(job);
    }

    private synchronized void removeLeftovers(final io.switchml.offload.tofino.PipelineControl control)
    {
        for (final java.util.Iterator<TofinoJob> it = leftOnSwitch.iterator(); it.hasNext();)
        {
            final TofinoJob job = it.next();
            try
            {
                job.removeRemains(control);
                it.remove();
            }
            catch (final PipelineException ex)
            {
                environment.log().accept(name + ": removing a released job from the switch failed again: " + ex.getMessage() +
                    " (its register range stays reserved)");
            }
        }
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
