package io.switchml.appliance.transport;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DatagramPacket;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.ErrorLog;
import io.switchml.appliance.telemetry.ShardCounters;
import io.switchml.appliance.telemetry.SlotLatency;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMac;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetSocketAddress;
import java.util.concurrent.Executor;

/**
 * The Netty transport's adapter for one shard: turns each received {@link DatagramPacket} into a call
 * of the shard's {@link ShardProcessor} and writes its results as datagrams, flushed once at the end of
 * each read burst. Runs on the shard's single event-loop thread. Netty allocates per packet (envelopes,
 * addresses, buffer duplicates); the {@code native} transport does not.
 */
final class DataPlaneHandler extends ChannelInboundHandlerAdapter implements ResultSender
{
    private final ShardCounters counters;
    private final ErrorLog errorLog;
    private final ShardProcessor processor;
    private final int shardId;
    private final UnsafeBuffer inView = new UnsafeBuffer(0L, 0);
    private final UnsafeBuffer outView = new UnsafeBuffer(0L, 0);
    private ChannelHandlerContext ctx;
    private InetSocketAddress currentSender;
    private ByteBuf result;
    private long burstStartNs;

    DataPlaneHandler(
        final int shardId,
        final int shardCount,
        final JobRegistry registry,
        final ShardCounters counters,
        final SlotLatency slotLatency,
        final ErrorLog errorLog,
        final LossGenerator rxLoss,
        final LossGenerator txLoss,
        final Executor controlExecutor,
        final int multicastBase,
        final boolean multicast)
    {
        this.shardId = shardId;
        this.counters = counters;
        this.errorLog = errorLog;
        this.processor = new ShardProcessor(shardId, shardCount, registry, counters, slotLatency, rxLoss, txLoss,
            controlExecutor, this, multicastBase, multicast);
    }

    ShardProcessor processor()
    {
        return processor;
    }

    @Override
    public void channelRead(final ChannelHandlerContext ctx, final Object msg)
    {
        final long nowNs = System.nanoTime();
        if (burstStartNs == 0)
        {
            burstStartNs = nowNs;
        }
        final DatagramPacket packet = (DatagramPacket)msg;
        try
        {
            this.ctx = ctx;
            final ByteBuf content = packet.content();
            final InetSocketAddress sender = packet.sender();
            currentSender = sender;
            final int length = content.readableBytes();
            wrap(inView, content, content.readerIndex(), length);
            processor.onPacket(inView, 0, length, AddressKey.of(sender), nowNs);
        }
        finally
        {
            currentSender = null;
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

    public MutableDirectBuffer claim(final int capacityBytes)
    {
        result = ctx.alloc().directBuffer(capacityBytes, capacityBytes);
        wrap(outView, result, 0, capacityBytes);
        return outView;
    }

    public int claimOffset()
    {
        return 0;
    }

    public void sign(final Job job, final int lengthBytes)
    {
        PacketMac.sign(job.macK0(), job.macK1(), outView, 0, lengthBytes);
    }

    public boolean sendToMember(final Job job, final int rank, final int lengthBytes)
    {
        return send(job.member(rank, shardId), lengthBytes);
    }

    public boolean sendToSender(final long senderKey, final int lengthBytes)
    {
        return send(currentSender, lengthBytes);
    }

    public boolean sendToGroup(final long groupKey, final int lengthBytes)
    {
        return send(AddressKey.toSocketAddress(groupKey), lengthBytes);
    }

    private boolean send(final InetSocketAddress to, final int lengthBytes)
    {
        result.writerIndex(lengthBytes);
        ctx.write(new DatagramPacket(result.retainedDuplicate(), to), ctx.voidPromise());
        return true;
    }

    public void release()
    {
        result.release();
        result = null;
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
