package io.switchml.appliance.transport;

import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.ShardCounters;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.security.PacketMacBatch;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The MACs of a receive batch's updates and probes, hashed {@link PacketMacBatch#LANES} at a time before the shard
 * processes the batch one datagram at a time: {@link ShardProcessor}'s MAC check then reads the verdict here instead
 * of hashing the packet alone. Datagrams are grouped by job and length in arrival order (a burst of one job's updates
 * is one run); anything else (too short, not an update or probe, an unknown job, MAC off) gets no verdict, and
 * neither does a datagram past {@link #CAPACITY}: the shard checks those as before. A verdict is used only for the
 * job whose key made it, so a job replaced between the two passes is checked again under its own key.
 * <p>
 * Used only once {@link PacketMacBatch#warm()}: until the lanes' code is compiled, a batch is faster hashed one packet
 * at a time. Owned by the shard's thread; nothing is allocated per batch.
 */
final class MacPrecheck
{
    /** Datagrams a batch holds at most. */
    static final int CAPACITY = 256;
    /** No verdict: check the MAC alone. */
    static final byte UNKNOWN = 0;
    static final byte VALID = 1;
    static final byte INVALID = 2;

    private final JobRegistry registry;
    private final ShardCounters counters;
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private final PacketMacBatch macs = new PacketMacBatch();
    private final UnsafeBuffer[] views = new UnsafeBuffer[CAPACITY];
    private final int[] lengths = new int[CAPACITY];
    private final byte[] verdicts = new byte[CAPACITY];
    private final Job[] jobs = new Job[CAPACITY];
    private final int[] run = new int[PacketMacBatch.LANES];
    private int count;

    MacPrecheck(final JobRegistry registry, final ShardCounters counters)
    {
        this.registry = registry;
        this.counters = counters;
        for (int i = 0; i < CAPACITY; i++)
        {
            views[i] = new UnsafeBuffer(0L, 0);
        }
    }

    /**
     * @return true when no more datagrams can be added.
     */
    boolean isFull()
    {
        return count == CAPACITY;
    }

    /**
     * @return datagrams added since the last {@link #clear()}.
     */
    int size()
    {
        return count;
    }

    /**
     * Add a received datagram; it must stay where it is until the batch is processed.
     *
     * @return its index for {@link #verdict}.
     */
    int add(final long address, final int length)
    {
        views[count].wrap(address, length);
        lengths[count] = length;
        verdicts[count] = UNKNOWN;
        jobs[count] = null;
        return count++;
    }

    /**
     * @param index of a datagram, as {@link #add} returned it.
     * @return a view of it, valid until {@link #clear()}.
     */
    UnsafeBuffer view(final int index)
    {
        return views[index];
    }

    /**
     * Forget the datagrams added.
     */
    void clear()
    {
        for (int i = 0; i < count; i++)
        {
            jobs[i] = null;
        }
        count = 0;
    }

    /**
     * Hash the MACs of the datagrams added that belong to a job with MAC on, a run of one job and length at a time.
     *
     * @return true when some were hashed in vector lanes.
     */
    boolean run()
    {
        if (!PacketMacBatch.warm())
        {
            return false;
        }
        boolean lanes = false;
        Job runJob = null;
        int runLength = 0;
        int runSize = 0;
        for (int i = 0; i < count; i++)
        {
            final int length = lengths[i];
            if (length < DataHeaderFlyweight.HEADER_LENGTH)
            {
                continue;
            }
            header.wrap(views[i], 0);
            final byte type = header.type();
            if (type != DataHeaderFlyweight.TYPE_UPDATE && type != DataHeaderFlyweight.TYPE_PROBE)
            {
                continue;
            }
            final Job job = registry.activeJob(header.jobId());
            if (job == null || !job.macEnabled() || !job.slotsInShards())
            {
                continue;
            }
            if (runSize > 0 && (job != runJob || length != runLength))
            {
                lanes |= check(runJob, runLength, runSize);
                runSize = 0;
            }
            runJob = job;
            runLength = length;
            run[runSize++] = i;
            if (runSize == PacketMacBatch.LANES)
            {
                lanes |= check(runJob, runLength, runSize);
                runSize = 0;
            }
        }
        if (runSize > 0)
        {
            lanes |= check(runJob, runLength, runSize);
        }
        return lanes;
    }

    /**
     * @param index of a datagram, as {@link #add} returned it.
     * @param job   the job the shard found for it.
     * @return {@link #VALID} or {@link #INVALID} when its MAC was checked under that job's key, else {@link #UNKNOWN}.
     */
    byte verdict(final int index, final Job job)
    {
        return index >= 0 && index < count && jobs[index] == job ? verdicts[index] : UNKNOWN;
    }

    private boolean check(final Job job, final int length, final int size)
    {
        for (int j = 0; j < size; j++)
        {
            macs.add(views[run[j]], 0);
        }
        final boolean lanes = macs.compute(job.macK0(), job.macK1(), length);
        if (lanes)
        {
            counters.onMacsInLanes(size);
        }
        for (int j = 0; j < size; j++)
        {
            final int i = run[j];
            verdicts[i] = macs.verified(j) ? VALID : INVALID;
            jobs[i] = job;
        }
        macs.clear();
        return lanes;
    }
}
