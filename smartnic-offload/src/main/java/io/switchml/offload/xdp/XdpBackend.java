package io.switchml.offload.xdp;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendCapabilities;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.SlotRanges;
import io.switchml.appliance.control.JobSpec;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.OnOff;
import org.agrona.concurrent.status.AtomicCounter;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The {@code xdp} backend: the aggregator program attached to the appliance's data interface in the NIC driver's
 * receive path (driver mode only, see below). Jobs placed here get a contiguous range of the program's slot array
 * and an entry in its job table once every rank has joined; from then on their updates are aggregated in the kernel
 * and never reach the Java shards, except completed results of jobs without multicast, which the program hands up
 * for the shard to fan out.
 * <p>
 * Options ({@code switchml.appliance.xdp.*}): {@code interface} (required: the data interface, e.g. eth0),
 * {@code mode} ({@code native}, the only mode: generic (skb) mode is refused, since there the kernel hands the
 * program GSO and GRO super-packets, several updates in one packet, which it cannot split; measured in the emulated
 * rack, where such jobs stalled until the workers turned GSO off), {@code max-lanes} (the largest k the program
 * takes, 1 to {@link XdpLayout#MAX_LANES}; by default the largest k whose update fits one frame of the interface's
 * MTU, (MTU - 68) / 4: 358 at 1500, 2233 at 9000; a value above that is refused at start-up), {@code slots} (entries
 * of the slot array, each both pool versions of one slot; 4096 by default, 88 bytes plus 2 * 256 bytes per started
 * block of 64 lanes each: 3.1 KiB at max-lanes 358, 17.6 KiB at 2233), {@code ttl} (IP TTL of multicast results, 1
 * by default), {@code reattach} ({@code on}, the default, or {@code off}; {@code true} and {@code false} are taken
 * too: put the program back when it was taken off, see {@link AttachmentWatch}). The program is declared xdp.frags,
 * so it attaches at any MTU the driver's multi-buffer XDP allows (veth refuses a program without it above an MTU of
 * about 3500) and reads lanes that lie in fragments. The id of the attached program is recorded in the backend's
 * state directory ({@link AttachmentRecord}).
 * <p>
 * A monitor thread copies the program's counters into the counters file every {@link #MONITOR_INTERVAL_MS} ms and
 * has the {@link AttachmentWatch} check that the program is still attached, and put it back when it was taken off.
 */
public final class XdpBackend implements Backend
{
    public static final String NAME = "xdp";
    static final long POLL_SLOTS_INTERVAL_NS = 100_000_000L;
    static final long MONITOR_INTERVAL_MS = 200;

    private static final Set<String> OPTIONS = Set.of("interface", "mode", "slots", "ttl", "max-lanes", "reattach");

    private final BackendEnvironment environment;
    private final String interfaceName;
    private final XdpProgram program;
    private final XdpAttachment attachment;
    private final SlotRanges ranges;
    private final int maxLanes;
    private final AtomicCounter[] counters = new AtomicCounter[XdpLayout.STAT_COUNT];
    private final AttachmentWatch watch;
    /** Jobs installed in the program and not yet released: the program is put back only once there are none. */
    private final AtomicInteger installedJobs = new AtomicInteger();
    private final ScheduledExecutorService monitor = Executors.newSingleThreadScheduledExecutor(
        runnable -> Thread.ofPlatform().name("switchml-xdp-monitor").daemon().unstarted(runnable));
    private volatile long[] lastStats = new long[XdpLayout.STAT_COUNT];
    private final LeftoverEntries leftovers;

