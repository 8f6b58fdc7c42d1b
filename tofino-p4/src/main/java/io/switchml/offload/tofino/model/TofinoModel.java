package io.switchml.offload.tofino.model;

import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java model of {@code tofino-p4/p4/switchml.p4}: Algorithm 3 as the Tofino pipeline runs it, packet by
 * packet, under the hardware's rules, and the control-plane state (tables, multicast groups, registers) that
 * P4Runtime writes through {@link PipelineControl}.
 * <p>
 * Rules the model keeps, so that what it does the program can do: every register is a {@link RegisterArray} of
 * the declared size, reached once per pass (a second access throws); arithmetic is 32-bit integer (int lanes wrap
 * as the ALUs do; no floating point anywhere); a pass aggregates at most 64 lanes, in 32 pair registers, one
 * stateful ALU each; a k = 256 job takes up to four passes, the packet recirculating with the outcome of the first
 * pass in a bridged header; the only per-lane condition is a lane header's validity (the parser extracts the lanes
 * a packet has); the result is multicast through the replication engine, each copy's destination rewritten in
 * egress by its replication id.
 * <p>
 * What the program does not do that SlotPool does (a switch cannot afford it in one pass: the checks need the
 * slot's chunk sequence before the seen bitmap, which is updated in an earlier stage): reject contributions whose
 * chunk, element count, scale or exponent-only flag disagree with the slot's first one, and recognise a late copy
 * of an earlier round as stale. The differential test shows the two agree on every trace the worker protocol
 * produces without those faults.
 * <p>
 * A packet's passes run back to back here. On the hardware other packets can pass through between two passes of a
 * recirculating packet; the consequence is noted in the README.
 * <p>
 * Not thread-safe: one pipeline, one packet at a time (callers serialise).
 */
public final class TofinoModel implements PipelineControl
{
    /** Outcomes of the first pass, carried to the recirculated passes. */
    static final int ABSORBED = 0;
    static final int COMPLETED = 1;
    static final int SHADOW = 2;
    static final int DUPLICATE = 3;
    static final int PENDING = 4;
    static final int NACK = 5;

    /** A packet as the switch receives it: ingress port, addresses, and the UDP payload. */
    public record PacketIn(int ingressPort, int srcAddr, int srcPort, int dstAddr, int dstPort, byte[] payload, int offset, int length)
    {
    }

    /** A packet the switch sends: egress port, replication id (0 for unicast), destination after egress, payload. */
    public record PacketOut(int egressPort, int rid, int dstAddr, int dstPort, byte[] payload)
    {
    }

    /**
     * Outcome counters (Algorithm 3's cases) and pipeline counters, all of the pipeline, none of a job: PACKETS counts
     * every packet the pipeline receives, a stranger's included, as a port counter does; PASSED those it forwarded
     * unchanged (not to a data port, or of a job not in {@code job_table}).
     */
    public enum Event
    {
        PACKETS, PASSED, ABSORBED, COMPLETED, SHADOW_RESULTS, DUPLICATES, PROBES_PENDING, NACKS, PASSES, RECIRCULATIONS,
        REPLICAS, NO_DEST
    }

    private static final java.nio.ByteOrder ORDER = java.nio.ByteOrder.BIG_ENDIAN;

    /** The parser value set of data ports ({@link P4Names#DATA_PORTS}); written under the pipeline's lock. */
    private int[] udpPorts;
    private final ExactTable jobTable = new ExactTable(P4Names.TABLES.get(0));
    private final ExactTable rankSource = new ExactTable(P4Names.TABLES.get(1));
    private final ExactTable replicaDest = new ExactTable(P4Names.TABLES.get(2));
    private final Map<String, ExactTable> tables = Map.of(jobTable.name(), jobTable, rankSource.name(), rankSource,
        replicaDest.name(), replicaDest);
    private final Map<String, RegisterArray> registers = new HashMap<>();
    private final RegisterArray seen;
    private final RegisterArray count;
    private final RegisterArray elements;
    private final RegisterArray exponentMax;
    private final RegisterArray checkMax;
    private final RegisterArray[] lanes = new RegisterArray[P4Names.LANE_PAIRS];
    private final Map<Integer, List<Replica>> groups = new HashMap<>();
    private final EnumMap<DropReason, Long> drops = new EnumMap<>(DropReason.class);
    private final EnumMap<Event, Long> events = new EnumMap<>(Event.class);
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private long passSerial;
    private DropReason lastDrop = DropReason.NONE;

    /**
     * @param udpPorts the parser value set's members at start, the aggregator's UDP ports (packets to other ports are
     *                 forwarded untouched, counted as passed); none, as on a switch, until the control plane writes
     *                 the set ({@link #writeValueSet}).
     */
    public TofinoModel(final int... udpPorts)
    {
        this.udpPorts = udpPorts.clone();
        for (final P4Names.Register register : P4Names.REGISTERS)
        {
            registers.put(register.name(), new RegisterArray(register));
        }
        seen = registers.get(P4Names.SEEN);
        count = registers.get(P4Names.COUNT);
        elements = registers.get(P4Names.ELEMENTS);
        exponentMax = registers.get(P4Names.EXPONENT_MAX);
        checkMax = registers.get(P4Names.CHECK_MAX);
        for (int pair = 0; pair < P4Names.LANE_PAIRS; pair++)
        {
            lanes[pair] = registers.get(P4Names.lanes(pair));
        }
    }

    // ---------------------------------------------------------------- control plane

    public void writeTableEntry(final UpdateType type, final TableEntry entry) throws PipelineException
    {
        final ExactTable table = tables.get(entry.table());
        if (table == null)
        {
            throw new PipelineException("NOT_FOUND", "no table " + entry.table());
        }
        table.write(type, entry);
    }

    public void writeRegister(final String register, final int index, final byte[] value) throws PipelineException
    {
        final RegisterArray array = register(register, index);
        array.write(index, ExactTable.value(register + "[" + index + "]", value, array.pair() ? 64 : 32));
    }

    public byte[] readRegister(final String register, final int index) throws PipelineException
    {
        final RegisterArray array = register(register, index);
        return array.pair() ? ByteBuffer.allocate(8).putLong(array.read(index)).array() :
            ByteBuffer.allocate(4).putInt((int)array.read(index)).array();
    }

    private RegisterArray register(final String register, final int index) throws PipelineException
    {
        final RegisterArray array = registers.get(register);
        if (array == null)
        {
            throw new PipelineException("NOT_FOUND", "no register " + register);
        }
        if (index < 0 || index >= array.size())
        {
            throw new PipelineException("OUT_OF_RANGE", register + " has " + array.size() + " cells, index " + index);
        }
        return array;
    }

    /**
     * @return the members of the parser's data-port value set.
     */
    public int[] dataPorts()
    {
        return udpPorts.clone();
    }

    public void writeValueSet(final String valueSet, final List<byte[]> members) throws PipelineException
    {
        if (!P4Names.DATA_PORTS.equals(valueSet))
        {
            throw new PipelineException("NOT_FOUND", "no value set " + valueSet);
        }
        if (members.size() > P4Names.DATA_PORTS_SIZE)
        {
            throw new PipelineException("RESOURCE_EXHAUSTED", valueSet + " holds " + P4Names.DATA_PORTS_SIZE + " members, not " +
                members.size());
        }
        final int[] ports = new int[members.size()];
        for (int i = 0; i < ports.length; i++)
        {
            ports[i] = (int)ExactTable.value(valueSet + " member " + i, members.get(i), 16);
        }
        udpPorts = ports;
    }

    public void writeMulticastGroup(final UpdateType type, final int groupId, final List<Replica> replicas) throws PipelineException
    {
        if (groupId < 1 || groupId > 0xFFFF)
        {
            throw new PipelineException("OUT_OF_RANGE", "multicast group " + groupId + " outside 1..65535");
        }
        switch (type)
        {
            case INSERT ->
            {
                if (groups.containsKey(groupId))
                {
                    throw new PipelineException("ALREADY_EXISTS", "multicast group " + groupId + " exists");
                }
                groups.put(groupId, List.copyOf(replicas));
            }
            case MODIFY ->
            {
                if (!groups.containsKey(groupId))
                {
                    throw new PipelineException("NOT_FOUND", "no multicast group " + groupId);
                }
                groups.put(groupId, List.copyOf(replicas));
            }
            case DELETE ->
            {
                if (groups.remove(groupId) == null)
                {
                    throw new PipelineException("NOT_FOUND", "no multicast group " + groupId);
                }
            }
        }
    }

    public List<TableEntry> readTableEntries(final String table) throws PipelineException
    {
        final ExactTable exact = tables.get(table);
        if (exact == null)
        {
            throw new PipelineException("NOT_FOUND", "no table " + table);
        }
        return exact.read();
    }

    public List<Integer> readMulticastGroups()
    {
        return groups.keySet().stream().sorted().toList();
    }

    /**
     * @return entries installed in a table (for tests and logs).
     */
    public int tableEntries(final String table)
    {
        return tables.get(table).entries();
    }

    /**
     * @return multicast groups installed.
     */
    public int multicastGroups()
    {
        return groups.size();
    }

    public long drops(final DropReason reason)
    {
        return drops.getOrDefault(reason, 0L);
    }

    public long events(final Event event)
    {
        return events.getOrDefault(event, 0L);
    }

    /**
     * What the checks before the registers made of the last packet {@link #process} took: NONE when it passed them
     * (its job, its rank pinned to its source address and port, its slot and geometry) or was not the program's (not
     * to a data port, or of a job not in {@code job_table}: passed through, see {@link Event#PASSED}); else the reason it was dropped. JOB_MISMATCH is the one reason a
     * packet gets after its source passed {@code rank_source}: every other one comes from a packet no member needs
     * to have sent. A drop after the checks (a job without its multicast group) leaves NONE: the packet was the job's.
     *
     * @return the last packet's drop reason before the registers, or NONE.
     */
    public DropReason lastDrop()
    {
        return lastDrop;
    }

    /**
     * @return drops by reason and events, one line, for logs.
     */
    public String describeCounters()
    {
        final StringBuilder line = new StringBuilder();
        events.forEach((event, value) -> line.append(event.name().toLowerCase()).append('=').append(value).append(' '));
        drops.forEach((reason, value) -> line.append("drop_").append(reason.name().toLowerCase()).append('=').append(value).append(' '));
        return line.toString().strip();
    }

    // ---------------------------------------------------------------- data plane

    /**
     * Run one packet through the pipeline (all its passes).
     *
     * @param in the packet.
     * @return what the switch sends: nothing (absorbed or dropped), the result to every replica, or one unicast.
     */
    public List<PacketOut> process(final PacketIn in)
    {
        lastDrop = DropReason.NONE;
        count(Event.PACKETS);
        if (!isAggregatorPort(in.dstPort()))
        {
            return passThrough(in);
        }
        // parser: fixed offsets of wire protocol v1; the lanes the element count says must all be there
        final UnsafeBuffer packet = new UnsafeBuffer(copy(in));
        final DropReason malformed = DataHeaderFlyweight.validate(packet, 0, in.length());
        if (malformed != DropReason.NONE)
        {
            return drop(malformed);
        }
        final DataHeaderFlyweight h = header.wrap(packet, 0);
        final byte type = h.type();
        if (type != DataHeaderFlyweight.TYPE_UPDATE && type != DataHeaderFlyweight.TYPE_PROBE)
        {
            return drop(DropReason.BAD_TYPE);
        }
        final ExactTable.Entry job = jobTable.lookup(List.of(h.jobId() & 0xFFFF_FFFFL));
        if (job == null || job.action().equals(P4Names.FORWARD_UNKNOWN_JOB))
        {
            // not a job of this switch: on unchanged to the appliance, whose software shards may hold it (packet is
            // still the unmodified copy of the datagram)
            return passThrough(in, packet.byteArray());
        }
        final ExactTable.Entry source = rankSource.lookup(List.of(h.jobId() & 0xFFFF_FFFFL, (long)h.workerRank(),
            in.srcAddr() & 0xFFFF_FFFFL, (long)in.srcPort()));
        if (source == null || !source.action().equals(P4Names.ALLOW_RANK))
        {
            return drop(DropReason.NOT_MEMBER);
        }
        final int poolBase = (int)job.param("pool_base");
        final int poolSize = (int)job.param("pool_size");
        final int world = (int)job.param("world_size");
        final int jobLanes = (int)job.param("lanes");
        final int slot = h.slotIndex();
        final int elementCount = h.elementCount();
        final byte elemType = h.elementType();
        if (slot < 0 || slot >= poolSize || elemType != (byte)job.param("elem_type") || elementCount > jobLanes ||
            (elemType != ElementType.INT32 && elemType != ElementType.FLOAT32))
        {
            return drop(DropReason.JOB_MISMATCH);
        }

        final int version = h.flags() & DataHeaderFlyweight.FLAG_POOL_VERSION;
        final int rank = h.workerRank();
        final int bit = 1 << rank;
        final int slotIndex = poolBase + slot;
        final int cell = (slotIndex << 1) | version;
        final boolean update = type == DataHeaderFlyweight.TYPE_UPDATE;
        final long pass = ++passSerial;
        count(Event.PASSES);

        // stage 0: seen bitmaps of both versions in one pair register: set ours, clear the other's (updates only)
        final int seenBefore = seen.execute(pass, slotIndex, c ->
        {
            final int mine = c[version];
            if (update && (mine & bit) == 0)
            {
                c[version] = mine | bit;
                c[version ^ 1] &= ~bit;
            }
            return mine & bit;
        });

        // stage 1: the count; decides the outcome
        final int outcome = count.execute(pass, cell, c ->
        {
            if (update && seenBefore == 0)
            {
                final int next = c[0] + 1;
                final int first = c[0] == 0 ? 8 : 0;
                if (next == world)
                {
                    c[0] = 0;
                    return COMPLETED | first;
                }
                c[0] = next;
                return ABSORBED | first;
            }
            if (seenBefore != 0)
            {
                return c[0] == 0 ? SHADOW : update ? DUPLICATE : PENDING;
            }
            return NACK;
        });
        final boolean first = (outcome & 8) != 0;
        final int result = outcome & 7;

        // stage 2: element count, exponent and check maxima of the slot version
        final int resultElements = elements.execute(pass, cell, c ->
        {
            if (first)
            {
                c[0] = elementCount;
            }
            return c[0];
        });
        final int lookahead = h.lookaheadExponent();
        final int exponent = exponentMax.execute(pass, cell, c ->
        {
            if (first)
            {
                c[0] = lookahead;
            }
            else if (result == ABSORBED || result == COMPLETED)
            {
                c[0] = Math.max(c[0], lookahead);
            }
            return c[0];
        });
        final int checkField = h.tensorCheck();
        final int check = checkMax.execute(pass, cell, c ->
        {
            final int high = checkField & 0xFF00;
            final int low = checkField & 0xFF;
            if (first)
            {
                c[1] = high;
                c[0] = low;
            }
            else if (result == ABSORBED || result == COMPLETED)
            {
                c[1] = Math.max(c[1], high);
                c[0] = Math.max(c[0], low);
            }
            return c[1] | c[0];
        });

        switch (result)
        {
            case ABSORBED -> count(Event.ABSORBED);
            case DUPLICATE ->
            {
                count(Event.DUPLICATES);
                return List.of();
            }
            case PENDING, NACK ->
            {
                // the probe's header, back to the prober: "resend it" or "I hold it, others have not sent theirs"
                count(result == NACK ? Event.NACKS : Event.PROBES_PENDING);
                h.type(result == NACK ? DataHeaderFlyweight.TYPE_NACK : DataHeaderFlyweight.TYPE_PENDING);
                packet.putLong(DataHeaderFlyweight.MAC_OFFSET, 0L, ORDER);
                return List.of(unicast(in, packet, DataHeaderFlyweight.HEADER_LENGTH));
            }
            default ->
            {
            }
        }

        // a shadow answer to a probe (no lanes in it) grows by the result's lanes: the program makes the lane
        // headers of the result's count valid and sets the IPv4 and UDP lengths for them
        final int outElements = result == SHADOW ? resultElements : elementCount;
        final int outLength = DataHeaderFlyweight.packetLength(outElements);
        final UnsafeBuffer out = outLength <= packet.capacity() ? packet : grow(packet, outLength);
        lanesPasses(out, pass, cell, result, first, outElements, outElements, jobLanes);
        if (result == ABSORBED)
        {
            return List.of();
        }

        final DataHeaderFlyweight r = header.wrap(out, 0);
        r.type(DataHeaderFlyweight.TYPE_RESULT);
        final int flags = r.flags();
        r.flags(result == SHADOW ? flags | DataHeaderFlyweight.FLAG_RETRANSMIT : flags & ~DataHeaderFlyweight.FLAG_RETRANSMIT);
        out.putShort(DataHeaderFlyweight.LOOKAHEAD_EXPONENT_OFFSET, (short)exponent, ORDER);
        out.putShort(DataHeaderFlyweight.TENSOR_CHECK_OFFSET, (short)check, ORDER);
        out.putShort(DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, (short)outElements, ORDER);
        out.putLong(DataHeaderFlyweight.MAC_OFFSET, 0L, ORDER);
        if (result == SHADOW)
        {
            count(Event.SHADOW_RESULTS);
            return List.of(unicast(in, out, outLength));
        }
        count(Event.COMPLETED);
        return replicate((int)job.param("mcast_grp"), out, outLength);
    }

    /**
     * The lane passes. Pass p of a block aggregates lanes 64p..64p+63 in the 32 pair registers at index cell * 4 + p:
     * each stateful ALU updates both lanes of its pair and outputs one of them (a RegisterAction has one output), so
     * a result that must carry the sums takes a second pass over the block to read the other halves. A packet with
     * more passes to go recirculates, carrying the first pass's outcome in a bridged header.
     *
     * @param present lanes the packet carries (its parser extracted them).
     * @param needed  lanes the outcome touches.
     */
    private void lanesPasses(
        final UnsafeBuffer packet, final long firstPass, final int cell, final int result, final boolean first, final int present,
        final int needed, final int jobLanes)
    {
        final boolean harvest = result == COMPLETED || result == SHADOW;
        final boolean aggregate = result == ABSORBED || result == COMPLETED;
        final int blocks = Math.min((needed + P4Names.LANES_PER_PASS - 1) / P4Names.LANES_PER_PASS,
            jobLanes / P4Names.LANES_PER_PASS);
        long pass = firstPass;
        boolean passUsed = false;
        for (int block = 0; block < blocks; block++)
        {
            for (int half = 0; half < (harvest ? 2 : 1); half++)
            {
                if (half == 0 && !aggregate && !harvest)
                {
                    continue;
                }
                if (passUsed)
                {
                    pass = ++passSerial;
                    count(Event.PASSES);
                    count(Event.RECIRCULATIONS);
                }
                passUsed = true;
                final int from = block * P4Names.LANES_PER_PASS;
                final int index = cell * P4Names.MAX_PASSES + block;
                final boolean update = half == 0 && aggregate;
                for (int pair = 0; pair < P4Names.LANE_PAIRS; pair++)
                {
                    final int lane0 = from + 2 * pair;
                    if (lane0 >= needed)
                    {
                        break;
                    }
                    final boolean valid1 = lane0 + 1 < needed;
                    final int offset0 = DataHeaderFlyweight.PAYLOAD_OFFSET + 4 * lane0;
                    final int in0 = update && lane0 < present ? packet.getInt(offset0, ORDER) : 0;
                    final int in1 = update && valid1 && lane0 + 1 < present ? packet.getInt(offset0 + 4, ORDER) : 0;
                    final int outputHalf = half;
                    final int value = lanes[pair].execute(pass, index, c ->
                    {
                        if (update)
                        {
                            c[0] = first ? in0 : c[0] + in0;
                            c[1] = valid1 ? (first ? in1 : c[1] + in1) : c[1];
                        }
                        return c[outputHalf];
                    });
                    if (harvest)
                    {
                        if (half == 0)
                        {
                            packet.putInt(offset0, value, ORDER);
                        }
                        else if (valid1)
                        {
                            packet.putInt(offset0 + 4, value, ORDER);
                        }
                    }
                }
            }
        }
    }

    private List<PacketOut> replicate(final int group, final UnsafeBuffer packet, final int length)
    {
        final List<Replica> replicas = groups.get(group);
        if (replicas == null)
        {
            // after the checks: counted as a drop, but the packet was the job's (lastDrop stays NONE)
            drops.merge(DropReason.UNKNOWN_JOB, 1L, Long::sum);
            return List.of();
        }
        final List<PacketOut> out = new ArrayList<>(replicas.size());
        for (final Replica replica : replicas)
        {
            final ExactTable.Entry dest = replicaDest.lookup(List.of((long)replica.instance()));
            if (dest == null || !dest.action().equals(P4Names.SET_DEST))
            {
                count(Event.NO_DEST);
                continue;
            }
            count(Event.REPLICAS);
            final byte[] payload = new byte[length];
            packet.getBytes(0, payload);
            out.add(new PacketOut(replica.egressPort(), replica.instance(), (int)dest.param("dst_addr"), (int)dest.param("dst_port"),
                payload));
        }
        return out;
    }

    private static PacketOut unicast(final PacketIn in, final UnsafeBuffer packet, final int length)
    {
        final byte[] payload = new byte[length];
        packet.getBytes(0, payload);
        return new PacketOut(in.ingressPort(), 0, in.srcAddr(), in.srcPort(), payload);
    }

    private static UnsafeBuffer grow(final UnsafeBuffer packet, final int length)
    {
        final byte[] bigger = new byte[length];
        packet.getBytes(0, bigger, 0, packet.capacity());
        return new UnsafeBuffer(bigger);
    }

    private static byte[] copy(final PacketIn in)
    {
        final byte[] bytes = new byte[in.length()];
        System.arraycopy(in.payload(), in.offset(), bytes, 0, in.length());
        return bytes;
    }

    /**
     * A packet that is not the program's (not to a data port, or of a job not in {@code job_table}): forwarded
     * unchanged by the switch's own tables, towards its destination (the appliance); egress port -1.
     */
    private List<PacketOut> passThrough(final PacketIn in)
    {
        return passThrough(in, copy(in));
    }

    private List<PacketOut> passThrough(final PacketIn in, final byte[] bytes)
    {
        count(Event.PASSED);
        return List.of(new PacketOut(-1, 0, in.dstAddr(), in.dstPort(), bytes));
    }

    private boolean isAggregatorPort(final int port)
    {
        for (final int udpPort : udpPorts)
        {
            if (udpPort == port)
            {
                return true;
            }
        }
        return false;
    }

    private List<PacketOut> drop(final DropReason reason)
    {
        lastDrop = reason;
        drops.merge(reason, 1L, Long::sum);
        return List.of();
    }

    private void count(final Event event)
    {
        events.merge(event, 1L, Long::sum);
    }
}
