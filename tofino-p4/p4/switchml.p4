/*
 * switchml.p4: SwitchML's Algorithm 3 (the switch's slot logic with two pool versions) for Tofino, in P4_16 on the
 * Tofino Native Architecture (TNA), on wire protocol v1 of this appliance (protocol/.../DataHeaderFlyweight.java).
 *
 * NOT COMPILED HERE: no bf-p4c (Intel / open-p4studio SDE) can be installed on our machines. The names, widths and
 * sizes below are checked against switchml.p4info.txtpb and the Java model (P4NamesTest); the logic is what the
 * model (tofino-p4/src/main/java/.../model/TofinoModel.java) executes and the differential test checks against
 * SlotPool. See README.md for the compile steps and the expected resources.
 *
 * One pass: parse Ethernet/IPv4/UDP to the aggregator's port and the 40-byte header at fixed offsets, then up to
 * 64 int32 lanes (a parser counter extracts the lanes the element count says); job_table (job id -> pool range,
 * world size, element type, k, multicast group); rank_source pins each rank to its source address and port (MAC is
 * off on Tofino); then the registers in stage order: seen (both versions' bitmaps in one pair), count (decides the
 * outcome), elements / exponent_max / check_max, and 32 lane-pair registers. Each RegisterAction has one output, so
 * reading the sums takes a second pass over the block (the "harvest"); k = 256 takes four blocks. Passes after the
 * first recirculate with a bridged header carrying the outcome. A completed slot is multicast to the job's group;
 * egress rewrites each copy's destination by its replication id. A retransmission into a completed slot (or a
 * probe for it) is answered by unicast from the shadow copy (the version's cells keep the completed round's sums
 * until its next round writes them), out of the port it came in on, its lanes made valid and its IPv4 and UDP lengths
 * set for them; a probe for an update the slot lacks gets a NACK, one for an update the slot holds while it waits for other workers a PENDING. A packet whose job is not in
 * job_table is not this program's: it goes on unchanged, as a packet that is not SwitchML does, to the appliance,
 * whose software shards serve the jobs placed on them. Every answer the program writes has UDP checksum 0 (none,
 * legal over IPv4); egress recomputes the IPv4 header checksum of every IPv4 packet (Checksum extern).
 */
#include <core.p4>
#include <tna.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IPPROTO_UDP = 17;
const bit<16> SML_MAGIC = 0x534D;
const bit<8>  SML_VERSION = 1;
const bit<8>  T_UPDATE = 1;
const bit<8>  T_RESULT = 2;
const bit<8>  T_PROBE = 3;
const bit<8>  T_NACK = 4;
const bit<8>  T_PENDING = 5;
const bit<8>  F_VERSION = 0x01;
const bit<8>  F_RETRANSMIT = 0x04;
const bit<8>  E_INT32 = 1;
const bit<8>  E_FLOAT32 = 2;

const int SLOTS = 2048;          /* P4Names.SLOTS: slots of all jobs together */
const int CELLS = 4096;          /* two versions per slot */
const int LANE_CELLS = 16384;    /* CELLS * 4 blocks of 64 lanes (k = 256) */
const int LANES_PER_PASS = 64;

typedef bit<11> slot_index_t;
typedef bit<12> cell_index_t;
typedef bit<14> lane_index_t;

/* outcomes of the first pass (TofinoModel.ABSORBED ...) */
const bit<3> O_ABSORBED = 0;
const bit<3> O_COMPLETED = 1;
const bit<3> O_SHADOW = 2;
const bit<3> O_DUPLICATE = 3;
const bit<3> O_PENDING = 4;
const bit<3> O_NACK = 5;

