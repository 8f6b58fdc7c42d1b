package io.switchml.offload.xdp;

import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.control.Job;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * One job's slots in the XDP program: a range of the slot array reserved at CREATE, the job-table entry written
 * when every rank has joined, and the checks the software shard makes on its own thread made here by polling the
 * maps: the first ordering violation the program recorded, and slot versions partly filled for longer than the
 * job's slot timeout (by their first arrival time, bpf_ktime_get_ns, the same clock as System.nanoTime on Linux).
 */
final class XdpJob implements BackendJob, LeftoverEntries.Entry
{
    private final XdpBackend backend;
    private final int jobId;
    private final int slotBase;
    private final int slots;
    private final MemorySegment slot = Arena.ofAuto().allocate(XdpLayout.SLOT_SIZE, 8);
    private Job job;
    private long nextSlotScanNs;
    private boolean released;
    private boolean installed;

    XdpJob(final XdpBackend backend, final int jobId, final int slotBase, final int slots)
    {
        this.backend = backend;
        this.jobId = jobId;
        this.slotBase = slotBase;
        this.slots = slots;
    }

    public synchronized void activate(final Job job) throws BackendException
    {
        if (released || installed)
        {
            throw new BackendException("job " + jobId + " is " + (released ? "released" : "installed already"));
        }
        final String failure = backend.health();
        if (failure != null)
        {
            throw new BackendException(failure);   // its program is off the interface: the registry aborts the job
        }
        this.job = job;
        final int shards = backend.environment().dataPorts().length;
        final int world = job.worldSize();
        final int[] addresses = new int[world];
        final int[][] ports = new int[world][shards];
        for (int rank = 0; rank < world; rank++)
        {
            for (int shard = 0; shard < shards; shard++)
            {
                final InetSocketAddress member = job.member(rank, shard);
                if (!(member.getAddress() instanceof Inet4Address))
                {
                    throw new BackendException("rank " + rank + " joined from " + member + ", not IPv4: the XDP program parses IPv4 only");
                }
                addresses[rank] = ByteBuffer.wrap(member.getAddress().getAddress()).getInt();
                ports[rank][shard] = member.getPort();
            }
        }
        final int multicastBase = backend.environment().multicastBase();
        final XdpJobImage image = new XdpJobImage(jobId, world, job.lanes(), job.slots(), slotBase, job.elementType(),
            job.macEnabled(), job.macK0(), job.macK1(), multicastBase != 0 ? multicastBase + (jobId & 0xFFFF) : 0,
            backend.environment().multicastPorts(), addresses, ports);
        try
        {
            backend.program().installJob(image);
            installed = true;
            backend.jobInstalled();
        }
        catch (final BpfException | RuntimeException ex)
        {
            throw new BackendException("installing job " + jobId + " in the XDP maps failed: " + ex.getMessage(), ex);
        }
    }

    public synchronized String poll(final long nowNs)
    {
        if (job == null || released)
        {
            return null;
        }
        try
        {
            final XdpProgram.Violation violation = backend.program().violation(jobId);
            if (violation != null)
            {
                return "ordering violation: rank " + violation.rank() + " sent chunk " + violation.chunkSequence() + " (" +
                    violation.elementCount() + " elements) to slot " + violation.slot() + " that the other ranks use for a " +
                    "different chunk, element count or exponent; all ranks must submit the same sequence of tensors";
            }
            if (nowNs - nextSlotScanNs < 0)
            {
                return null;
            }
            nextSlotScanNs = nowNs + XdpBackend.POLL_SLOTS_INTERVAL_NS;
            final long deadlineNs = nowNs - job.slotTimeoutMs() * 1_000_000L;
            final int leftRank = job.firstLeftRank();
            for (int index = 0; index < slots; index++)
            {
                backend.program().readSlot(slotBase + index, slot);
                for (int version = 0; version < 2; version++)
                {
                    if (XdpLayout.cellCount(slot, version) == 0)
                    {
                        continue;
                    }
                    final long firstNs = XdpLayout.cellFirstArrivalNs(slot, version);
                    final long seen = XdpLayout.cellSeen(slot, version);
                    final boolean waitsForLeft = leftRank >= 0 && (seen & (1L << leftRank)) == 0;
                    if (waitsForLeft || (firstNs != 0 && firstNs - deadlineNs <= 0))
                    {
                        return job.stuckSlotReason(index, version, XdpLayout.cellChunkSequence(slot, version),
                            missing(seen, job.worldSize()).toString(), waitsForLeft);
                    }
                }
            }
            return null;
        }
        catch (final BpfException | RuntimeException ex)
        {
            return "reading job " + jobId + " from the XDP maps failed: " + ex.getMessage();
        }
    }

    private static List<Integer> missing(final long seen, final int world)
    {
        final List<Integer> missing = new ArrayList<>();
        for (int rank = 0; rank < world; rank++)
        {
            if ((seen & (1L << rank)) == 0)
            {
                missing.add(rank);
            }
        }
        return missing;
    }

    public synchronized void release()
    {
        if (released)
        {
            return;
        }
        released = true;
        if (!installed)
        {
            // never in the job table (a failed install writes no entry): nothing can aggregate into its slots
            backend.ranges().release(slotBase, slots);
            return;
        }
        backend.jobRemoved();
        final String failure = removeEntry();
        if (failure != null)
        {
            backend.environment().log().accept("xdp: removing job " + jobId + " from the program's job table failed: " +
                failure + " (its slots " + slotBase + ".." + (slotBase + slots - 1) + " stay reserved until a retry " +
                "removes it)");
            backend.removeLater(this);
        }
    }

    /**
     * Remove this released job's entry from the job table and, once it is gone, free its slot range: a later job must
     * not get slots that a stale entry still aggregates into.
     *
     * @return null when removed (or not there), else why not.
     */
    public String removeEntry()
    {
        try
        {
            backend.program().removeJob(jobId);
        }
        catch (final BpfException | RuntimeException ex)
        {
            return ex.getMessage();
        }
        backend.ranges().release(slotBase, slots);
        return null;
    }

    public int jobId()
    {
        return jobId;
    }
}
