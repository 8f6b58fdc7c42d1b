package io.switchml.offload.tofino.model;

import io.switchml.appliance.engine.SlotPool;
import io.switchml.offload.tofino.JobInstaller.JobImage;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The reference for the differential test: the software appliance's checks (a shard's, for one shard) in front of
 * one {@link SlotPool} per job, producing the packets the appliance would send, addressed as the model addresses
 * them (a result to every member, a shadow result, NACK or PENDING to the sender).
 */
final class ReferenceAppliance
{
    private final Map<Integer, JobImage> jobs = new HashMap<>();
    private final Map<Integer, SlotPool> pools = new HashMap<>();
    private final EnumMap<DropReason, Long> drops = new EnumMap<>(DropReason.class);
    private final int[] outcomes = new int[8];
    int lastOutcome = -1;
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private final DataHeaderFlyweight result = new DataHeaderFlyweight();
    private final UnsafeBuffer resultBuffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(1024)]);

    void add(final JobImage job)
    {
        jobs.put(job.jobId(), job);
        pools.put(job.jobId(), new SlotPool(job.world(), job.slots(), job.lanes()));
    }

    long drops(final DropReason reason)
    {
        return drops.getOrDefault(reason, 0L);
    }

    int outcomes(final int outcome)
    {
        return outcomes[outcome];
    }

    int[] outcomesArray()
    {
        return outcomes.clone();
    }

    List<TofinoModel.PacketOut> process(final TofinoModel.PacketIn in)
    {
        final UnsafeBuffer packet = new UnsafeBuffer(new byte[in.length()]);
        packet.putBytes(0, in.payload(), in.offset(), in.length());
        final DropReason malformed = DataHeaderFlyweight.validate(packet, 0, in.length());
        if (malformed != DropReason.NONE)
        {
            return drop(malformed);
        }
        final DataHeaderFlyweight h = header.wrap(packet, 0);
        if (h.type() != DataHeaderFlyweight.TYPE_UPDATE && h.type() != DataHeaderFlyweight.TYPE_PROBE)
        {
            return drop(DropReason.BAD_TYPE);
        }
        final JobImage job = jobs.get(h.jobId());
        if (job == null)
        {
            return drop(DropReason.UNKNOWN_JOB);
        }
        final int rank = h.workerRank();
        if (rank >= job.world() || job.addrs()[rank] != in.srcAddr() || job.ports()[rank] != in.srcPort())
        {
            return drop(DropReason.NOT_MEMBER);
        }
        if (h.slotIndex() < 0 || h.slotIndex() >= job.slots() || h.elementType() != job.elementType() ||
            h.elementCount() > job.lanes())
        {
            return drop(DropReason.JOB_MISMATCH);
        }
        final SlotPool pool = pools.get(job.jobId());
        final int outcome = h.type() == DataHeaderFlyweight.TYPE_UPDATE ? pool.onUpdate(h, resultBuffer, 0, 0L) :
            pool.onProbe(h, resultBuffer, 0);
        outcomes[outcome]++;
        lastOutcome = outcome;
        final List<TofinoModel.PacketOut> out = new ArrayList<>();
        switch (outcome)
        {
            case SlotPool.COMPLETED ->
            {
                final int length = SlotPool.resultLength(result.wrap(resultBuffer, 0));
                for (int member = 0; member < job.world(); member++)
                {
                    out.add(new TofinoModel.PacketOut(0, 0, job.addrs()[member], job.ports()[member], bytes(length)));
                }
            }
            case SlotPool.SHADOW_RESULT ->
                out.add(new TofinoModel.PacketOut(0, 0, in.srcAddr(), in.srcPort(), bytes(SlotPool.resultLength(result.wrap(resultBuffer, 0)))));
            case SlotPool.NACK, SlotPool.PROBE_PENDING ->
                out.add(new TofinoModel.PacketOut(0, 0, in.srcAddr(), in.srcPort(), bytes(DataHeaderFlyweight.HEADER_LENGTH)));
            default ->
            {
            }
        }
        return out;
    }

    private byte[] bytes(final int length)
    {
        final byte[] bytes = new byte[length];
        resultBuffer.getBytes(0, bytes);
        return bytes;
    }

    private List<TofinoModel.PacketOut> drop(final DropReason reason)
    {
        drops.merge(reason, 1L, Long::sum);
        return List.of();
    }

    static boolean supported(final byte type)
    {
        return type == ElementType.INT32 || type == ElementType.FLOAT32;
    }
}