    XdpBackend(final BackendEnvironment environment) throws BackendException
    {
        this.environment = environment;
        final Map<String, String> options = environment.options();
        for (final String option : options.keySet())
        {
            if (!OPTIONS.contains(option))
            {
                throw new BackendException("unknown option " + environment.optionPrefix() + option + " (known: " +
                    String.join(", ", OPTIONS.stream().sorted().toList()) + ")");
            }
        }
        interfaceName = options.get("interface");
        if (interfaceName == null || interfaceName.isBlank())
        {
            throw new BackendException(environment.optionPrefix() + "interface is required: the data interface to attach to");
        }
        checkMode(options.getOrDefault("mode", "native"));
        final boolean reattach = onOff(options, "reattach", true);
        final int slotEntries = intOption(options, "slots", 4096, 1, 1 << 20);
        final int ttl = intOption(options, "ttl", 1, 0, 255);
        final int mtu = readMtu(interfaceName);
        final int mtuLanes = XdpLayout.lanesForMtu(mtu);
        if (mtuLanes < 1)
        {
            throw new BackendException(interfaceName + "'s MTU " + mtu + " carries no update: at least " +
                (XdpLayout.FRAME_OVERHEAD_BYTES + 4) + " bytes are needed");
        }
        maxLanes = intOption(options, "max-lanes", mtuLanes, 1, XdpLayout.MAX_LANES);
        if (maxLanes > mtuLanes)
        {
            throw new BackendException(environment.optionPrefix() + "max-lanes=" + maxLanes + " exceeds " + mtuLanes +
                ", the largest k whose update fits one frame of " + interfaceName + "'s MTU " + mtu + " ((MTU - " +
                XdpLayout.FRAME_OVERHEAD_BYTES + ") / 4): raise the MTU or lower the option");
        }
        final int[] ports = environment.dataPorts();
        if (ports.length > XdpLayout.MAX_SHARDS)
        {
            throw new BackendException("the XDP program serves at most " + XdpLayout.MAX_SHARDS + " shards; the appliance has " +
                ports.length + " (switchml.appliance.shards)");
        }

        XdpProgram loaded = null;
        XdpAttachment attached = null;
        try
        {
            loaded = XdpProgram.load(slotEntries, maxLanes);
            loaded.configure(ports, ttl);
            attached = XdpAttachment.attach(interfaceName, loaded.programFd(), XdpLayout.PROGRAM_NAME,
                AttachmentRecord.read(environment.stateDirectory(), interfaceName), environment.log());
            AttachmentRecord.write(environment.stateDirectory(), interfaceName, attached.programId());
        }
        catch (final IOException ex)
        {
            attached.close();
            loaded.close();
            throw new BackendException("cannot record the attached program's id in " +
                AttachmentRecord.file(environment.stateDirectory(), interfaceName) + " (a restart after a crash needs it " +
                "to replace the program): " + ex, ex);
        }
        catch (final BpfException | RuntimeException ex)
        {
            if (attached != null)
            {
                attached.close();
            }
            if (loaded != null)
            {
                loaded.close();
            }
            throw new BackendException(ex.getMessage(), ex);
        }
        program = loaded;
        attachment = attached;
        leftovers = new LeftoverEntries(environment.log());
        ranges = new SlotRanges(slotEntries);
        for (final DropReason reason : DropReason.values())
        {
            if (reason != DropReason.NONE && reason.ordinal() < XdpLayout.STAT_PACKETS && reason.ordinal() <= 16)
            {
                counters[reason.ordinal()] = environment.counter().apply("drop_" + reason.name().toLowerCase(Locale.ROOT));
            }
        }
        for (int index = XdpLayout.STAT_PACKETS; index < XdpLayout.STAT_COUNT; index++)
        {
            if (XdpLayout.EVENT_NAMES[index] != null)
            {
                counters[index] = environment.counter().apply(XdpLayout.EVENT_NAMES[index]);
            }
        }
        watch = new AttachmentWatch(interfaceName, attachment.programId(), new AttachedInterface(interfaceName, attachment,
            program.programFd()), maxLanes, reattach, installedJobs::get, environment.counter().apply("reattachments"),
            environment.log(), System::nanoTime);
        environment.log().accept("xdp: attached " + XdpLayout.PROGRAM_NAME + " (id " + attachment.programId() + ") to " +
            interfaceName + " in native mode; udp ports " + java.util.Arrays.toString(ports) + "; k up to " + maxLanes +
            (options.containsKey("max-lanes") ? "" : " (MTU " + mtu + ")") + "; " + slotEntries + " slots (" +
            (program.slotMemoryBytes() >> 10) + " KiB); verifier processed " + program.verifiedInstructions() + " insns" +
            (reattach ? "" : "; reattach=off: not put back if taken off"));
        monitor.scheduleWithFixedDelay(this::refresh, MONITOR_INTERVAL_MS, MONITOR_INTERVAL_MS, TimeUnit.MILLISECONDS);
    }

