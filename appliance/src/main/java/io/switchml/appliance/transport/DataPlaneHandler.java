package io.switchml.appliance.transport;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DatagramPacket;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.engine.SlotPool;
import io.switchml.appliance.telemetry.ApplianceCounters;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.LossGenerator;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetSocketAddress;

/**
 * Decodes update packets, checks them against their job, runs the slot pool, and sends results:
 * to every member when a slot completes, to the sender alone for a retransmission into a completed
 * slot. Runs on the data plane's single event-loop thread, which owns every job's slot pool.
 * Sends are batched: written during a read burst and flushed once at its end.
 */
final class DataPlaneHandler extends ChannelInboundHandlerAdapter
{
    private final JobRegistry registry;
    private final ApplianceCounters counters;
    private final LossGenerator rxLoss;
    private final LossGenerator txLoss;
    private final UnsafeBuffer inView = new UnsafeBuffer(0L, 0);
    private final UnsafeBuffer outView = new UnsafeBuffer(0L, 0);
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();

    DataPlaneHandler(
        final JobRegistry registry, final ApplianceCounters counters, final LossGenerator rxLoss, final LossGenerator txLoss)
    {
        this.registry = registry;
        this.counters = counters;
        this.rxLoss = rxLoss;
        this.txLoss = txLoss;
    }

    @Override
    public void channelRead(final ChannelHandlerContext ctx, final Object msg)
    {
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
    }

    private void onPacket(final ChannelHandlerContext ctx, final ByteBuf content, final InetSocketAddress sender)
    {
        final int length = content.readableBytes();
        counters.add(ApplianceCounters.PACKETS_IN, 1);
        counters.add(ApplianceCounters.BYTES_IN, length);
        if (rxLoss.shouldDrop())
        {
            counters.drop(DropReason.LOSS_INJECTED);
            return;
        }

        wrap(inView, content, content.readerIndex(), length);
        final DropReason reason = DataHeaderFlyweight.validate(inView, 0, length);
        if (reason != DropReason.NONE)
        {
            counters.drop(reason);
            return;
        }
        header.wrap(inView, 0);
        if (header.type() != DataHeaderFlyweight.TYPE_UPDATE)
        {
            counters.drop(DropReason.BAD_TYPE);
            return;
        }
        final Job job = registry.activeJob(header.jobId());
        if (job == null)
        {
            counters.drop(DropReason.UNKNOWN_JOB);
            return;
        }
        final int rank = header.workerRank();
        if (rank >= job.worldSize() || !sender.equals(job.member(rank)))
        {
            counters.drop(DropReason.NOT_MEMBER);
            return;
        }
        if (header.elementType() != job.elementType() || header.slotIndex() >= job.slots() ||
            header.elementCount() > job.lanes())
        {
            counters.drop(DropReason.JOB_MISMATCH);
            return;
        }

        final int resultLength = DataHeaderFlyweight.packetLength(header.elementCount());
        final ByteBuf result = ctx.alloc().directBuffer(resultLength, resultLength);
        try
        {
            wrap(outView, result, 0, resultLength);
            final int outcome = job.pool().onUpdate(header, outView, 0, System.nanoTime());
            switch (outcome)
            {
                case SlotPool.COMPLETED ->
                {
                    counters.add(ApplianceCounters.SLOTS_COMPLETED, 1);
                    result.writerIndex(resultLength);
                    for (int member = 0, n = job.worldSize(); member < n; member++)
                    {
                        send(ctx, result, job.member(member), resultLength);
                    }
                }
                case SlotPool.SHADOW_RESULT ->
                {
                    counters.add(ApplianceCounters.RETRANSMISSIONS_SERVED, 1);
                    result.writerIndex(resultLength);
                    send(ctx, result, sender, resultLength);
                }
                case SlotPool.DUPLICATE -> counters.add(ApplianceCounters.DUPLICATES, 1);
                case SlotPool.MISMATCH -> counters.drop(DropReason.SLOT_MISMATCH);
                case SlotPool.STALE -> counters.add(ApplianceCounters.STALE_UPDATES, 1);
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

    private void send(final ChannelHandlerContext ctx, final ByteBuf result, final InetSocketAddress to, final int length)
    {
        if (txLoss.shouldDrop())
        {
            counters.add(ApplianceCounters.TX_LOSS_INJECTED, 1);
            return;
        }
        counters.add(ApplianceCounters.PACKETS_OUT, 1);
        counters.add(ApplianceCounters.BYTES_OUT, length);
        ctx.write(new DatagramPacket(result.retainedDuplicate(), to), ctx.voidPromise());
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
        System.err.println("data plane error: " + cause);
    }
}