header ethernet_h { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_h {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification; bit<3> flags;
    bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum; bit<32> src_addr; bit<32> dst_addr;
}
header udp_h { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }

/* wire protocol v1: every field at a fixed offset */
header sml_h {
    bit<16> magic; bit<8> version; bit<8> type; bit<32> job_id; bit<16> worker_rank; bit<8> flags; bit<8> elem_type;
    bit<32> slot; bit<64> chunk; bit<16> count; bit<16> check; bit<16> scale; bit<16> lookahead; bit<64> mac;
}
header lane_h { bit<32> value; }

/* carried across recirculations: which pass this is, what the first pass decided, and the port the packet came in
 * on (after a recirculation ig_intr_md.ingress_port is the recirculation port); 56 bits, byte-aligned */
header bridge_h {
    bit<8> pass; bit<3> outcome; bit<1> first; bit<12> cell; bit<16> result_count; bit<7> pad; PortId_t ingress_port;
}

struct headers_t {
    bridge_h bridge;
    ethernet_h ethernet;
    ipv4_h ipv4;
    udp_h udp;
    sml_h sml;
    lane_h[64] lanes;
}

struct metadata_t {
    bit<16> pool_base; bit<16> pool_size; bit<8> world_size; bit<8> elem_type; bit<16> lanes; bit<16> mcast_grp;
    bit<32> rank_bit; bit<32> seen_before; bit<3> outcome; bit<1> first; cell_index_t cell; lane_index_t lane_index;
    bit<8> half; bit<1> aggregate; bit<16> block_lanes;
}

parser SwitchMLIngressParser(packet_in pkt, out headers_t hdr, out metadata_t md,
                             out ingress_intrinsic_metadata_t ig_intr_md) {
    ParserCounter() lanes_left;
    /* the aggregator's UDP data port(s), written by the control plane when its backend starts (ValueSetEntry) */
    value_set<bit<16>>(4) sml_ports;
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            /* the recirculation port of the pipe (68 on Tofino 1): the bridged header comes first */
            68: parse_bridge;
            default: parse_ethernet;
        }
    }
    state parse_bridge { pkt.extract(hdr.bridge); transition parse_ethernet; }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol, hdr.ipv4.ihl) { (IPPROTO_UDP, 5): parse_udp; default: accept; }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) { sml_ports: parse_sml; default: accept; }
    }
    state parse_sml {
        pkt.extract(hdr.sml);
        /* lanes of this pass: min(count - 64 * pass, 64); the bridged pass says which block (skip 256 B per block) */
        lanes_left.set(hdr.sml.count, 255, 0, 0, 0);
        transition select(hdr.bridge.isValid()) { true: skip_blocks; false: parse_lanes; }
    }
    state skip_blocks {
        transition select(hdr.bridge.pass) { 0: parse_lanes; 1: skip1; 2: skip2; default: skip3; }
    }
    state skip1 { pkt.advance(2048); lanes_left.decrement(64); transition parse_lanes; }
    state skip2 { pkt.advance(4096); lanes_left.decrement(128); transition parse_lanes; }
    state skip3 { pkt.advance(6144); lanes_left.decrement(192); transition parse_lanes; }
    state parse_lanes {
        transition select(lanes_left.is_zero()) { true: accept; false: parse_lane; }
    }
    state parse_lane {
        pkt.extract(hdr.lanes.next);
        lanes_left.decrement(1);
        transition select(hdr.lanes.lastIndex) { 63: accept; default: parse_lanes; }
    }
}

/* One lane pair: both lanes updated by one stateful ALU, one of them output (write on a round's first
 * contribution, add otherwise, plain read on a harvest pass). lane0 is the pair's first lane within the block. */
struct pair_t { bit<32> lo; bit<32> hi; }

