package io.switchml.appliance.transport;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.ApplianceCounters;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.LossGenerator;

import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * The UDP data plane: one socket served by one event-loop thread through Netty, epoll when the
 * native transport loads and NIO otherwise.
 */
public final class DataPlane implements AutoCloseable
{
    private final EventLoopGroup group;
    private final Channel channel;
    private final String transportName;

    public DataPlane(
        final InetAddress bindAddress,
        final int port,
        final String transport,
        final int socketBufferBytes,
        final JobRegistry registry,
        final ApplianceCounters counters,
        final LossGenerator rxLoss,
        final LossGenerator txLoss) throws InterruptedException
    {
        final boolean useEpoll = switch (transport)
        {
            case "epoll" ->
            {
                if (!Epoll.isAvailable())
                {
                    throw new IllegalStateException("transport epoll requested but unavailable: " + Epoll.unavailabilityCause());
                }
                yield true;
            }
            case "nio" -> false;
            default -> Epoll.isAvailable();
        };
        transportName = useEpoll ? "epoll" : "nio";
        group = new MultiThreadIoEventLoopGroup(1, useEpoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
        final Bootstrap bootstrap = new Bootstrap()
            .group(group)
            .channel(useEpoll ? EpollDatagramChannel.class : NioDatagramChannel.class)
            .option(ChannelOption.SO_RCVBUF, socketBufferBytes)
            .option(ChannelOption.SO_SNDBUF, socketBufferBytes)
            .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1))
            .option(ChannelOption.MAX_MESSAGES_PER_READ, 64)
            .handler(new DataPlaneHandler(registry, counters, rxLoss, txLoss));
        try
        {
            channel = bootstrap.bind(new InetSocketAddress(bindAddress, port)).sync().channel();
        }
        catch (final RuntimeException | InterruptedException ex)
        {
            group.shutdownGracefully(0, 0, java.util.concurrent.TimeUnit.MILLISECONDS);
            throw ex;
        }
    }

    public int port()
    {
        return ((InetSocketAddress)channel.localAddress()).getPort();
    }

    public String transportName()
    {
        return transportName;
    }

    public void close()
    {
        channel.close().awaitUninterruptibly();
        group.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS).awaitUninterruptibly();
    }
}
