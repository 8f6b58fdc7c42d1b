package io.switchml.appliance.control;

import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.engine.SlotPool;
import io.switchml.appliance.telemetry.JobCounters;
import io.switchml.appliance.transport.AddressKey;
import io.switchml.protocol.ElementType;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One aggregation job: its parameters, its members, its keys, and one slot pool per data-plane
 * shard (global slot i lives in shard i mod S). Membership fields are guarded by the
 * {@link JobRegistry} lock; a shard reads {@link #member} only after the job was published as active,
 * and owns its own pool.
 */
public final class Job
{
    enum State
    {
        /** Waiting for its ranks. */
        JOINING,
        /** Every rank joined; its backend installs it, outside the registry's lock. */
        ACTIVATING,
        ACTIVE,
        ENDED
    }

    private static final long UNSET_KEY = Long.MIN_VALUE;

    final int jobId;
    final String tenant;
    final String name;
    final int worldSize;
    final byte elementType;
    final int lanes;
    final int slots;
    final int shardCount;
    final long slotTimeoutMs;
    final long joinDeadlineMs;
    final String token;
    final boolean macEnabled;
    final long macK0;
    final long macK1;
    final long memoryBytes;
    final InetSocketAddress[][] members;
    private final long[] memberKeys;
    final ControlConnection[] connections;
    final boolean[] left;
    /** The first rank that left (LEAVE), or -1: read by the shards' and backends' slot scans. */
    private volatile int firstLeftRank = -1;
    final SlotPool[] pools;
    final JobCounters counters;
    /** Whether its slots live in the appliance's shards: {@link io.switchml.appliance.backend.Backend#slotsInShards()}. */
    private final boolean slotsInShards;
    final String backendName;
    final BackendJob backendJob;
    private final ShardDataPath shardDataPath;
    final String fallback;
    final long createdMs = System.currentTimeMillis();
    State state = State.JOINING;
    int joined;
    String endReason;
    volatile boolean aborting;
    private volatile boolean resultsToMembers;
    boolean aborted;

    Job(final int jobId, final JobSpec spec, final int shardCount, final String token, final long macK0, final long macK1,
        final long joinDeadlineMs, final JobCounters counters, final String backendName, final boolean slotsInShards,
        final BackendJob backendJob, final String fallback)
    {
        this.slotsInShards = slotsInShards;
        this.counters = counters;
        this.backendName = backendName;
        this.backendJob = backendJob;
        this.shardDataPath = backendJob.shardDataPath();
        this.fallback = fallback;
        this.jobId = jobId;
        this.tenant = spec.tenant();
        this.name = spec.name();
        this.worldSize = spec.worldSize();
        this.elementType = spec.elementType();
        this.lanes = spec.lanes();
        this.slots = spec.slots();
        this.shardCount = shardCount;
        this.slotTimeoutMs = spec.slotTimeoutMs();
        this.joinDeadlineMs = joinDeadlineMs;
        this.token = token;
        this.macEnabled = spec.macEnabled();
        this.macK0 = macK0;
        this.macK1 = macK1;
        // an offloaded job's slots live in its backend, which accounts for them itself
        this.memoryBytes = slotsInShards ? memoryBytes(spec.slots(), spec.lanes()) : 0;
        this.members = new InetSocketAddress[worldSize][];
        this.memberKeys = new long[worldSize * shardCount];
        java.util.Arrays.fill(memberKeys, UNSET_KEY);
        this.connections = new ControlConnection[worldSize];
        this.left = new boolean[worldSize];
        this.pools = new SlotPool[shardCount];
        for (int shard = 0; shard < shardCount; shard++)
        {
            final int localSlots = (slots - shard + shardCount - 1) / shardCount;
            pools[shard] = localSlots > 0 && slotsInShards ? new SlotPool(worldSize, localSlots, lanes, shardCount) : null;
        }
    }

    JobSpec spec()
    {
        return new JobSpec(tenant, name, worldSize, elementType, lanes, slots, macEnabled, slotTimeoutMs, 0);
    }

    static long memoryBytes(final int slots, final int lanes)
    {
        return SlotPool.memoryBytes(slots, lanes);
    }

    /**
     * @return true when this is the job's token (compared in constant time).
     */
    public boolean hasToken(final String candidate)
    {
        return candidate != null && java.security.MessageDigest.isEqual(
            candidate.getBytes(java.nio.charset.StandardCharsets.UTF_8), token.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    public int jobId()
    {
        return jobId;
    }

    public String tenant()
    {
        return tenant;
    }

    public String name()
    {
        return name;
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

    public boolean macEnabled()
    {
        return macEnabled;
    }

    public long macK0()
    {
        return macK0;
    }

    public long macK1()
    {
        return macK1;
    }

    /**
     * @return the job's counters, incremented by every shard.
     */
    public JobCounters counters()
    {
        return counters;
    }

    /**
     * @return the backend the job was placed on ("software", "xdp", ...).
     */
    public String backendName()
    {
        return backendName;
    }

    /**
     * @return the job's handle in its backend.
     */
    public BackendJob backendJob()
    {
        return backendJob;
    }

    /**
     * @return the backends passed over at placement with their reasons ("xdp: k=8192 exceeds 256"), or "".
     */
    public String fallback()
    {
        return fallback;
    }

    /**
     * @return the data path that the shards hand this job's datagrams to, or null (see
     * {@link BackendJob#shardDataPath()}).
     */
    public ShardDataPath shardDataPath()
    {
        return shardDataPath;
    }

    /**
     * @return whether a completed slot's result goes to each member even when the appliance multicasts results: set
     * for the start-up rehearsal's jobs ({@link StartupRehearsal}), whose group no one listens to.
     */
    public boolean resultsToMembers()
    {
        return resultsToMembers;
    }

    void resultsToMembers(final boolean resultsToMembers)
    {
        this.resultsToMembers = resultsToMembers;
    }

    /**
     * @return whether the job's slots are in the software shards (else a shard only relays its results).
     */
    public boolean slotsInShards()
    {
        return slotsInShards;
    }

    /**
     * @return the number of data-plane shards the job's slots and members' ports are spread over.
     */
    public int shardCount()
    {
        return shardCount;
    }

    public long slotTimeoutMs()
    {
        return slotTimeoutMs;
    }

    /**
     * @param shard data-plane shard.
     * @return that shard's share of the slots, or null when the job has fewer slots than shards.
     */
    public SlotPool pool(final int shard)
    {
        return pools[shard];
    }

    /**
     * @param rank  of a member.
     * @param shard data-plane shard.
     * @return the address the member sends to and receives from that shard with.
     */
    public InetSocketAddress member(final int rank, final int shard)
    {
        return members[rank][shard];
    }

    /**
     * The member's address as an {@link AddressKey}, for an allocation-free source check. Each entry is
     * computed once, on first use, by the one shard that reads it (entries of different shards are
     * distinct array elements), after the job was published as active, when the members no longer change.
     *
     * @param rank  of a member.
     * @param shard data-plane shard; only that shard's thread may call this.
     * @return the key of {@link #member(int, int)}, or {@link AddressKey#NONE} when it is not IPv4.
     */
    public long memberKey(final int rank, final int shard)
    {
        final int index = rank * shardCount + shard;
        long key = memberKeys[index];
        if (UNSET_KEY == key)
        {
            key = AddressKey.of(members[rank][shard]);
            memberKeys[index] = key;
        }
        return key;
    }

    /**
     * @return the first rank that left the job in an orderly way (LEAVE) while others stay, or -1. A slot that still
     * waits for it will never complete: the slot scans abort the job at once, naming it, instead of at the slot
     * timeout (a process group's can be 30 minutes).
     */
    public int firstLeftRank()
    {
        return firstLeftRank;
    }

    /**
     * Record a LEAVE, under the registry's lock.
     */
    void onLeft(final int rank)
    {
        left[rank] = true;
        if (firstLeftRank < 0)
        {
            firstLeftRank = rank;
        }
    }

    /**
     * The abort reason of a slot version that cannot complete, as every backend's slot scan gives it: it waits for a
     * rank that left, or it passed the slot timeout.
     *
     * @param slot             the slot's global index.
     * @param chunk            the chunk the slot version holds.
     * @param missingRanks     as "[0, 3]".
     * @param waitsForLeftRank whether it waits for {@link #firstLeftRank()} (else it timed out).
     */
    public String stuckSlotReason(
        final int slot, final int version, final long chunk, final String missingRanks, final boolean waitsForLeftRank)
    {
        final String cell = "slot " + slot + " version " + version + " (chunk " + chunk + ")";
        return waitsForLeftRank ?
            "rank " + firstLeftRank + " left the job (LEAVE: its process ended or closed its client) while " + cell +
                " still waits for it; missing ranks " + missingRanks + ": all ranks must make the same calls" :
            cell + " incomplete for more than " + slotTimeoutMs + " ms; missing ranks " + missingRanks;
    }

    /**
     * Set once a shard has reported the job for abort, so that it reports only once.
     */
    public boolean markAborting()
    {
        if (aborting)
        {
            return false;
        }
        aborting = true;
        return true;
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
        return "job=" + jobId + " name=" + name + " tenant=" + tenant + " state=" + state.name().toLowerCase(Locale.ROOT) +
            " world=" + worldSize + " joined=" + joined + " type=" + ElementType.name(elementType) + " k=" + lanes +
            " s=" + slots + " mac=" + (macEnabled ? "on" : "off") + " slotTimeoutMs=" + slotTimeoutMs +
            " memoryBytes=" + memoryBytes + " ageMs=" + (System.currentTimeMillis() - createdMs) + " backend=" + backendName +
            (fallback.isEmpty() ? "" : " fallback=" + fallback);
    }
}
