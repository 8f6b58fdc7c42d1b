package io.switchml.offload.tofino.model;

import java.util.ArrayList;
import java.util.List;

/**
 * The one name set of {@code tofino-p4/p4/switchml.p4}, its P4Info ({@code switchml.p4info.txtpb}) and the Java
 * pipeline model: tables, match fields, actions, parameters and registers with their widths and sizes.
 * P4NamesTest checks the three against each other.
 */
public final class P4Names
{
    /** Slots of the register arrays, shared by every job on the switch (each slot holds both pool versions). */
    public static final int SLOTS = 2048;
    /** Slot versions (cells): index (slot &lt;&lt; 1) | version. */
    public static final int CELLS = 2 * SLOTS;
    /** Lanes the pipeline aggregates per pass. */
    public static final int LANES_PER_PASS = 64;
    /** Passes of the largest job (k = 256): the first and three recirculations. */
    public static final int MAX_PASSES = 4;
    /**
     * Lane registers: each holds a pair of lanes (one stateful ALU updates both halves); the P4 program declares
     * them as the register {@code values} of 32 instances {@code lanes_00..lanes_31} of its LanePair control.
     */
    public static final int LANE_PAIRS = LANES_PER_PASS / 2;
    /**
     * The parser's value set of the aggregator's UDP data ports: a packet to one of them is parsed as SwitchML. The
     * control plane writes it when its backend starts; a switch starts with it empty.
     */
    public static final String DATA_PORTS = "SwitchMLIngressParser.sml_ports";
    /** The value set's one field (exact, 16 bits). */
    public static final String DATA_PORTS_FIELD = "hdr.udp.dst_port";
    /** Members the value set holds. */
    public static final int DATA_PORTS_SIZE = 4;
    /** Ranks per job: the seen bitmap of a version is one 32-bit register half. */
    public static final int MAX_WORLD = 32;

    public static final String JOB_TABLE = "SwitchMLIngress.job_table";
    public static final int JOB_TABLE_SIZE = 1024;
    public static final String JOB_ID = "hdr.sml.job_id";
    public static final String SET_JOB = "SwitchMLIngress.set_job";
    /** job_table's default: a job the switch does not hold is not its business, the packet goes on unchanged. */
    public static final String FORWARD_UNKNOWN_JOB = "SwitchMLIngress.forward_unknown_job";

    public static final String RANK_SOURCE = "SwitchMLIngress.rank_source";
    public static final int RANK_SOURCE_SIZE = 32768;
    public static final String WORKER_RANK = "hdr.sml.worker_rank";
    public static final String IPV4_SRC = "hdr.ipv4.src_addr";
    public static final String UDP_SRC = "hdr.udp.src_port";
    public static final String ALLOW_RANK = "SwitchMLIngress.allow_rank";
    public static final String DROP_FORGED = "SwitchMLIngress.drop_forged";

    public static final String REPLICA_DEST = "SwitchMLEgress.replica_dest";
    public static final int REPLICA_DEST_SIZE = 32768;
    public static final String EGRESS_RID = "eg_intr_md.egress_rid";
    public static final String SET_DEST = "SwitchMLEgress.set_dest";
    public static final String DROP_NO_DEST = "SwitchMLEgress.drop_no_dest";

    public static final String SEEN = "SwitchMLIngress.seen";
    public static final String COUNT = "SwitchMLIngress.count";
    public static final String ELEMENTS = "SwitchMLIngress.elements";
    public static final String EXPONENT_MAX = "SwitchMLIngress.exponent_max";
    public static final String CHECK_MAX = "SwitchMLIngress.check_max";
    public static final String LANES_PREFIX = "SwitchMLIngress.lanes_";

    /** A table: name, size, key fields (name, bit width), actions (the first is the one entries use). */
    public record Table(String name, int size, List<Field> keys, List<String> actions)
    {
    }

    /** A match field or action parameter. */
    public record Field(String name, int bitwidth)
    {
    }

    /** An action and its parameters. */
    public record Action(String name, List<Field> params)
    {
    }

    /** A register array: name, cells, bit width of one cell (a pair register has two such halves). */
    public record Register(String name, int size, int bitwidth, boolean pair)
    {
    }

    public static final List<Table> TABLES = List.of(
        new Table(JOB_TABLE, JOB_TABLE_SIZE, List.of(new Field(JOB_ID, 32)), List.of(SET_JOB, FORWARD_UNKNOWN_JOB)),
        new Table(RANK_SOURCE, RANK_SOURCE_SIZE,
            List.of(new Field(JOB_ID, 32), new Field(WORKER_RANK, 16), new Field(IPV4_SRC, 32), new Field(UDP_SRC, 16)),
            List.of(ALLOW_RANK, DROP_FORGED)),
        new Table(REPLICA_DEST, REPLICA_DEST_SIZE, List.of(new Field(EGRESS_RID, 16)), List.of(SET_DEST, DROP_NO_DEST)));

    public static final List<Action> ACTIONS = List.of(
        new Action(SET_JOB, List.of(new Field("pool_base", 16), new Field("pool_size", 16), new Field("world_size", 8),
            new Field("elem_type", 8), new Field("lanes", 16), new Field("mcast_grp", 16))),
        new Action(FORWARD_UNKNOWN_JOB, List.of()),
        new Action(ALLOW_RANK, List.of()),
        new Action(DROP_FORGED, List.of()),
        new Action(SET_DEST, List.of(new Field("dst_addr", 32), new Field("dst_port", 16))),
        new Action(DROP_NO_DEST, List.of()));

    public static final List<Register> REGISTERS = registers();

    private P4Names()
    {
    }

    /**
     * @return the name of lane pair register i (lanes 2i and 2i+1 of a pass).
     */
    public static String lanes(final int pair)
    {
        return LANES_PREFIX + (pair < 10 ? "0" : "") + pair + ".values";
    }

    private static List<Register> registers()
    {
        final List<Register> registers = new ArrayList<>(List.of(
            new Register(SEEN, SLOTS, 32, true),
            new Register(COUNT, CELLS, 32, false),
            new Register(ELEMENTS, CELLS, 32, false),
            new Register(EXPONENT_MAX, CELLS, 32, false),
            new Register(CHECK_MAX, CELLS, 32, true)));
        for (int pair = 0; pair < LANE_PAIRS; pair++)
        {
            registers.add(new Register(lanes(pair), CELLS * MAX_PASSES, 32, true));
        }
        return List.copyOf(registers);
    }

    /**
     * @return the action of that name.
     */
    public static Action action(final String name)
    {
        return ACTIONS.stream().filter(a -> a.name().equals(name)).findFirst()
            .orElseThrow(() -> new IllegalArgumentException("no action " + name));
    }
}
