package io.switchml.appliance.transport;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.channel.uring.IoUring;
import io.netty.channel.uring.IoUringDatagramChannel;
import io.netty.channel.uring.IoUringIoHandler;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.LossGenerator;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * The UDP data plane: S shards, each a single-threaded Netty event loop that owns one UDP socket and
 * slot i of every job for i mod S = shard. The transport is epoll, io_uring or NIO by configuration;
 * "auto" takes epoll when its native library loads, else NIO. Shards are pinned to CPUs when asked.
 */
public final class DataPlane implements AutoCloseable
{
    /** How often each shard checks its slots against their jobs' deadlines. */
    public static final long DEADLINE_SCAN_INTERVAL_MS = 100;

    private final List<EventLoopGroup> groups = new ArrayList<>();
    private final List<Channel> channels = new ArrayList<>();
    private final String transportName;
    private final List<String> pinning = new ArrayList<>();
    private final List<DataPlaneHandler> handlers = new ArrayList<>();

    public DataPlane(
        final InetAddress bindAddress,
        final int basePort,
        final int shardCount,
        final int[] shardCpus,
        final String transport,
        final int socketBufferBytes,
        final JobRegistry registry,
        final Telemetry telemetry,
        final LossGenerator[] rxLoss,
        final LossGenerator[] txLoss,
        final Executor controlExecutor) throws InterruptedException
    {
        transportName = resolveTransport(transport);
        try
        {
            for (int shard = 0; shard < shardCount; shard++)
            {
                final int shardId = shard;
                final int cpu = shardCpus.length > 0 ? shardCpus[shard] : -1;
                final String[] pinResult = new String[1];
                final ThreadFactory threadFactory = runnable -> Thread.ofPlatform()
                    .name("switchml-shard-" + shardId).daemon().unstarted(() ->
                    {
                        if (cpu >= 0)
                        {
                            final String failure = CpuAffinity.pinCurrentThread(cpu);
                            synchronized (pinResult)
                            {
                                pinResult[0] = failure == null ? "pinned to cpu " + cpu : "not pinned: " + failure;
                                pinResult.notifyAll();
                            }
                        }
                        runnable.run();
                    });
                final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, threadFactory, ioHandlerFactory());
                groups.add(group);
                final DataPlaneHandler handler = new DataPlaneHandler(shardId, shardCount, registry,
                    telemetry.shardCounters(shard), telemetry.slotLatency(shard), telemetry.errorLog(), rxLoss[shard],
                    txLoss[shard], controlExecutor);
                handlers.add(handler);
                final Bootstrap bootstrap = new Bootstrap()
                    .group(group)
                    .channel(channelClass())
                    .option(ChannelOption.SO_RCVBUF, socketBufferBytes)
                    .option(ChannelOption.SO_SNDBUF, socketBufferBytes)
                    .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1))
                    .option(ChannelOption.MAX_MESSAGES_PER_READ, 64)
                    .handler(handler);
                final Channel channel = bootstrap.bind(new InetSocketAddress(bindAddress, basePort == 0 ? 0 : basePort + shard))
                    .sync().channel();
                channels.add(channel);
                channel.eventLoop().scheduleAtFixedRate(handler::scanSlotDeadlines, DEADLINE_SCAN_INTERVAL_MS,
                    DEADLINE_SCAN_INTERVAL_MS, TimeUnit.MILLISECONDS);
                if (cpu >= 0)
                {
                    synchronized (pinResult)
                    {
                        while (pinResult[0] == null)
                        {
                            pinResult.wait(5_000);
                        }
                    }
                    pinning.add("shard " + shard + " " + pinResult[0]);
                }
                else
                {
                    pinning.add("shard " + shard + " not pinned (no " + "switchml.appliance.shard.cpus configured)");
                }
            }
        }
        catch (final RuntimeException | InterruptedException ex)
        {
            close();
            throw ex;
        }
    }

    private static String resolveTransport(final String transport)
    {
        return switch (transport)
        {
            case "epoll" ->
            {
                if (!Epoll.isAvailable())
                {
                    throw new IllegalStateException("transport epoll requested but unavailable: " + Epoll.unavailabilityCause());
                }
                yield "epoll";
            }
            case "io_uring" ->
            {
                if (!IoUring.isAvailable())
                {
                    throw new IllegalStateException("transport io_uring requested but unavailable: " + IoUring.unavailabilityCause());
                }
                yield "io_uring";
            }
            case "nio" -> "nio";
            default -> Epoll.isAvailable() ? "epoll" : "nio";
        };
    }

    private IoHandlerFactory ioHandlerFactory()
    {
        return switch (transportName)
        {
            case "epoll" -> EpollIoHandler.newFactory();
            case "io_uring" -> IoUringIoHandler.newFactory();
            default -> NioIoHandler.newFactory();
        };
    }

    private Class<? extends Channel> channelClass()
    {
        return switch (transportName)
        {
            case "epoll" -> EpollDatagramChannel.class;
            case "io_uring" -> IoUringDatagramChannel.class;
            default -> NioDatagramChannel.class;
        };
    }

    /**
     * @return the UDP port of each shard.
     */
    public int[] ports()
    {
        final int[] ports = new int[channels.size()];
        for (int i = 0; i < ports.length; i++)
        {
            ports[i] = ((InetSocketAddress)channels.get(i).localAddress()).getPort();
        }
        return ports;
    }

    /**
     * @param maxAgeMs how recently every shard must have run its periodic task.
     * @return true when every shard's event loop is turning: feeds the systemd watchdog.
     */
    public boolean isLive(final long maxAgeMs)
    {
        final long nowNs = System.nanoTime();
        for (final DataPlaneHandler handler : handlers)
        {
            if (nowNs - handler.lastScanNs() > maxAgeMs * 1_000_000L)
            {
                return false;
            }
        }
        return true;
    }

    public String transportName()
    {
        return transportName;
    }

    /**
     * @return one line per shard saying whether it is pinned and to which CPU, or why not.
     */
    public List<String> pinning()
    {
        return List.copyOf(pinning);
    }

    public void close()
    {
        for (final Channel channel : channels)
        {
            channel.close().awaitUninterruptibly();
        }
        for (final EventLoopGroup group : groups)
        {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly();
        }
    }
}
