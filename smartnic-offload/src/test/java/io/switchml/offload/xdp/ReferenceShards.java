package io.switchml.offload.xdp;

import io.switchml.appliance.engine.SlotPool;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The software engine as the oracle for the XDP program: the checks of the appliance's shard
 * ({@code ShardProcessor.onPacket}, in its order: validate, type, job, member and source, slot ownership and
 * geometry, MAC) in front of one {@link SlotPool} per job and shard, laid out as {@code Job} lays them out (global
 * slot i on shard i mod S at local index i / S). Packets of jobs it does not know pass, as they pass the XDP
 * program to the software shards behind it.
 */
final class ReferenceShards
{
    enum Kind
    {
        /** not for the offloaded jobs: handed to the kernel untouched */
        PASS_UNCHANGED,
        /** consumed or dropped */
        DROP,
        /** a completed result handed up to the Java shard for unicast fan-out */
        RESULT_UP,
        /** a completed result multicast to the job's group */
        RESULT_MULTICAST,
        /** a shadow-copy result or a NACK back to the sender */
        REPLY
    }

    /**
     * @param payload the UDP payload of the output packet, for the kinds that send one.
     * @param outcome the SlotPool outcome, or -1 when the packet did not reach a pool.
     */
    record Expected(Kind kind, byte[] payload, DropReason dropReason, int outcome)
    {
    }

    private final int[] dataPorts;
    private final Map<Integer, XdpJobImage> jobs = new HashMap<>();
    private final Map<Integer, SlotPool[]> pools = new HashMap<>();
    private final long[] drops = new long[DropReason.values().length];
    private final long[] outcomes = new long[8];
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private final DataHeaderFlyweight resultHeader = new DataHeaderFlyweight();

    ReferenceShards(final int[] dataPorts)
    {
        this.dataPorts = dataPorts.clone();
    }

    void install(final XdpJobImage job)
    {
        final int shards = dataPorts.length;
        final SlotPool[] shardPools = new SlotPool[shards];
        for (int shard = 0; shard < shards; shard++)
        {
            final int localSlots = (job.slots() - shard + shards - 1) / shards;
            shardPools[shard] = localSlots > 0 ? new SlotPool(job.worldSize(), localSlots, job.lanes(), shards) : null;
        }
        jobs.put(job.jobId(), job);
        pools.put(job.jobId(), shardPools);
    }

    long drops(final DropReason reason)
    {
        return drops[reason.ordinal()];
    }

    long outcomes(final int outcome)
    {
        return outcomes[outcome];
    }

    Expected onFrame(final byte[] frame)
    {
        final int shard = shardOf(Frames.dstPort(frame));
        if (shard < 0)
        {
            return new Expected(Kind.PASS_UNCHANGED, null, DropReason.NONE, -1);
        }
        final byte[] datagram = Frames.payload(frame);
        final int length = datagram.length;
        final UnsafeBuffer buffer = new UnsafeBuffer(datagram);

        final DropReason reason = DataHeaderFlyweight.validate(buffer, 0, length);
        if (reason != DropReason.NONE)
        {
            return drop(reason);
        }
        header.wrap(buffer, 0);
        final byte type = header.type();
        if (type != DataHeaderFlyweight.TYPE_UPDATE && type != DataHeaderFlyweight.TYPE_PROBE)
        {
            return drop(DropReason.BAD_TYPE);
        }
        final XdpJobImage job = jobs.get(header.jobId());
        if (job == null)
        {
            return new Expected(Kind.PASS_UNCHANGED, null, DropReason.NONE, -1);
        }
        final int rank = header.workerRank();
        if (rank >= job.worldSize() || Frames.srcAddress(frame) != job.memberAddresses()[rank] ||
            Frames.srcPort(frame) != job.memberPorts()[rank][shard])
        {
            return drop(DropReason.NOT_MEMBER);
        }
        final SlotPool pool = pools.get(job.jobId())[shard];
        final int slot = header.slotIndex();
        final int shardCount = dataPorts.length;
        if (pool == null || slot % shardCount != shard || slot / shardCount >= pool.slotCount() ||
            header.elementType() != job.elementType() || header.elementCount() > job.lanes())
        {
            return drop(DropReason.JOB_MISMATCH);
        }
        if (job.macEnabled() && !PacketMac.verify(job.macK0(), job.macK1(), buffer, 0, length))
        {
            return drop(DropReason.BAD_MAC);
        }

        final UnsafeBuffer result = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(job.lanes())]);
        final int outcome = type == DataHeaderFlyweight.TYPE_PROBE ? pool.onProbe(header, result, 0) :
            pool.onUpdate(header, result, 0, System.nanoTime());
        outcomes[outcome]++;
        return switch (outcome)
        {
            case SlotPool.COMPLETED -> new Expected(
                job.groupAddress() != 0 ? Kind.RESULT_MULTICAST : Kind.RESULT_UP, signed(job, result, resultLength(result)),
                DropReason.NONE, outcome);
            case SlotPool.SHADOW_RESULT -> new Expected(Kind.REPLY, signed(job, result, resultLength(result)), DropReason.NONE, outcome);
            case SlotPool.NACK, SlotPool.PROBE_PENDING -> new Expected(Kind.REPLY, signed(job, result, DataHeaderFlyweight.HEADER_LENGTH), DropReason.NONE, outcome);
            case SlotPool.MISMATCH ->
            {
                drops[DropReason.SLOT_MISMATCH.ordinal()]++;
                yield new Expected(Kind.DROP, null, DropReason.SLOT_MISMATCH, outcome);
            }
            default -> new Expected(Kind.DROP, null, DropReason.NONE, outcome);
        };
    }

    /**
     * The NACK the XDP program sends for a probe whose shadow-copy answer it cannot grow the packet to: the probe's
     * header with type NACK, signed when the job has a MAC (as SlotPool writes a NACK).
     */
    Expected nackInstead(final byte[] probeFrame)
    {
        final byte[] datagram = Frames.payload(probeFrame);
        final UnsafeBuffer buffer = new UnsafeBuffer(datagram);
        final XdpJobImage job = jobs.get(header.wrap(buffer, 0).jobId());
        buffer.putByte(DataHeaderFlyweight.TYPE_OFFSET, DataHeaderFlyweight.TYPE_NACK);
        buffer.putLong(DataHeaderFlyweight.MAC_OFFSET, 0);
        return new Expected(Kind.REPLY, signed(job, buffer, DataHeaderFlyweight.HEADER_LENGTH), DropReason.NONE, SlotPool.NACK);
    }

    private int resultLength(final UnsafeBuffer result)
    {
        return SlotPool.resultLength(resultHeader.wrap(result, 0));
    }

    private static byte[] signed(final XdpJobImage job, final UnsafeBuffer packet, final int length)
    {
        if (job.macEnabled())
        {
            PacketMac.sign(job.macK0(), job.macK1(), packet, 0, length);
        }
        return Arrays.copyOf(packet.byteArray(), length);
    }

    private Expected drop(final DropReason reason)
    {
        drops[reason.ordinal()]++;
        return new Expected(Kind.DROP, null, reason, -1);
    }

    private int shardOf(final int port)
    {
        for (int shard = 0; shard < dataPorts.length; shard++)
        {
            if (dataPorts[shard] == port)
            {
                return shard;
            }
        }
        return -1;
    }
}
