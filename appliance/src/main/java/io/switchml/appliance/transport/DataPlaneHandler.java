package io.switchml.appliance.transport;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DatagramPacket;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.engine.SlotPool;
import io.switchml.appliance.telemetry.ErrorLog;
import io.switchml.appliance.telemetry.JobCounters;
import io.switchml.appliance.telemetry.ShardCounters;
import io.switchml.appliance.telemetry.SlotLatency;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMac;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.Executor;

/**
 * One data-plane shard's packet handler: decodes update packets, checks them against their job
 * (membership and source address, slot ownership, geometry, MAC), runs the shard's slot pool, and
 * sends results: to every member when a slot completes, to the sender alone for a retransmission
 * into a completed slot. Runs on the shard's single event-loop thread, which owns the shard's share
 * of every job's slots. Sends are batched: written during a read burst and flushed once at its end.
 */
final class DataPlaneHandler extends ChannelInboundHandlerAdapter
{
    private final int shardId;
    private final int shardCount;
    private final JobRegistry registry;
    private final ShardCounters counters;
    private final SlotLatency slotLatency;
    private final ErrorLog errorLog;
    private final LossGenerator rxLoss;
    private final LossGenerator txLoss;
    private final Executor controlExecutor;
    private final UnsafeBuffer inView = new UnsafeBuffer(0L, 0);
    private final UnsafeBuffer outView = new UnsafeBuffer(0L, 0);
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private long burstStartNs;
    private volatile long lastScanNs = System.nanoTime();

    DataPlaneHandler(
        final int shardId,
        final int shardCount,
        final JobRegistry registry,
        final ShardCounters counters,
        final SlotLatency slotLatency,
        final ErrorLog errorLog,
        final LossGenerator rxLoss,
        final LossGenerator txLoss,
        final Executor controlExecutor)
    {
        this.shardId = shardId;
        this.shardCount = shardCount;
        this.registry = registry;
        this.counters = counters;
        this.slotLatency = slotLatency;
        this.errorLog = errorLog;
        this.rxLoss = rxLoss;
        this.txLoss = txLoss;
        this.controlExecutor = controlExecutor;
    }

    @Override
    public void channelRead(final ChannelHandlerContext ctx, final Object msg)
    {
        if (burstStartNs == 0)
        {
            burstStartNs = System.nanoTime();
        }
        final DatagramPacket packet = (DatagramPacket)msg;
        try
        {
            onPacket(ctx, packet.content(), packet.sender());
        }
        finally
        {
            packet.release();
        }
    }

    @Override
    public void channelReadComplete(final ChannelHandlerContext ctx)
    {
        ctx.flush();
        if (burstStartNs != 0)
        {
            counters.onDutyCycleNs(System.nanoTime() - burstStartNs);
            burstStartNs = 0;
        }
    }

    private void onPacket(final ChannelHandlerContext ctx, final ByteBuf content, final InetSocketAddress sender)
    {
        final int length = content.readableBytes();
        counters.onPacketIn(length);
        if (rxLoss.shouldDrop())
        {
            counters.onDrop(DropReason.LOSS_INJECTED);
            return;
        }

        wrap(inView, content, content.readerIndex(), length);
        final DropReason reason = DataHeaderFlyweight.validate(inView, 0, length);
        if (reason != DropReason.NONE)
        {
            counters.onDrop(reason);
            return;
        }
        header.wrap(inView, 0);
        if (header.type() != DataHeaderFlyweight.TYPE_UPDATE)
        {
            counters.onDrop(DropReason.BAD_TYPE);
            return;
        }
        final Job job = registry.activeJob(header.jobId());
        if (job == null)
        {
            counters.onDrop(DropReason.UNKNOWN_JOB);
            return;
        }
        final JobCounters jobCounters = job.counters();
        jobCounters.onPacketIn(length);
        final int rank = header.workerRank();
        if (rank >= job.worldSize() || !sender.equals(job.member(rank, shardId)))
        {
            counters.onDrop(DropReason.NOT_MEMBER);
            jobCounters.onDrop();
            return;
        }
        final SlotPool pool = job.pool(shardId);
        final int slot = header.slotIndex();
        if (pool == null || slot % shardCount != shardId || slot / shardCount >= pool.slotCount() ||
            header.elementType() != job.elementType() || header.elementCount() > job.lanes())
        {
            counters.onDrop(DropReason.JOB_MISMATCH);
            jobCounters.onDrop();
            return;
        }
        if (job.macEnabled() && !PacketMac.verify(job.macK0(), job.macK1(), inView, 0, length))
        {
            counters.onDrop(DropReason.BAD_MAC);
            jobCounters.onDrop();
            return;
        }

        final int resultLength = DataHeaderFlyweight.packetLength(header.elementCount());
        final ByteBuf result = ctx.alloc().directBuffer(resultLength, resultLength);
        try
        {
            wrap(outView, result, 0, resultLength);
            final int outcome = pool.onUpdate(header, outView, 0, System.nanoTime());
            switch (outcome)
            {
                case SlotPool.COMPLETED ->
                {
                    counters.onSlotCompleted();
                    jobCounters.onSlotCompleted();
                    slotLatency.recordNs(pool.lastCompletionLatencyNs());
                    sign(job, resultLength);
                    result.writerIndex(resultLength);
                    for (int member = 0, n = job.worldSize(); member < n; member++)
                    {
                        send(ctx, result, job.member(member, shardId), resultLength, jobCounters);
                    }
                }
                case SlotPool.SHADOW_RESULT ->
                {
                    counters.onRetransmissionServed();
                    jobCounters.onRetransmissionServed();
                    sign(job, resultLength);
                    result.writerIndex(resultLength);
                    send(ctx, result, sender, resultLength, jobCounters);
                }
                case SlotPool.DUPLICATE ->
                {
                    counters.onDuplicate();
                    jobCounters.onDuplicate();
                }
                case SlotPool.STALE -> counters.onStaleUpdate();
                case SlotPool.MISMATCH ->
                {
                    counters.onDrop(DropReason.SLOT_MISMATCH);
                    jobCounters.onDrop();
                    onOrderingViolation(job, rank, slot, header.chunkSequence(), header.elementCount());
                }
                default ->
                {
                    // absorbed: nothing to send yet
                }
            }
        }
        finally
        {
            result.release();
        }
    }

