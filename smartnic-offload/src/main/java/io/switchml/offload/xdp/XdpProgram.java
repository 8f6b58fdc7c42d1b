package io.switchml.offload.xdp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

/**
 * The loaded aggregator program ({@code bpf/switchml_xdp.o}) and its maps, seen from Java: configuration, the job
 * table, the slot array and the per-CPU counters, laid out by {@link XdpLayout}. Not attached to any interface
 * (see {@link XdpAttachment}); tests run it with BPF_PROG_TEST_RUN. Called from control threads only; one lock
 * serializes the scratch buffers.
 */
public final class XdpProgram implements AutoCloseable
{
    /** Classpath resource of the compiled program. */
    public static final String RESOURCE = "/bpf/switchml_xdp.o";

    /**
     * The first ordering violation the program recorded for a job.
     */
    public record Violation(int rank, int slot, long chunkSequence, int elementCount)
    {
    }

    private final BpfObject object;
    private final BpfMap config;
    private final BpfMap jobs;
    private final BpfMap slots;
    private final BpfMap stats;
    private final int programFd;
    private final int slotEntries;
    private final int maxLanes;
    private final long verifiedInstructions;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
    private final MemorySegment configValue = arena.allocate(XdpLayout.CONFIG_SIZE, 8);
    private final MemorySegment jobValue = arena.allocate(XdpLayout.JOB_SIZE, 8);
    private final MemorySegment slotValue = arena.allocate(XdpLayout.SLOT_SIZE, 8);

    private XdpProgram(final BpfObject object, final int slotEntries, final int maxLanes) throws BpfException
    {
        this.object = object;
        this.slotEntries = slotEntries;
        this.maxLanes = maxLanes;
        this.verifiedInstructions = object.verifiedInstructions(XdpLayout.PROGRAM_NAME);
        this.config = object.map(XdpLayout.CONFIG_MAP);
        this.jobs = object.map(XdpLayout.JOBS_MAP);
        this.slots = object.map(XdpLayout.SLOTS_MAP);
        this.stats = object.map(XdpLayout.STATS_MAP);
        this.programFd = object.programFd(XdpLayout.PROGRAM_NAME);
    }

    /**
     * Open and load the program shipped in this module's jar.
     *
     * @param slotEntries entries of the slot array (each holds both pool versions of one slot).
     * @param maxLanes    the largest k it will take, 1 to {@link XdpLayout#MAX_LANES}: sizes the lanes map (whole
     *                    blocks of 64 lanes per slot version) and bounds the program's lane loops.
     * @return the loaded program.
     * @throws BpfException naming the cause; a verifier rejection carries the verifier log's last lines.
     */
    public static XdpProgram load(final int slotEntries, final int maxLanes) throws BpfException
    {
        checkMaxLanes(maxLanes);
        return load(BpfObject.openResource(RESOURCE), slotEntries, maxLanes);
    }

    /**
     * Open and load a compiled program from a file.
     */
    public static XdpProgram load(final Path objectFile, final int slotEntries, final int maxLanes) throws BpfException
    {
        checkMaxLanes(maxLanes);
        return load(BpfObject.open(objectFile), slotEntries, maxLanes);
    }

    private static void checkMaxLanes(final int maxLanes)
    {
        if (maxLanes < 1 || maxLanes > XdpLayout.MAX_LANES)
        {
            throw new IllegalArgumentException("the XDP program takes k up to 1.." + XdpLayout.MAX_LANES + ": " + maxLanes);
        }
    }

    private static XdpProgram load(final BpfObject object, final int slotEntries, final int maxLanes) throws BpfException
    {
        try
        {
            object.setMaxEntries(XdpLayout.SLOTS_MAP, slotEntries);
            object.setMaxEntries(XdpLayout.LANES_MAP, 2 * slotEntries);
            object.setValueSize(XdpLayout.LANES_MAP, XdpLayout.lanesValueSize(maxLanes));
            object.setReadOnlyInt(XdpLayout.RODATA_MAX_BLOCKS_OFFSET, XdpLayout.blocks(maxLanes), XdpLayout.RODATA_SIZE);
            object.load(XdpLayout.PROGRAM_NAME);
            return new XdpProgram(object, slotEntries, maxLanes);
        }
        catch (final BpfException | RuntimeException ex)
        {
            object.close();
            throw ex;
        }
    }

    public int programFd()
    {
        return programFd;
    }

    /** @return the job table's map fd (tests freeze it to make the kernel refuse a removal). */
    int jobTableFd()
    {
        return jobs.fd();
    }

    public int slotEntries()
    {
        return slotEntries;
    }