    /** The interface's MTU, from sysfs of this process's network namespace. */
    static int readMtu(final String interfaceName) throws BackendException
    {
        final Path file = Path.of("/sys/class/net", interfaceName, "mtu");
        try
        {
            return Integer.parseInt(Files.readString(file).strip());
        }
        catch (final IOException | NumberFormatException ex)
        {
            throw new BackendException("cannot read the MTU of " + interfaceName + " (" + file + "): " + ex.getMessage() +
                "; is switchml.appliance.xdp.interface a network interface of this namespace?", ex);
        }
    }

    private static void checkMode(final String value) throws BackendException
    {
        final String mode = value.strip();
        switch (mode.toLowerCase(Locale.ROOT))
        {
            case "native", "driver" ->
            {
            }
            case "generic", "skb", "auto" -> throw new BackendException("switchml.appliance.xdp.mode=" + mode +
                " is not supported: in generic (skb) mode" + ("auto".equals(mode) ? ", auto's fallback," : "") +
                " the kernel hands the program GSO and GRO super-packets (several updates in one packet), which it " +
                "cannot split, and jobs stall; use native (driver) mode, or leave jobs to the software backend on a " +
                "NIC without driver-mode XDP");
            default -> throw new BackendException("switchml.appliance.xdp.mode must be native: '" + value + "'");
        }
    }

    private boolean onOff(final Map<String, String> options, final String name, final boolean defaultValue)
        throws BackendException
    {
        final String value = options.get(name);
        if (value == null)
        {
            return defaultValue;
        }
        return OnOff.parse(value.strip().toLowerCase(Locale.ROOT),
            () -> new BackendException(environment.optionPrefix() + name + " must be on or off: '" + value + "'"));
    }

    private int intOption(final Map<String, String> options, final String name, final int defaultValue, final int min, final int max)
        throws BackendException
    {
        final String value = options.get(name);
        if (value == null)
        {
            return defaultValue;
        }
        try
        {
            final int parsed = Integer.parseInt(value.strip());
            if (parsed < min || parsed > max)
            {
                throw new BackendException(environment.optionPrefix() + name + " must be within " + min + ".." + max + ": " + parsed);
            }
            return parsed;
        }
        catch (final NumberFormatException ex)
        {
            throw new BackendException(environment.optionPrefix() + name + " is not an integer: '" + value + "'");
        }
    }

    /**
     * The monitor's round: copy the program's counters into the counters file; then, while healthy, check that the
     * program is still attached, and while failed, put it back when it can be.
     */
    private void refresh()
    {
        try
        {
            copyCounters();
        }
        catch (final BpfException | RuntimeException ex)
        {
            watch.fail("reading its maps failed: " + ex.getMessage(), false);
            return;
        }
        leftovers.retry(System.nanoTime());
        watch.check();
    }

    void removeLater(final XdpJob job)
    {
        leftovers.add(job);
    }

    /** @return the ids of released jobs whose entries are still in the job table. */
    List<Integer> leftoverJobIds()
    {
        return leftovers.jobIds();
    }

    private void copyCounters() throws BpfException
    {
        final long[] stats = program.stats();
        for (int index = 0; index < stats.length; index++)
        {
            if (counters[index] != null)
            {
                counters[index].setRelease(stats[index]);
            }
        }
        lastStats = stats;
    }

    public String name()
    {
        return NAME;
    }