control LanePair(inout lane_h l0, inout lane_h l1, in bit<16> lane0, in metadata_t md) {
    Register<pair_t, lane_index_t>(LANE_CELLS) values;
    RegisterAction<pair_t, lane_index_t, bit<32>>(values) write_read_lo = {
        void apply(inout pair_t v, out bit<32> rv) { v.lo = l0.value; v.hi = l1.value; rv = v.lo; }
    };
    RegisterAction<pair_t, lane_index_t, bit<32>>(values) add_read_lo = {
        void apply(inout pair_t v, out bit<32> rv) { v.lo = v.lo + l0.value; v.hi = v.hi + l1.value; rv = v.lo; }
    };
    RegisterAction<pair_t, lane_index_t, bit<32>>(values) read_lo = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.lo; }
    };
    RegisterAction<pair_t, lane_index_t, bit<32>>(values) read_hi = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.hi; }
    };
    apply {
        if (md.outcome == O_SHADOW) {
            /* the answer carries the result's lanes, which a probe (header only) lacks */
            if (lane0 < md.block_lanes) { l0.setValid(); }
            if (lane0 + 1 < md.block_lanes) { l1.setValid(); }
        }
        if (md.half == 1) {
            l1.value = read_hi.execute(md.lane_index);
        } else if (md.aggregate == 1 && md.first == 1) {
            l0.value = write_read_lo.execute(md.lane_index);
        } else if (md.aggregate == 1) {
            l0.value = add_read_lo.execute(md.lane_index);
        } else {
            l0.value = read_lo.execute(md.lane_index);
        }
    }
}

