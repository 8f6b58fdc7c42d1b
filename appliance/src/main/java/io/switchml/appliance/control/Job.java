package io.switchml.appliance.control;

import io.switchml.appliance.engine.SlotPool;
import io.switchml.protocol.ElementType;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * One aggregation job: its parameters, its members, and its slot pool. Membership fields are
 * guarded by the {@link JobRegistry} lock; the data plane reads {@link #members} only after the
 * job was published as active, and owns {@link #pool}.
 */
public final class Job
{
    enum State
    {
        JOINING, ACTIVE, ENDED
    }

    final int jobId;
    final int worldSize;
    final byte elementType;
    final int lanes;
    final int slots;
    final long memoryBytes;
    final long joinDeadlineMs;
    final InetSocketAddress[] members;
    final ControlConnection[] connections;
    final boolean[] left;
    final SlotPool pool;
    State state = State.JOINING;
    int joined;
    String endReason;

    Job(final int jobId, final int worldSize, final byte elementType, final int lanes, final int slots,
        final long joinDeadlineMs)
    {
        this.jobId = jobId;
        this.worldSize = worldSize;
        this.elementType = elementType;
        this.lanes = lanes;
        this.slots = slots;
        this.memoryBytes = SlotPool.memoryBytes(slots, lanes);
        this.joinDeadlineMs = joinDeadlineMs;
        this.members = new InetSocketAddress[worldSize];
        this.connections = new ControlConnection[worldSize];
        this.left = new boolean[worldSize];
        this.pool = new SlotPool(worldSize, slots, lanes);
    }

    public int jobId()
    {
        return jobId;
    }

    public int worldSize()
    {
        return worldSize;
    }

    public byte elementType()
    {
        return elementType;
    }

    public int lanes()
    {
        return lanes;
    }

    public int slots()
    {
        return slots;
    }

    public SlotPool pool()
    {
        return pool;
    }

    /**
     * @param rank of a member.
     * @return the data address the member joined with.
     */
    public InetSocketAddress member(final int rank)
    {
        return members[rank];
    }

    List<Integer> missingRanks()
    {
        final List<Integer> missing = new ArrayList<>();
        for (int rank = 0; rank < worldSize; rank++)
        {
            if (connections[rank] == null)
            {
                missing.add(rank);
            }
        }
        return missing;
    }

    String describe()
    {
        return "job=" + jobId + " state=" + state.name().toLowerCase(java.util.Locale.ROOT) + " world=" + worldSize +
            " joined=" + joined + " type=" + ElementType.name(elementType) + " k=" + lanes + " s=" + slots +
            " memoryBytes=" + memoryBytes;
    }
}
