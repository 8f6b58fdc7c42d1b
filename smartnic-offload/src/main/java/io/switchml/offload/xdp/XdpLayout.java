package io.switchml.offload.xdp;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Byte layouts of the XDP aggregator's maps, mirroring {@code src/main/bpf/switchml_xdp.h} field by field (the header
 * is the spec; {@code XdpLayoutTest} checks the sizes against the loaded object's maps and the drop-reason indices
 * against {@link io.switchml.protocol.DropReason}). Values are in the machine's byte order, as the kernel stores
 * them; addresses and ports are in network order, as they appear in packets.
 */
public final class XdpLayout
{
    /** Largest k the program can be loaded for (SML_MAX_LANES): 36 blocks, k = 2287 at MTU 9216. */
    public static final int MAX_LANES = 2304;
    /** Lanes are aggregated in whole blocks of this many (SML_LANE_BLOCK). */
    public static final int LANE_BLOCK = 64;
    /** Bytes of a UDP datagram's IPv4 and UDP headers plus the SwitchML header: k lanes take MTU - 68 bytes. */
    public static final int FRAME_OVERHEAD_BYTES = 20 + 8 + 40;
    /** Largest world size: one 64-bit seen bitmap per slot version. */
    public static final int MAX_RANKS = 64;
    /** Data ports (shards) the program serves. */
    public static final int MAX_SHARDS = 4;
    /** Entries of the job table. */
    public static final int MAX_JOBS = 1024;

    public static final int JOB_FLAG_MAC = 0x1;
    public static final int JOB_FLAG_MULTICAST = 0x2;

    public static final String PROGRAM_NAME = "switchml_xdp";
    public static final String CONFIG_MAP = "sml_config";
    public static final String JOBS_MAP = "sml_jobs";
    public static final String SLOTS_MAP = "sml_slots";
    public static final String STATS_MAP = "sml_stats";
    public static final String LANES_MAP = "sml_lanes";
    /** The program's .rodata: {@code const volatile __u32 sml_max_blocks} at offset 0 and nothing else. */
    public static final int RODATA_MAX_BLOCKS_OFFSET = 0;
    public static final int RODATA_SIZE = 4;

    /** struct sml_config. */
    public static final int CONFIG_SIZE = 16;
    public static final int CONFIG_DATA_PORT_OFFSET = 0;
    public static final int CONFIG_SHARD_COUNT_OFFSET = 8;
    public static final int CONFIG_MULTICAST_TTL_OFFSET = 12;

    /** struct sml_job. */
    public static final int JOB_SIZE = 840;
    public static final int JOB_WORLD_OFFSET = 0;
    public static final int JOB_LANES_OFFSET = 4;
    public static final int JOB_SLOTS_OFFSET = 8;
    public static final int JOB_SLOT_BASE_OFFSET = 12;
    public static final int JOB_FLAGS_OFFSET = 16;
    public static final int JOB_ELEM_TYPE_OFFSET = 20;
    public static final int JOB_K0_OFFSET = 24;
    public static final int JOB_K1_OFFSET = 32;
    public static final int JOB_GROUP_ADDR_OFFSET = 40;
    public static final int JOB_GROUP_PORT_OFFSET = 44;
    public static final int JOB_MEMBER_ADDR_OFFSET = 52;
    public static final int JOB_MEMBER_PORT_OFFSET = 308;
    public static final int JOB_VIOLATION_RANK_OFFSET = 820;
    public static final int JOB_VIOLATION_SLOT_OFFSET = 824;
    public static final int JOB_VIOLATION_COUNT_OFFSET = 828;
    public static final int JOB_VIOLATION_SEQ_OFFSET = 832;

    /** struct sml_cell (one pool version of one slot, without its lanes, which are in sml_lanes). */
    public static final int CELL_SIZE = 40;
    public static final int CELL_SEEN_OFFSET = 0;
    public static final int CELL_CHUNK_SEQ_OFFSET = 8;
    public static final int CELL_FIRST_NS_OFFSET = 16;
    public static final int CELL_COUNT_OFFSET = 24;

    /** struct sml_slot: a lock and both pool versions. */
    public static final int SLOT_SIZE = 88;
    public static final int SLOT_CELL_OFFSET = 8;

    /** sml_stats indices: drops by DropReason ordinal below 32, events above. */
    public static final int STAT_DROP_BASE = 0;
    public static final int STAT_PACKETS = 32;
    public static final int STAT_PASSED = 33;
    public static final int STAT_UPDATES = 34;
    public static final int STAT_ABSORBED = 35;
    public static final int STAT_COMPLETED = 36;
    public static final int STAT_RESULTS_TX = 37;
    public static final int STAT_RESULTS_PASSED = 38;
    public static final int STAT_SHADOW_RESULTS = 39;
    public static final int STAT_NACKS = 40;
    public static final int STAT_PROBES = 41;
    public static final int STAT_DUPLICATES = 42;
    public static final int STAT_STALE = 43;
    public static final int STAT_TAIL_FAILED = 44;
    public static final int STAT_MULTI_BUFFER = 45;
    public static final int STAT_PENDINGS = 46;
    public static final int STAT_COUNT = 48;

    /** Names of the event counters, by index, as they appear in the counters file ("xdp: " + name). */
    public static final String[] EVENT_NAMES = new String[STAT_COUNT];