control SwitchMLIngress(inout headers_t hdr, inout metadata_t md,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action set_job(bit<16> pool_base, bit<16> pool_size, bit<8> world_size, bit<8> elem_type, bit<16> lanes,
                   bit<16> mcast_grp) {
        md.pool_base = pool_base; md.pool_size = pool_size; md.world_size = world_size; md.elem_type = elem_type;
        md.lanes = lanes; md.mcast_grp = mcast_grp;
    }
    /* not a job of this switch: the packet goes on unchanged (to the appliance, whose software shards may hold it) */
    action forward_unknown_job() { }
    table job_table {
        key = { hdr.sml.job_id : exact; }
        actions = { set_job; forward_unknown_job; }
        default_action = forward_unknown_job();
        size = 1024;
    }

    action allow_rank() { }
    action drop_forged() { ig_dprsr_md.drop_ctl = 1; }
    table rank_source {
        key = { hdr.sml.job_id : exact; hdr.sml.worker_rank : exact; hdr.ipv4.src_addr : exact; hdr.udp.src_port : exact; }
        actions = { allow_rank; drop_forged; }
        default_action = drop_forged();
        size = 32768;
    }

    /* seen: version 0's bitmap in lo, version 1's in hi; an update sets its bit in its version and clears it in the
     * other; outputs whether it was set */
    Register<pair_t, slot_index_t>(SLOTS) seen;
    RegisterAction<pair_t, slot_index_t, bit<32>>(seen) seen_update_v0 = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.lo & md.rank_bit; v.lo = v.lo | md.rank_bit; v.hi = v.hi & ~md.rank_bit; }
    };
    RegisterAction<pair_t, slot_index_t, bit<32>>(seen) seen_update_v1 = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.hi & md.rank_bit; v.hi = v.hi | md.rank_bit; v.lo = v.lo & ~md.rank_bit; }
    };
    RegisterAction<pair_t, slot_index_t, bit<32>>(seen) seen_read_v0 = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.lo & md.rank_bit; }
    };
    RegisterAction<pair_t, slot_index_t, bit<32>>(seen) seen_read_v1 = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.hi & md.rank_bit; }
    };

    /* count: a new contribution increments it and completes the slot at the world size (back to 0); outputs the
     * count before, with bit 31 set on completion */
    Register<bit<32>, cell_index_t>(CELLS) count;
    RegisterAction<bit<32>, cell_index_t, bit<32>>(count) count_contribute = {
        void apply(inout bit<32> v, out bit<32> rv) {
            if (v + 1 == (bit<32>)md.world_size) { rv = v | 0x80000000; v = 0; } else { rv = v; v = v + 1; }
        }
    };
    RegisterAction<bit<32>, cell_index_t, bit<32>>(count) count_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };

    Register<bit<32>, cell_index_t>(CELLS) elements;
    RegisterAction<bit<32>, cell_index_t, bit<32>>(elements) elements_write = {
        void apply(inout bit<32> v, out bit<32> rv) { v = (bit<32>)hdr.sml.count; rv = v; }
    };
    RegisterAction<bit<32>, cell_index_t, bit<32>>(elements) elements_read = {
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; }
    };

    /* look-ahead exponent maximum (sign-extended int16 in an int32 cell) */
    Register<int<32>, cell_index_t>(CELLS) exponent_max;
    RegisterAction<int<32>, cell_index_t, int<32>>(exponent_max) exponent_write = {
        void apply(inout int<32> v, out int<32> rv) { v = (int<32>)(int<16>)hdr.sml.lookahead; rv = v; }
    };
    RegisterAction<int<32>, cell_index_t, int<32>>(exponent_max) exponent_max_update = {
        void apply(inout int<32> v, out int<32> rv) {
            if ((int<32>)(int<16>)hdr.sml.lookahead > v) { v = (int<32>)(int<16>)hdr.sml.lookahead; } rv = v;
        }
    };
    RegisterAction<int<32>, cell_index_t, int<32>>(exponent_max) exponent_read = {
        void apply(inout int<32> v, out int<32> rv) { rv = v; }
    };

    /* check field: byte-wise maximum, high byte in hi, low byte in lo */
    Register<pair_t, cell_index_t>(CELLS) check_max;
    RegisterAction<pair_t, cell_index_t, bit<32>>(check_max) check_write = {
        void apply(inout pair_t v, out bit<32> rv) { v.hi = (bit<32>)(hdr.sml.check & 0xFF00); v.lo = (bit<32>)(hdr.sml.check & 0xFF); rv = v.hi | v.lo; }
    };
    RegisterAction<pair_t, cell_index_t, bit<32>>(check_max) check_max_update = {
        void apply(inout pair_t v, out bit<32> rv) {
            v.hi = max(v.hi, (bit<32>)(hdr.sml.check & 0xFF00)); v.lo = max(v.lo, (bit<32>)(hdr.sml.check & 0xFF)); rv = v.hi | v.lo;
        }
    };
    RegisterAction<pair_t, cell_index_t, bit<32>>(check_max) check_read = {
        void apply(inout pair_t v, out bit<32> rv) { rv = v.hi | v.lo; }
    };

    LanePair() lanes_00;
    LanePair() lanes_01;
    LanePair() lanes_02;
    LanePair() lanes_03;
    LanePair() lanes_04;
    LanePair() lanes_05;
    LanePair() lanes_06;
    LanePair() lanes_07;
    LanePair() lanes_08;
    LanePair() lanes_09;
    LanePair() lanes_10;
    LanePair() lanes_11;
    LanePair() lanes_12;
    LanePair() lanes_13;
    LanePair() lanes_14;
    LanePair() lanes_15;
    LanePair() lanes_16;
    LanePair() lanes_17;
    LanePair() lanes_18;
    LanePair() lanes_19;
    LanePair() lanes_20;
    LanePair() lanes_21;
    LanePair() lanes_22;
    LanePair() lanes_23;
    LanePair() lanes_24;
    LanePair() lanes_25;
    LanePair() lanes_26;
    LanePair() lanes_27;
    LanePair() lanes_28;
    LanePair() lanes_29;
    LanePair() lanes_30;
    LanePair() lanes_31;

    apply {
        if (!hdr.sml.isValid()) {
            /* not ours: forwarded by the switch's own tables (not part of this program) */
            exit;
        }
        if (hdr.sml.magic != SML_MAGIC || hdr.sml.version != SML_VERSION ||
            (hdr.sml.type != T_UPDATE && hdr.sml.type != T_PROBE)) {
            ig_dprsr_md.drop_ctl = 1;
            exit;
        }
        if (!job_table.apply().hit) {
            /* as a packet that is not ours: forwarded by the switch's own tables, untouched */
            exit;
        }
        rank_source.apply();
        if (ig_dprsr_md.drop_ctl != 0) { exit; }
        if (hdr.sml.slot >= (bit<32>)md.pool_size || hdr.sml.elem_type != md.elem_type || hdr.sml.count > md.lanes) {
            ig_dprsr_md.drop_ctl = 1;
            exit;
        }
        md.rank_bit = (bit<32>)1 << (bit<8>)hdr.sml.worker_rank;
        md.cell = (cell_index_t)(((bit<32>)md.pool_base + hdr.sml.slot) << 1) | (cell_index_t)(hdr.sml.flags & F_VERSION);

        if (!hdr.bridge.isValid()) {
            /* first pass: the bookkeeping registers decide the outcome */
            slot_index_t slot = (slot_index_t)((bit<32>)md.pool_base + hdr.sml.slot);
            if (hdr.sml.type == T_UPDATE) {
                if (hdr.sml.flags & F_VERSION == 0) { md.seen_before = seen_update_v0.execute(slot); }
                else { md.seen_before = seen_update_v1.execute(slot); }
            } else {
                if (hdr.sml.flags & F_VERSION == 0) { md.seen_before = seen_read_v0.execute(slot); }
                else { md.seen_before = seen_read_v1.execute(slot); }
            }
            bit<32> before;
            md.first = 0;
            if (hdr.sml.type == T_UPDATE && md.seen_before == 0) {
                before = count_contribute.execute(md.cell);
                md.first = (before & 0x7FFFFFFF == 0) ? 1w1 : 1w0;
                md.outcome = (before & 0x80000000 != 0) ? O_COMPLETED : O_ABSORBED;
            } else {
                before = count_read.execute(md.cell);
                if (md.seen_before == 0) { md.outcome = O_NACK; }
                else if (before == 0) { md.outcome = O_SHADOW; }
                else if (hdr.sml.type == T_UPDATE) { md.outcome = O_DUPLICATE; }
                else { md.outcome = O_PENDING; }
            }
            /* ... elements, exponent_max, check_max in the next stage; lanes of block 0 after them */
            bit<32> result_count;
            if (md.first == 1) { result_count = elements_write.execute(md.cell); }
            else { result_count = elements_read.execute(md.cell); }
            int<32> exponent;
            bit<32> check;
            if (md.first == 1) { exponent = exponent_write.execute(md.cell); check = check_write.execute(md.cell); }
            else if (md.outcome == O_ABSORBED || md.outcome == O_COMPLETED) {
                exponent = exponent_max_update.execute(md.cell); check = check_max_update.execute(md.cell);
            } else { exponent = exponent_read.execute(md.cell); check = check_read.execute(md.cell); }
            if (md.outcome != O_NACK && md.outcome != O_PENDING) {
                /* a NACK or PENDING is the probe's own header (TofinoModel and SlotPool echo it unchanged) */
                hdr.sml.lookahead = (bit<16>)exponent;
                hdr.sml.check = (bit<16>)check;
            }
            hdr.bridge.setValid();
            hdr.bridge.pass = 0;
            hdr.bridge.outcome = md.outcome;
            hdr.bridge.first = md.first;
            hdr.bridge.cell = md.cell;
            hdr.bridge.result_count = (bit<16>)result_count;
            hdr.bridge.pad = 0;
            hdr.bridge.ingress_port = ig_intr_md.ingress_port;
            if (md.outcome == O_SHADOW) {
                /* the answer's lanes: later passes parse the lanes this one makes valid */
                hdr.sml.count = (bit<16>)result_count;
            }
        }
        md.outcome = hdr.bridge.outcome;
        md.first = hdr.bridge.first;
        if (md.outcome == O_DUPLICATE) {
            ig_dprsr_md.drop_ctl = 1;
            exit;
        }
        if (md.outcome == O_NACK || md.outcome == O_PENDING) {
            /* the probe's header: "resend it" (NACK) or "held, the others have not sent theirs" (PENDING) */
            if (md.outcome == O_NACK) { hdr.sml.type = T_NACK; } else { hdr.sml.type = T_PENDING; }
            hdr.sml.mac = 0;
            /* the payload changed: no UDP checksum (0, legal over IPv4) rather than the probe's, now wrong */
            hdr.udp.checksum = 0;
            /* back to the sender: swap addresses and ports, out of the port it came in on */
            bit<32> a = hdr.ipv4.src_addr; hdr.ipv4.src_addr = hdr.ipv4.dst_addr; hdr.ipv4.dst_addr = a;
            bit<16> p = hdr.udp.src_port; hdr.udp.src_port = hdr.udp.dst_port; hdr.udp.dst_port = p;
            ig_tm_md.ucast_egress_port = hdr.bridge.ingress_port;
            hdr.bridge.setInvalid();
            exit;
        }

        /* a lane pass: block = pass / 2 on harvesting outcomes (two passes per block), else pass */
        md.aggregate = (md.outcome == O_ABSORBED || md.outcome == O_COMPLETED) ? 1w1 : 1w0;
        bit<8> block = hdr.bridge.pass;
        md.half = 0;
        if (md.outcome == O_COMPLETED || md.outcome == O_SHADOW) {
            block = hdr.bridge.pass >> 1;
            md.half = hdr.bridge.pass & 1;
            if (md.half == 1) { md.aggregate = 0; }
        }
        md.lane_index = (lane_index_t)md.cell << 2 | (lane_index_t)block;
        /* lanes of this block in a shadow answer (64 or more: all of them) */
        md.block_lanes = hdr.bridge.result_count - ((bit<16>)block << 6);
        lanes_00.apply(hdr.lanes[0], hdr.lanes[1], 0, md);
        lanes_01.apply(hdr.lanes[2], hdr.lanes[3], 2, md);
        lanes_02.apply(hdr.lanes[4], hdr.lanes[5], 4, md);
        lanes_03.apply(hdr.lanes[6], hdr.lanes[7], 6, md);
        lanes_04.apply(hdr.lanes[8], hdr.lanes[9], 8, md);
        lanes_05.apply(hdr.lanes[10], hdr.lanes[11], 10, md);
        lanes_06.apply(hdr.lanes[12], hdr.lanes[13], 12, md);
        lanes_07.apply(hdr.lanes[14], hdr.lanes[15], 14, md);
        lanes_08.apply(hdr.lanes[16], hdr.lanes[17], 16, md);
        lanes_09.apply(hdr.lanes[18], hdr.lanes[19], 18, md);
        lanes_10.apply(hdr.lanes[20], hdr.lanes[21], 20, md);
        lanes_11.apply(hdr.lanes[22], hdr.lanes[23], 22, md);
        lanes_12.apply(hdr.lanes[24], hdr.lanes[25], 24, md);
        lanes_13.apply(hdr.lanes[26], hdr.lanes[27], 26, md);
        lanes_14.apply(hdr.lanes[28], hdr.lanes[29], 28, md);
        lanes_15.apply(hdr.lanes[30], hdr.lanes[31], 30, md);
        lanes_16.apply(hdr.lanes[32], hdr.lanes[33], 32, md);
        lanes_17.apply(hdr.lanes[34], hdr.lanes[35], 34, md);
        lanes_18.apply(hdr.lanes[36], hdr.lanes[37], 36, md);
        lanes_19.apply(hdr.lanes[38], hdr.lanes[39], 38, md);
        lanes_20.apply(hdr.lanes[40], hdr.lanes[41], 40, md);
        lanes_21.apply(hdr.lanes[42], hdr.lanes[43], 42, md);
        lanes_22.apply(hdr.lanes[44], hdr.lanes[45], 44, md);
        lanes_23.apply(hdr.lanes[46], hdr.lanes[47], 46, md);
        lanes_24.apply(hdr.lanes[48], hdr.lanes[49], 48, md);
        lanes_25.apply(hdr.lanes[50], hdr.lanes[51], 50, md);
        lanes_26.apply(hdr.lanes[52], hdr.lanes[53], 52, md);
        lanes_27.apply(hdr.lanes[54], hdr.lanes[55], 54, md);
        lanes_28.apply(hdr.lanes[56], hdr.lanes[57], 56, md);
        lanes_29.apply(hdr.lanes[58], hdr.lanes[59], 58, md);
        lanes_30.apply(hdr.lanes[60], hdr.lanes[61], 60, md);
        lanes_31.apply(hdr.lanes[62], hdr.lanes[63], 62, md);

        /* more passes? (64 lanes per block; two passes per block when the sums are read) */
        bit<16> needed = (md.outcome == O_SHADOW) ? hdr.bridge.result_count : hdr.sml.count;
        bit<8> passes_per_block = (md.outcome == O_COMPLETED || md.outcome == O_SHADOW) ? 8w2 : 8w1;
        if ((bit<16>)(hdr.bridge.pass + 1) < ((needed + 63) >> 6) * (bit<16>)passes_per_block) {
            hdr.bridge.pass = hdr.bridge.pass + 1;
            ig_tm_md.ucast_egress_port = 68;   /* recirculate */
            exit;
        }
        if (md.outcome == O_ABSORBED) {
            ig_dprsr_md.drop_ctl = 1;
            exit;
        }
        hdr.sml.type = T_RESULT;
        hdr.sml.mac = 0;
        hdr.udp.checksum = 0;
        if (md.outcome == O_SHADOW) {
            hdr.sml.flags = hdr.sml.flags | F_RETRANSMIT;
            hdr.sml.count = hdr.bridge.result_count;
            /* the answer's size: UDP header, 40-byte SwitchML header, 4 bytes a lane (IPv4 header of 20 besides) */
            hdr.udp.length = 48 + (hdr.bridge.result_count << 2);
            hdr.ipv4.total_len = 68 + (hdr.bridge.result_count << 2);
            bit<32> a = hdr.ipv4.src_addr; hdr.ipv4.src_addr = hdr.ipv4.dst_addr; hdr.ipv4.dst_addr = a;
            bit<16> p = hdr.udp.src_port; hdr.udp.src_port = hdr.udp.dst_port; hdr.udp.dst_port = p;
            /* the port the request came in on: after a recirculation ig_intr_md.ingress_port is the recirculation port */
            ig_tm_md.ucast_egress_port = hdr.bridge.ingress_port;
        } else {
            hdr.sml.flags = hdr.sml.flags & ~F_RETRANSMIT;
            ig_tm_md.mcast_grp_a = md.mcast_grp;
        }
        hdr.bridge.setInvalid();
    }
}

control SwitchMLIngressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t md,
                                in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(hdr); }
}

struct egress_metadata_t { }

parser SwitchMLEgressParser(packet_in pkt, out headers_t hdr, out egress_metadata_t md,
                            out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol, hdr.ipv4.ihl) { (IPPROTO_UDP, 5): parse_udp; default: accept; }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control SwitchMLEgress(inout headers_t hdr, inout egress_metadata_t md,
                       in egress_intrinsic_metadata_t eg_intr_md,
                       in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                       inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                       inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    /* each copy of a multicast result to its rank: rid -> the rank's address and port */
    action set_dest(bit<32> dst_addr, bit<16> dst_port) {
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.src_port = hdr.udp.dst_port;
        hdr.udp.dst_port = dst_port;
        hdr.udp.checksum = 0;
    }
    action drop_no_dest() { eg_dprsr_md.drop_ctl = 1; }
    table replica_dest {
        key = { eg_intr_md.egress_rid : exact; }
        actions = { set_dest; drop_no_dest; }
        default_action = drop_no_dest();
        size = 32768;
    }
    apply {
        if (eg_intr_md.egress_rid != 0) { replica_dest.apply(); }
    }
}

control SwitchMLEgressDeparser(packet_out pkt, inout headers_t hdr, in egress_metadata_t md,
                               in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    /* the IPv4 header checksum over the fields as egress leaves them: a multicast copy's rewritten addresses, a
     * shadow answer's length; unchanged for a packet whose checksum was right (only a 20-byte header is parsed) */
    Checksum() ipv4_checksum;
    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr });
        }
        pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp);
    }
}

Pipeline(SwitchMLIngressParser(), SwitchMLIngress(), SwitchMLIngressDeparser(),
         SwitchMLEgressParser(), SwitchMLEgress(), SwitchMLEgressDeparser()) pipe;

Switch(pipe) main;