    /**
     * A contribution that disagrees with its slot's chunk, element count or exponent never happens in
     * a correct run (the randomized engine tests show it), so it means the ranks did not submit the
     * same sequence of tensors, or a member is misbehaving: end the job with a reason naming the rank
     * rather than leave the others waiting for a slot that can never complete correctly.
     */
    private void onOrderingViolation(final Job job, final int rank, final int slot, final long sequence, final int count)
    {
        if (job.markAborting())
        {
            final String reason = "ordering violation: rank " + rank + " sent chunk " + sequence + " (" + count +
                " elements) to slot " + slot + " that the other ranks use for a different chunk, element count or " +
                "exponent; all ranks must submit the same sequence of tensors";
            controlExecutor.execute(() -> registry.abort(job, reason));
        }
    }

    private void sign(final Job job, final int resultLength)
    {
        if (job.macEnabled())
        {
            PacketMac.sign(job.macK0(), job.macK1(), outView, 0, resultLength);
        }
    }

    private void send(
        final ChannelHandlerContext ctx, final ByteBuf result, final InetSocketAddress to, final int length,
        final JobCounters jobCounters)
    {
        if (txLoss.shouldDrop())
        {
            counters.onDrop(DropReason.LOSS_INJECTED);
            return;
        }
        counters.onPacketOut(length);
        jobCounters.onPacketOut();
        ctx.write(new DatagramPacket(result.retainedDuplicate(), to), ctx.voidPromise());
    }

    /**
     * Abort jobs with a slot of this shard that has been partly filled for longer than the job's slot
     * timeout, naming the ranks that did not contribute. Runs periodically on the shard's thread; the
     * abort itself (locks, TCP writes) is handed to a control thread.
     */
    void scanSlotDeadlines()
    {
        final long nowNs = System.nanoTime();
        lastScanNs = nowNs;
        final Int2ObjectHashMap<Job> jobs = registry.activeJobs();
        for (final Job job : jobs.values())
        {
            final SlotPool pool = job.pool(shardId);
            if (pool == null)
            {
                continue;
            }
            final int cell = pool.findExpired(nowNs - job.slotTimeoutMs() * 1_000_000L);
            if (cell >= 0 && job.markAborting())
            {
                final int localSlot = cell % pool.slotCount();
                final int version = cell / pool.slotCount();
                final String reason = "slot " + (localSlot * shardCount + shardId) + " version " + version + " (chunk " +
                    pool.chunkSequence(cell) + ") incomplete for more than " + job.slotTimeoutMs() + " ms; missing ranks " +
                    Arrays.toString(pool.missingRanks(cell));
                controlExecutor.execute(() -> registry.abort(job, reason));
            }
        }
    }

    /**
     * @return when this shard's thread last ran its periodic deadline scan: a liveness signal.
     */
    long lastScanNs()
    {
        return lastScanNs;
    }

    private static void wrap(final UnsafeBuffer view, final ByteBuf buf, final int index, final int length)
    {
        if (buf.hasMemoryAddress())
        {
            view.wrap(buf.memoryAddress() + index, length);
        }
        else
        {
            view.wrap(buf.internalNioBuffer(index, length).slice(), 0, length);
        }
    }

    @Override
    public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
    {
        errorLog.record(cause);
    }
}