    /**
     * @return the largest k this program was loaded for.
     */
    public int maxLanes()
    {
        return maxLanes;
    }

    /**
     * @return instructions the verifier processed to accept the program (its limit is 1 000 000), or -1 if unknown.
     */
    public long verifiedInstructions()
    {
        return verifiedInstructions;
    }

    /**
     * @return kernel memory of the slot and lanes arrays, in bytes.
     */
    public long slotMemoryBytes()
    {
        return slotEntries * ((long)XdpLayout.SLOT_SIZE + 2L * XdpLayout.lanesValueSize(maxLanes));
    }

    /**
     * Write the data ports the program serves (one per shard) and the TTL of multicast results.
     */
    public synchronized void configure(final int[] dataPorts, final int multicastTtl) throws BpfException
    {
        if (dataPorts.length < 1 || dataPorts.length > XdpLayout.MAX_SHARDS)
        {
            throw new IllegalArgumentException("the XDP program serves 1 to " + XdpLayout.MAX_SHARDS + " shards: " + dataPorts.length);
        }
        XdpLayout.writeConfig(configValue, dataPorts, multicastTtl);
        key.set(ValueLayout.JAVA_INT, 0, 0);
        config.update(key, configValue, Libbpf.BPF_ANY);
    }

    /**
     * Reset the job's slots to idle, then add the job to the job table: from then on the program aggregates its
     * packets.
     */
    public synchronized void installJob(final XdpJobImage job) throws BpfException
    {
        if (job.slotBase() < 0 || (long)job.slotBase() + job.slots() > slotEntries)
        {
            throw new IllegalArgumentException("slots " + job.slotBase() + ".." + (job.slotBase() + job.slots()) +
                " outside the slot array of " + slotEntries);
        }
        if (job.lanes() < 1 || job.lanes() > maxLanes)
        {
            throw new IllegalArgumentException("k=" + job.lanes() + " outside 1.." + maxLanes + ", the k the program was loaded for");
        }
        XdpLayout.writeIdleSlot(slotValue);
        for (int slot = 0; slot < job.slots(); slot++)
        {
            key.set(ValueLayout.JAVA_INT, 0, job.slotBase() + slot);
            slots.update(key, slotValue, Libbpf.BPF_ANY);
        }
        XdpLayout.writeJob(jobValue, job);
        key.set(ValueLayout.JAVA_INT, 0, job.jobId());
        jobs.update(key, jobValue, Libbpf.BPF_ANY);
    }

    /**
     * Remove a job from the job table: its packets then pass to the kernel.
     *
     * @return whether it was there.
     */
    public synchronized boolean removeJob(final int jobId) throws BpfException
    {
        key.set(ValueLayout.JAVA_INT, 0, jobId);
        return jobs.delete(key);
    }

    /**
     * @return the first ordering violation recorded for a job, or null (also when the job is not installed).
     */
    public synchronized Violation violation(final int jobId) throws BpfException
    {
        key.set(ValueLayout.JAVA_INT, 0, jobId);
        if (!jobs.lookup(key, jobValue))
        {
            return null;
        }
        final int rankPlusOne = jobValue.get(XdpLayout.INT, XdpLayout.JOB_VIOLATION_RANK_OFFSET);
        if (rankPlusOne == 0)
        {
            return null;
        }
        return new Violation(rankPlusOne - 1, jobValue.get(XdpLayout.INT, XdpLayout.JOB_VIOLATION_SLOT_OFFSET),
            jobValue.get(XdpLayout.LONG, XdpLayout.JOB_VIOLATION_SEQ_OFFSET),
            jobValue.get(XdpLayout.INT, XdpLayout.JOB_VIOLATION_COUNT_OFFSET));
    }

    /**
     * Read one slot (both pool versions) under its lock into a caller's segment of {@link XdpLayout#SLOT_SIZE} bytes.
     */
    public synchronized void readSlot(final int index, final MemorySegment into) throws BpfException
    {
        key.set(ValueLayout.JAVA_INT, 0, index);
        slots.lookup(key, into, Libbpf.BPF_F_LOCK);
    }

    /**
     * @return every counter of sml_stats summed over the CPUs, indexed as in {@link XdpLayout}.
     */
    public synchronized long[] stats() throws BpfException
    {
        return stats.sumPerCpu(XdpLayout.STAT_COUNT);
    }

    /**
     * Run the program on one frame with BPF_PROG_TEST_RUN.
     */
    public BpfTestRun.Result testRun(final byte[] frame) throws BpfException
    {
        return BpfTestRun.run(programFd, frame);
    }

    public synchronized void close()
    {
        object.close();
        arena.close();
    }
}
