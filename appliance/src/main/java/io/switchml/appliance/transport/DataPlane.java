package io.switchml.appliance.transport;

import io.switchml.protocol.udp.NativeUdp;
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
import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMacBatch;
import org.agrona.concurrent.AgentRunner;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The UDP data plane: S shards, each a single thread that owns one UDP socket and slot i of every job for
 * i mod S = shard. The per-packet logic is a {@link ShardProcessor}; the transport moving the datagrams is,
 * by configuration:
 * <ul>
 *     <li>{@code native}: each shard an Agrona agent on its own thread batching with recvmmsg/sendmmsg
 *     through the JDK's foreign function interface, with no allocation per packet
 *     ({@link NativeShardAgent});</li>
 *     <li>{@code epoll}, {@code io_uring} or {@code nio}: each shard a single-threaded Netty event loop
 *     ({@link DataPlaneHandler});</li>
 *     <li>{@code auto}: native where it works (Linux, an IPv4 bind address), else epoll when its library
 *     loads, else NIO.</li>
 * </ul>
 * Shards are pinned to CPUs when asked.
 */
public final class DataPlane implements AutoCloseable
{
    /** How often each shard checks its slots against their jobs' deadlines. */
    public static final long DEADLINE_SCAN_INTERVAL_MS = 100;
    /** Lanes of the packets the MAC warm-up hashes (float32 at k = 256: 1,064 bytes, sixteen blocks of the lanes). */
    private static final int WARM_UP_LANES = 256;

    private final List<EventLoopGroup> groups = new ArrayList<>();
    private final List<Channel> channels = new ArrayList<>();
    private final List<NativeShardAgent> agents = new ArrayList<>();
    private final List<AgentRunner> runners = new ArrayList<>();
    private final List<ShardProcessor> processors = new ArrayList<>();
    private final List<String> pinning = new ArrayList<>();
    private final List<String> details = new ArrayList<>();
    private final String transportName;
    private final int[] ports;
    private final AtomicLongArray shardThreadIds;

    /**
     * Open every shard's socket and start the shards.
     *
     * @param context         concluded configuration: bind address, ports, shards, CPUs, transport, socket
     *                        buffers, batch size and multicast options.
     * @param rxLoss          loss generator of each shard's receive direction.
     * @param txLoss          loss generator of each shard's send direction.
     * @param controlExecutor where shards hand job aborts.
     */
    public DataPlane(
        final ApplianceContext context,
        final JobRegistry registry,
        final Telemetry telemetry,
        final LossGenerator[] rxLoss,
        final LossGenerator[] txLoss,
        final Executor controlExecutor) throws IOException, InterruptedException
    {
        final InetAddress bindAddress = context.resolvedBindAddress();
        final int shardCount = context.shards();
        final int[] shardCpus = context.resolvedShardCpus();
        transportName = resolveTransport(context.transport(), bindAddress);
        ports = new int[shardCount];
        shardThreadIds = new AtomicLongArray(shardCount);
        for (int shard = 0; shard < shardCount; shard++)
        {
            shardThreadIds.set(shard, -1);
        }
        final int basePort = context.dataPort();
        final boolean multicast = context.multicastEnabled();
        final int multicastBase = context.resolvedMulticastBase();
        try
        {
            for (int shard = 0; shard < shardCount; shard++)
            {
                final int shardId = shard;
                final int cpu = shardCpus.length > 0 ? shardCpus[shard] : -1;
                final int bindPort = basePort == 0 ? 0 : basePort + shard;
                final ShardProcessor processor;
                if ("native".equals(transportName))
                {
                    final NativeShardAgent agent = new NativeShardAgent(shardId,
                        sender -> new ShardProcessor(shardId, shardCount, registry, telemetry.shardCounters(shardId),
                            telemetry.slotLatency(shardId), rxLoss[shardId], txLoss[shardId], controlExecutor, sender,
                            multicastBase, multicast),
                        telemetry.shardCounters(shardId), telemetry.errorLog(), (Inet4Address)bindAddress, bindPort, cpu,
                        context.nativeBatch(), context.nativeIdleSpins(), context.socketBufferBytes(), multicast ? context.multicastTtl() : -1,
                        DEADLINE_SCAN_INTERVAL_MS * 1_000_000L);
                    agents.add(agent);
                    processor = agent.processor();
                    ports[shard] = agent.port();
                    processor.multicastPort(multicastPort(context, ports[shard]));
                    final AgentRunner runner = new AgentRunner(agent.idleStrategy(), telemetry.errorLog(), null, agent);
                    runners.add(runner);
                    AgentRunner.startOnThread(runner, runnable -> shardThread(shardId,
                        Thread.ofPlatform().name("switchml-shard-" + shardId).daemon().unstarted(runnable)));
                    pinning.add("shard " + shard + " " + agent.awaitPinning(5_000));
                    details.add("shard " + shard + " native: " + agent.description());
                    if (shard == 0)
                    {
                        // the shards check a receive batch's MACs several at once: at once with the native library,
                        // with the Java lanes once this has compiled their code, before the appliance is ready (a few
                        // tenths of a second), not beside its first jobs
                        PacketMacBatch.warmUp(
                            DataHeaderFlyweight.packetLength(ElementType.FLOAT32, WARM_UP_LANES), PacketMacBatch.WARM_UP_CALLS);
                    }
                }
                else
                {
                    final DataPlaneHandler handler = new DataPlaneHandler(shardId, shardCount, registry,
                        telemetry.shardCounters(shard), telemetry.slotLatency(shard), telemetry.errorLog(), rxLoss[shard],
                        txLoss[shard], controlExecutor, multicastBase, multicast);
                    processor = handler.processor();
                    ports[shard] = startNettyShard(shardId, cpu, bindAddress, bindPort, context.socketBufferBytes(),
                        multicast ? context.multicastTtl() : -1, handler);
                    processor.multicastPort(multicastPort(context, ports[shard]));
                    details.add("shard " + shard + " netty " + transportName);
                }
                processors.add(processor);
            }
        }
        catch (final IOException | RuntimeException | InterruptedException ex)
        {
            close();
            throw ex;
        }
    }