    public BackendCapabilities capabilities()
    {
        return new BackendCapabilities(BackendCapabilities.typeSet(ElementType.INT32, ElementType.FLOAT32), 1, maxLanes,
            XdpLayout.MAX_RANKS, 2L * ranges.capacity(), maxLanes, true, true);
    }

    public String refusal(final JobSpec spec)
    {
        final String failed = watch.health();
        if (failed != null)
        {
            return failed;
        }
        if (ranges.largestFree() < spec.slots())
        {
            return "only " + ranges.largestFree() + " contiguous of " + ranges.capacity() + " slots free, s=" + spec.slots();
        }
        return null;
    }

    public BackendJob reserve(final JobSpec spec, final int jobId) throws BackendException
    {
        final String failure = watch.health();
        if (failure != null)
        {
            throw new BackendException(failure);   // failed since refusal() was asked
        }
        final int base = ranges.allocate(spec.slots());
        if (base < 0)
        {
            throw new BackendException("only " + ranges.largestFree() + " contiguous slots free, s=" + spec.slots());
        }
        return new XdpJob(this, jobId, base, spec.slots());
    }

    public String health()
    {
        return watch.health();
    }

    public String describe()
    {
        final long[] stats = lastStats;
        return "xdp on " + interfaceName + " (native mode, program id " + attachment.programId() + ", k up to " + maxLanes + "), " + ranges.freeTotal() + "/" + ranges.capacity() + " slots free; updates=" +
            stats[XdpLayout.STAT_UPDATES] + " absorbed_in_kernel=" + stats[XdpLayout.STAT_ABSORBED] + " slots_completed=" +
            stats[XdpLayout.STAT_COMPLETED] + " results_multicast=" + stats[XdpLayout.STAT_RESULTS_TX] + " results_passed_up=" +
            stats[XdpLayout.STAT_RESULTS_PASSED] + " passed_to_kernel=" + stats[XdpLayout.STAT_PASSED] + " probes=" +
            stats[XdpLayout.STAT_PROBES] + " retransmissions_served=" + stats[XdpLayout.STAT_SHADOW_RESULTS] + " nacks=" +
            stats[XdpLayout.STAT_NACKS] + " pendings=" + stats[XdpLayout.STAT_PENDINGS] + " tail_grow_failed=" + stats[XdpLayout.STAT_TAIL_FAILED] + " multi_buffer_packets=" +
            stats[XdpLayout.STAT_MULTI_BUFFER] + watch.describe() + leftovers.describe();
    }

    /**
     * The interface and the XDP program on it, as {@link AttachmentWatch} asks about them: the kernel's own answers.
     */
    private record AttachedInterface(String name, XdpAttachment attachment, int programFd) implements AttachmentWatch.Kernel
    {
        public boolean interfaceExists() throws BpfException
        {
            return Libbpf.interfaceExists(name);
        }

        public int mtu() throws BackendException
        {
            return readMtu(name);
        }

        public Optional<XdpAttachment.AttachedProgram> attachedProgram() throws BpfException
        {
            return XdpAttachment.query(name);
        }

        public void reattach() throws BpfException
        {
            attachment.reattach(programFd);
        }

        public boolean released()
        {
            return attachment.isDetached();
        }
    }

    void jobInstalled()
    {
        installedJobs.incrementAndGet();
    }

    void jobRemoved()
    {
        installedJobs.decrementAndGet();
    }

    XdpProgram program()
    {
        return program;
    }

    SlotRanges ranges()
    {
        return ranges;
    }

    BackendEnvironment environment()
    {
        return environment;
    }

    public void close()
    {
        monitor.shutdownNow();
        try
        {
            monitor.awaitTermination(1, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        try
        {
            copyCounters();
        }
        catch (final BpfException | RuntimeException ex)
        {
            environment.log().accept("xdp: reading the program's counters at close failed: " + ex.getMessage());
        }
        attachment.close();
        environment.log().accept("xdp: detached from " + interfaceName + "; " + describe());
        program.close();
    }
}