    static
    {
        EVENT_NAMES[STAT_PACKETS] = "packets";
        EVENT_NAMES[STAT_PASSED] = "passed_to_kernel";
        EVENT_NAMES[STAT_UPDATES] = "updates";
        EVENT_NAMES[STAT_ABSORBED] = "absorbed_in_kernel";
        EVENT_NAMES[STAT_COMPLETED] = "slots_completed";
        EVENT_NAMES[STAT_RESULTS_TX] = "results_multicast";
        EVENT_NAMES[STAT_RESULTS_PASSED] = "results_passed_up";
        EVENT_NAMES[STAT_SHADOW_RESULTS] = "retransmissions_served";
        EVENT_NAMES[STAT_NACKS] = "nacks_sent";
        EVENT_NAMES[STAT_PROBES] = "probes";
        EVENT_NAMES[STAT_DUPLICATES] = "duplicates";
        EVENT_NAMES[STAT_STALE] = "stale_updates";
        EVENT_NAMES[STAT_TAIL_FAILED] = "tail_grow_failed";
        EVENT_NAMES[STAT_MULTI_BUFFER] = "multi_buffer_packets";
        EVENT_NAMES[STAT_PENDINGS] = "pendings_sent";
    }

    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
    static final ValueLayout.OfShort SHORT_BE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private XdpLayout()
    {
    }

    /**
     * @return blocks of {@link #LANE_BLOCK} lanes that hold k lanes.
     */
    public static int blocks(final int lanes)
    {
        return (lanes + LANE_BLOCK - 1) / LANE_BLOCK;
    }

    /**
     * @return the value size of sml_lanes for a program loaded for k up to maxLanes: whole blocks of int32 lanes.
     */
    public static int lanesValueSize(final int maxLanes)
    {
        return 4 * LANE_BLOCK * blocks(maxLanes);
    }

    /**
     * @return the largest k whose update fits one IPv4 packet of the given MTU, capped at {@link #MAX_LANES}.
     */
    public static int lanesForMtu(final int mtu)
    {
        return Math.max(0, Math.min(MAX_LANES, (mtu - FRAME_OVERHEAD_BYTES) / 4));
    }

    /**
     * Write struct sml_config.
     *
     * @param dataPorts    each shard's UDP port, host order.
     * @param multicastTtl IP TTL of multicast results.
     */
    public static void writeConfig(final MemorySegment config, final int[] dataPorts, final int multicastTtl)
    {
        config.fill((byte)0);
        for (int shard = 0; shard < dataPorts.length; shard++)
        {
            config.set(SHORT_BE, CONFIG_DATA_PORT_OFFSET + 2L * shard, (short)dataPorts[shard]);
        }
        config.set(INT, CONFIG_SHARD_COUNT_OFFSET, dataPorts.length);
        config.set(INT, CONFIG_MULTICAST_TTL_OFFSET, multicastTtl);
    }

    /**
     * Write struct sml_job from a job image; the violation fields start at zero.
     */
    public static void writeJob(final MemorySegment value, final XdpJobImage job)
    {
        value.fill((byte)0);
        value.set(INT, JOB_WORLD_OFFSET, job.worldSize());
        value.set(INT, JOB_LANES_OFFSET, job.lanes());
        value.set(INT, JOB_SLOTS_OFFSET, job.slots());
        value.set(INT, JOB_SLOT_BASE_OFFSET, job.slotBase());
        value.set(INT, JOB_FLAGS_OFFSET, (job.macEnabled() ? JOB_FLAG_MAC : 0) | (job.groupAddress() != 0 ? JOB_FLAG_MULTICAST : 0));
        value.set(INT, JOB_ELEM_TYPE_OFFSET, job.elementType());
        value.set(LONG, JOB_K0_OFFSET, job.macK0());
        value.set(LONG, JOB_K1_OFFSET, job.macK1());
        value.set(INT_BE, JOB_GROUP_ADDR_OFFSET, job.groupAddress());
        for (int shard = 0; shard < job.groupPorts().length; shard++)
        {
            value.set(SHORT_BE, JOB_GROUP_PORT_OFFSET + 2L * shard, (short)job.groupPorts()[shard]);
        }
        for (int rank = 0; rank < job.worldSize(); rank++)
        {
            value.set(INT_BE, JOB_MEMBER_ADDR_OFFSET + 4L * rank, job.memberAddresses()[rank]);
            for (int shard = 0; shard < job.memberPorts()[rank].length; shard++)
            {
                value.set(SHORT_BE, JOB_MEMBER_PORT_OFFSET + 2L * (rank * MAX_SHARDS + shard), (short)job.memberPorts()[rank][shard]);
            }
        }
    }

    /**
     * Write an idle struct sml_slot: both versions empty, chunk -1 (no round yet), as a new SlotPool starts.
     */
    public static void writeIdleSlot(final MemorySegment slot)
    {
        slot.fill((byte)0);
        slot.set(LONG, SLOT_CELL_OFFSET + CELL_CHUNK_SEQ_OFFSET, -1L);
        slot.set(LONG, SLOT_CELL_OFFSET + CELL_SIZE + CELL_CHUNK_SEQ_OFFSET, -1L);
    }

    static long cellOffset(final int version)
    {
        return SLOT_CELL_OFFSET + (long)version * CELL_SIZE;
    }

    public static long cellSeen(final MemorySegment slot, final int version)
    {
        return slot.get(LONG, cellOffset(version) + CELL_SEEN_OFFSET);
    }

    public static long cellChunkSequence(final MemorySegment slot, final int version)
    {
        return slot.get(LONG, cellOffset(version) + CELL_CHUNK_SEQ_OFFSET);
    }

    public static long cellFirstArrivalNs(final MemorySegment slot, final int version)
    {
        return slot.get(LONG, cellOffset(version) + CELL_FIRST_NS_OFFSET);
    }

    public static int cellCount(final MemorySegment slot, final int version)
    {
        return slot.get(INT, cellOffset(version) + CELL_COUNT_OFFSET);
    }
}