    private static int multicastPort(final ApplianceContext context, final int shardPort)
    {
        return context.multicastPort() != 0 ? context.multicastPort() : shardPort + ApplianceContext.MULTICAST_PORT_OFFSET;
    }

    private int startNettyShard(
        final int shardId, final int cpu, final InetAddress bindAddress, final int bindPort, final int socketBufferBytes,
        final int multicastTtl, final DataPlaneHandler handler) throws InterruptedException, IOException
    {
        final String[] pinResult = new String[1];
        final ThreadFactory threadFactory = runnable -> shardThread(shardId, Thread.ofPlatform()
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
            }));
        final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, threadFactory, ioHandlerFactory());
        groups.add(group);
        final Bootstrap bootstrap = new Bootstrap()
            .group(group)
            .channel(channelClass())
            .option(ChannelOption.SO_RCVBUF, socketBufferBytes)
            .option(ChannelOption.SO_SNDBUF, socketBufferBytes)
            .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1))
            .option(ChannelOption.MAX_MESSAGES_PER_READ, 64)
            .handler(handler);
        if (multicastTtl >= 0)
        {
            bootstrap.option(ChannelOption.IP_MULTICAST_TTL, multicastTtl);
            final NetworkInterface multicastInterface = bindAddress.isAnyLocalAddress() ?
                null : NetworkInterface.getByInetAddress(bindAddress);
            if (multicastInterface != null)
            {
                bootstrap.option(ChannelOption.IP_MULTICAST_IF, multicastInterface);
            }
        }
        final Channel channel = bootstrap.bind(new InetSocketAddress(bindAddress, bindPort)).sync().channel();
        channels.add(channel);
        final ShardProcessor processor = handler.processor();
        channel.eventLoop().scheduleAtFixedRate(() -> processor.scanSlotDeadlines(System.nanoTime()),
            DEADLINE_SCAN_INTERVAL_MS, DEADLINE_SCAN_INTERVAL_MS, TimeUnit.MILLISECONDS);
        if (cpu >= 0)
        {
            synchronized (pinResult)
            {
                while (pinResult[0] == null)
                {
                    pinResult.wait(5_000);
                }
            }
            pinning.add("shard " + shardId + " " + pinResult[0]);
        }
        else
        {
            pinning.add("shard " + shardId + " not pinned (no " + "switchml.appliance.shard.cpus configured)");
        }
        return ((InetSocketAddress)channel.localAddress()).getPort();
    }

    /**
     * @param transport   configured transport: auto, native, epoll, io_uring or nio.
     * @param bindAddress the data plane's address.
     * @return the transport that will run.
     * @throws IllegalStateException when the configured one cannot run here, saying why.
     */
    public static String resolveTransport(final String transport, final InetAddress bindAddress)
    {
        return switch (transport)
        {
            case "native" ->
            {
                if (!NativeUdp.isAvailable())
                {
                    throw new IllegalStateException("transport native requested but unavailable: " + NativeUdp.unavailabilityCause());
                }
                if (!(bindAddress instanceof Inet4Address))
                {
                    throw new IllegalStateException("transport native needs an IPv4 bind address: " + bindAddress);
                }
                yield "native";
            }
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
            default ->
            {
                if (NativeUdp.isAvailable() && bindAddress instanceof Inet4Address)
                {
                    yield "native";
                }
                yield Epoll.isAvailable() ? "epoll" : "nio";
            }
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
     * @return the id of a shard's thread (for its CPU time), or -1 before it has one.
     */
    public long shardThreadId(final int shard)
    {
        return shardThreadIds.get(shard);
    }

    private Thread shardThread(final int shard, final Thread thread)
    {
        shardThreadIds.set(shard, thread.threadId());
        return thread;
    }

    /**
     * @return the UDP port of each shard.
     */
    public int[] ports()
    {
        return ports.clone();
    }

    /**
     * @param maxAgeMs how recently every shard must have run its periodic task.
     * @return true when every shard's thread is turning: feeds the systemd watchdog.
     */
    public boolean isLive(final long maxAgeMs)
    {
        final long nowNs = System.nanoTime();
        for (final ShardProcessor processor : processors)
        {
            if (nowNs - processor.lastScanNs() > maxAgeMs * 1_000_000L)
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

    /**
     * @return one line per shard describing its transport (batch and socket buffer sizes for native).
     */
    public List<String> details()
    {
        return List.copyOf(details);
    }

    /**
     * @return results the native shards dropped because their send batch was full; 0 for Netty.
     */
    public long sendDrops()
    {
        long total = 0;
        for (final NativeShardAgent agent : agents)
        {
            total += agent.sendDrops();
        }
        return total;
    }

    public void close()
    {
        for (final AgentRunner runner : runners)
        {
            runner.close();
        }
        for (final NativeShardAgent agent : agents)
        {
            agent.closeResources();
        }
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
