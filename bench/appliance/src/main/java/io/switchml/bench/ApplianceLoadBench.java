package io.switchml.bench;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.BuildInfo;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Data-plane capacity of the appliance on loopback: n lightweight senders (threads that speak the
 * protocol with pre-built int32 packets and keep s slots in flight, self-clocked like Algorithm 4)
 * drive an embedded appliance; the benchmark reports, per shard, packets/s in and out, aggregated
 * payload Gbit/s (update payload bits absorbed per second), and bytes allocated per packet on the
 * shard threads, and each shard thread's CPU time (ThreadMXBean): updates absorbed per CPU-second of a shard thread
 * is the appliance's cost figure, independent of how busy the senders keep the machine. Senders and appliance share this machine's cores, so the figures
 * are a floor on what a dedicated appliance host does.
 * <pre>
 * java ... io.switchml.bench.ApplianceLoadBench [--workers 4] [--shards 1] [--lanes 256,2233] [--slots 64]
 *     [--seconds 5] [--warmup-seconds 2] [--transport auto] [--mac off] [--sender-transport native|nio] [--gso on|off]
 *     [--gro on|off]
 * </pre>
 */
@Command(name = "bench/appliance/run.sh", mixinStandardHelpOptions = true, versionProvider = BuildInfo.VersionProvider.class,
    description = "Data-plane capacity of an embedded appliance on loopback, driven by lightweight senders.")
public final class ApplianceLoadBench implements Callable<Integer>
{
    /**
     * How the senders do their packet I/O.
     *
     * @param transport native or nio.
     * @param gso       a burst of updates as one UDP GSO message (native).
     * @param gro       results received with UDP GRO (native).
     */
    private record SenderSettings(String transport, boolean gso, boolean gro)
    {
    }

    /** What the senders' transports counted over the whole run, added up as each sender closes. */
    private static final class SenderTotals
    {
        final java.util.concurrent.atomic.AtomicLong calls = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.atomic.AtomicLong gsoMessages = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.atomic.AtomicLong groBuffers = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.atomic.AtomicLong groSegments = new java.util.concurrent.atomic.AtomicLong();
    }

    private final SenderTotals totals = new SenderTotals();

    @Spec
    private CommandSpec spec;

    @Option(names = "--workers", description = "Senders, each a worker of the job (default ${DEFAULT-VALUE}).", defaultValue = "4")
    private int workers;

    @Option(names = "--shards", description = "Appliance shards (default ${DEFAULT-VALUE}).", defaultValue = "1")
    private int shards;

    @Option(names = "--slots", description = "Pool size s, packets each sender keeps in flight (default ${DEFAULT-VALUE}).",
        defaultValue = "64")
    private int slots;

    @Option(names = "--seconds", description = "Measured seconds per k (default ${DEFAULT-VALUE}).", defaultValue = "5")
    private double seconds;

    @Option(names = "--warmup-seconds", description = "Unmeasured seconds first (default ${DEFAULT-VALUE}).", defaultValue = "2")
    private double warmupSeconds;

    @Option(names = "--transport", description = "The appliance's transport: auto, native, epoll, io_uring or nio " +
        "(default ${DEFAULT-VALUE}).", defaultValue = "auto")
    private String transport;

    @Option(names = "--mac", description = "on or off: packets carry a SipHash-2-4 MAC (default ${DEFAULT-VALUE}).",
        defaultValue = "off")
    private String mac;

    @Option(names = "--lanes", split = ",", description = "k values to run, comma-separated (default ${DEFAULT-VALUE}).",
        defaultValue = "256,2233")
    private int[] laneList;

    @Option(names = "--sender-transport", description = "native or nio (default ${DEFAULT-VALUE}).", defaultValue = "native")
    private String senderTransportOption;

    @Option(names = "--gso", description = "on or off: senders send bursts as UDP GSO messages (default ${DEFAULT-VALUE}).",
        defaultValue = "on")
    private String gso;

    @Option(names = "--gro", description = "on or off: senders receive results with UDP GRO (default ${DEFAULT-VALUE}).",
        defaultValue = "on")
    private String gro;

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new ApplianceLoadBench()).execute(args));
    }

    /** @return a usage error naming the option: picocli prints it with the usage and exits with 2. */
    private ParameterException bad(final String option, final String message)
    {
        return new ParameterException(spec.commandLine(), option + " " + message);
    }

    private boolean onOff(final String name, final String value)
    {
        return switch (value)
        {
            case "on" -> true;
            case "off" -> false;
            default -> throw bad(name, "must be on or off: " + value);
        };
    }

    @Override
    public Integer call() throws Exception
    {
        final boolean macOn = onOff("--mac", mac);
        if (!senderTransportOption.equals("native") && !senderTransportOption.equals("nio"))
        {
            throw bad("--sender-transport", "must be native or nio: " + senderTransportOption);
        }
        final SenderSettings senders = new SenderSettings(senderTransportOption, onOff("--gso", gso), onOff("--gro", gro));
        if (workers < 1 || shards < 1 || slots < 1 || seconds <= 0 || warmupSeconds < 0)
        {
            throw bad("--workers, --shards, --slots, --seconds and --warmup-seconds", "must be positive (the warm-up may be 0)");
        }

        System.out.printf(Locale.ROOT, "# appliance load: %d senders (%s transport, GSO %s, GRO %s), %d shard(s), s=%d, transport %s, " +
                "MAC %s, %d cores, %s%n",
            workers, senders.transport(), senders.gso() ? "on" : "off", senders.gro() ? "on" : "off", shards, slots, transport,
            macOn ? "on" : "off",
            Runtime.getRuntime().availableProcessors(), java.time.LocalDate.now());
        System.out.println("| k | payload bytes | shard | packets in/s | packets out/s | aggregated Gbit/s | bytes allocated/packet |" +
            " shard thread CPU (cores) | updates per shard CPU-second | shard CPU-s per million updates |");
        System.out.println("|---|---|---|---|---|---|---|---|---|---|");
        for (final int lanes : laneList)
        {
            run(workers, shards, slots, lanes, seconds, warmupSeconds, transport, macOn, senders);
        }
        System.out.printf(Locale.ROOT, "# senders: %d send system calls, %d of their messages were GSO (2+ datagrams); " +
                "%d results arrived in %d coalesced (GRO) buffers%n",
            totals.calls.get(), totals.gsoMessages.get(), totals.groSegments.get(), totals.groBuffers.get());
        return 0;
    }

    private void run(
        final int workers, final int shards, final int slots, final int lanes, final double seconds,
        final double warmupSeconds, final String transport, final boolean mac, final SenderSettings settings) throws Exception
    {
        final ApplianceContext context = new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(Files.createTempDirectory("switchml-bench").toString()).shards(shards).transport(transport);
        try (Appliance appliance = Appliance.launch(context))
        {
            final String token = "bench-token";
            final List<Sender> senders = new ArrayList<>();
            final CountDownLatch joined = new CountDownLatch(workers);
            final List<Thread> joiners = new ArrayList<>();
            final int[] jobId = new int[1];
            try (Socket creator = new Socket("127.0.0.1", appliance.controlPort()))
            {
                final BufferedReader reader = new BufferedReader(new InputStreamReader(creator.getInputStream(), StandardCharsets.UTF_8));
                creator.getOutputStream().write(("CREATE name=bench world=" + workers + " type=int32 k=" + lanes + " s=" + slots +
                    " mac=" + (mac ? "on" : "off") + " token=" + token + "\n").getBytes(StandardCharsets.UTF_8));
                final Map<String, String> created = ControlProtocol.parse(reader.readLine());
                if (!"OK".equals(created.get("")))
                {
                    throw new IllegalStateException("create refused: " + created);
                }
                jobId[0] = Integer.parseInt(created.get("job"));
            }
            for (int rank = 0; rank < workers; rank++)
            {
                final Sender sender = new Sender(appliance, jobId[0], rank, lanes, slots, shards, token, settings, totals);
                senders.add(sender);
                joiners.add(Thread.ofPlatform().start(() ->
                {
                    try
                    {
                        sender.join();
                    }
                    catch (final IOException ex)
                    {
                        throw new RuntimeException(ex);
                    }
                    joined.countDown();
                }));
            }
            joined.await();
            final AtomicBoolean running = new AtomicBoolean(true);
            final List<Thread> threads = new ArrayList<>();
            for (final Sender sender : senders)
            {
                threads.add(Thread.ofPlatform().name("bench-sender-" + sender.rank).start(() -> sender.loop(running)));
            }

            Thread.sleep((long)(warmupSeconds * 1000));
            final com.sun.management.ThreadMXBean threadBean =
                (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
            final long[] shardThreads = new long[shards];
            for (final Thread thread : Thread.getAllStackTraces().keySet())
            {
                for (int shard = 0; shard < shards; shard++)
                {
                    if (thread.getName().startsWith("switchml-shard-" + shard))
                    {
                        shardThreads[shard] = thread.threadId();
                    }
                }
            }
            final long[] inBefore = new long[shards];
            final long[] outBefore = new long[shards];
            final long[] allocBefore = new long[shards];
            final long[] slotsBefore = new long[shards];
            final long[] cpuBefore = new long[shards];
            snapshot(appliance, threadBean, shardThreads, inBefore, outBefore, allocBefore, slotsBefore, cpuBefore);
            final long startNs = System.nanoTime();
            Thread.sleep((long)(seconds * 1000));
            final long[] inAfter = new long[shards];
            final long[] outAfter = new long[shards];
            final long[] allocAfter = new long[shards];
            final long[] slotsAfter = new long[shards];
            final long[] cpuAfter = new long[shards];
            snapshot(appliance, threadBean, shardThreads, inAfter, outAfter, allocAfter, slotsAfter, cpuAfter);
            final double elapsed = (System.nanoTime() - startNs) / 1e9;
            running.set(false);
            for (final Thread thread : threads)
            {
                thread.join(5_000);
            }
            for (int shard = 0; shard < shards; shard++)
            {
                final long in = inAfter[shard] - inBefore[shard];
                final long out = outAfter[shard] - outBefore[shard];
                final double gbits = (slotsAfter[shard] - slotsBefore[shard]) * (double)workers * lanes * 4 * 8 / elapsed / 1e9;
                final double cpuSeconds = (cpuAfter[shard] - cpuBefore[shard]) / 1e9;
                System.out.printf(Locale.ROOT, "| %d | %d | %d | %.0f | %.0f | %.2f | %.1f | %.2f | %.0f | %.2f |%n", lanes,
                    DataHeaderFlyweight.packetLength(lanes), shard, in / elapsed, out / elapsed, gbits,
                    in == 0 ? 0.0 : (allocAfter[shard] - allocBefore[shard]) / (double)in, cpuSeconds / elapsed,
                    cpuSeconds <= 0 ? 0.0 : in / cpuSeconds, in == 0 ? 0.0 : cpuSeconds * 1e6 / in);
            }
            for (final Sender sender : senders)
            {
                sender.close();
            }
        }
    }

    private static void snapshot(
        final Appliance appliance, final com.sun.management.ThreadMXBean threadBean, final long[] shardThreads,
        final long[] in, final long[] out, final long[] alloc, final long[] slots, final long[] cpuNs)
    {
        final io.switchml.appliance.telemetry.Telemetry telemetry = appliance.telemetry();
        for (int shard = 0; shard < shardThreads.length; shard++)
        {
            in[shard] = telemetry.shardCounters(shard).packetsIn().get();
            out[shard] = telemetry.shardCounters(shard).packetsOut().get();
            slots[shard] = telemetry.shardCounters(shard).slotsCompleted().get();
            alloc[shard] = shardThreads[shard] == 0 ? 0 : threadBean.getThreadAllocatedBytes(shardThreads[shard]);
            cpuNs[shard] = shardThreads[shard] == 0 ? 0 : threadBean.getThreadCpuTime(shardThreads[shard]);
        }
    }

    /**
     * One virtual worker: Algorithm 4 with constant int32 payloads, one socket per shard.
     */
    private static final class Sender implements AutoCloseable
    {
        final Appliance appliance;
        final int jobId;
        final int rank;
        final int lanes;
        final int slots;
        final int shards;
        final String token;
        final SenderTotals totals;
        final Socket control;
        final io.switchml.worker.transport.DatagramTransport[] channels;
        final ByteBuffer[] packets;
        final UnsafeBuffer[] views;
        final int[] version;
        final long[] sequence;
        final long[] sentNs;
        long k0;
        long k1;
        boolean mac;

        Sender(final Appliance appliance, final int jobId, final int rank, final int lanes, final int slots, final int shards,
            final String token, final SenderSettings settings, final SenderTotals totals) throws IOException
        {
            this.totals = totals;
            this.appliance = appliance;
            this.jobId = jobId;
            this.rank = rank;
            this.lanes = lanes;
            this.slots = slots;
            this.shards = shards;
            this.token = token;
            control = new Socket("127.0.0.1", appliance.controlPort());
            channels = new io.switchml.worker.transport.DatagramTransport[shards];
            final java.net.InetAddress loopback = java.net.InetAddress.getLoopbackAddress();
            for (int shard = 0; shard < shards; shard++)
            {
                channels[shard] = "nio".equals(settings.transport()) ?
                    new io.switchml.worker.transport.NioDatagramTransport(loopback, 4 << 20, DataHeaderFlyweight.packetLength(lanes)) :
                    new io.switchml.worker.transport.NativeDatagramTransport(loopback, 4 << 20,
                        DataHeaderFlyweight.packetLength(lanes), settings.gso(), settings.gro());
            }
            packets = new ByteBuffer[slots];
            views = new UnsafeBuffer[slots];
            version = new int[slots];
            sequence = new long[slots];
            sentNs = new long[slots];
        }

        void join() throws IOException
        {
            final StringBuilder ports = new StringBuilder();
            for (int shard = 0; shard < shards; shard++)
            {
                ports.append(shard == 0 ? "" : ",").append(channels[shard].localPort());
            }
            control.getOutputStream().write(("JOIN job=" + jobId + " rank=" + rank + " token=" + token + " ports=" + ports +
                "\n").getBytes(StandardCharsets.UTF_8));
            final Map<String, String> reply = ControlProtocol.parse(
                new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8)).readLine());
            if (!"OK".equals(reply.get("")))
            {
                throw new IOException("join refused: " + reply);
            }
            mac = "on".equals(reply.get("mac"));
            k0 = Long.parseUnsignedLong(reply.get("key").substring(0, 16), 16);
            k1 = Long.parseUnsignedLong(reply.get("key").substring(16), 16);
            final int[] dataPorts = appliance.dataPorts();
            for (int shard = 0; shard < shards; shard++)
            {
                channels[shard].connect((java.net.Inet4Address)java.net.InetAddress.getLoopbackAddress(), dataPorts[shard]);
            }
            for (int slot = 0; slot < slots; slot++)
            {
                packets[slot] = ByteBuffer.allocateDirect(DataHeaderFlyweight.packetLength(lanes));
                views[slot] = new UnsafeBuffer(packets[slot]);
                sequence[slot] = slot;
            }
        }

        private void send(final int slot)
        {
            final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(views[slot], 0);
            header.writeHeader(DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, version[slot], ElementType.INT32, slot,
                sequence[slot], lanes, DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
            if (mac)
            {
                PacketMac.sign(k0, k1, views[slot], 0, DataHeaderFlyweight.packetLength(lanes));
            }
            channels[slot % shards].send(views[slot], DataHeaderFlyweight.packetLength(lanes));
            sentNs[slot] = System.nanoTime();
        }

        void loop(final AtomicBoolean running)
        {
            final DataHeaderFlyweight header = new DataHeaderFlyweight();
            final io.switchml.worker.transport.DatagramTransport.Receiver onResult = (buffer, length) ->
            {
                header.wrap(buffer, 0);
                final int slot = header.slotIndex();
                if (slot < slots && header.chunkSequence() == sequence[slot] && header.poolVersion() == version[slot])
                {
                    version[slot] ^= 1;
                    sequence[slot] += slots;
                    send(slot);
                }
            };
            for (final io.switchml.worker.transport.DatagramTransport channel : channels)
            {
                channel.onStart();
            }
            for (int slot = 0; slot < slots; slot++)
            {
                send(slot);
            }
            while (running.get())
            {
                int received = 0;
                for (final io.switchml.worker.transport.DatagramTransport channel : channels)
                {
                    received += channel.receive(onResult, 1024);
                }
                final long nowNs = System.nanoTime();
                for (int slot = 0; slot < slots; slot++)
                {
                    if (nowNs - sentNs[slot] > 50_000_000L)
                    {
                        send(slot);
                    }
                }
                for (final io.switchml.worker.transport.DatagramTransport channel : channels)
                {
                    channel.flush();
                }
                if (received == 0)
                {
                    channels[0].await(channels.length == 1 ? 5 : 1);
                }
            }
        }

        public void close() throws IOException
        {
            for (final io.switchml.worker.transport.DatagramTransport channel : channels)
            {
                totals.calls.addAndGet(channel.sendCalls());
                if (channel instanceof io.switchml.worker.transport.NativeDatagramTransport n)
                {
                    totals.gsoMessages.addAndGet(n.gsoMessages());
                    totals.groBuffers.addAndGet(n.groBuffers());
                    totals.groSegments.addAndGet(n.groSegments());
                }
            }
            control.close();
            for (final io.switchml.worker.transport.DatagramTransport channel : channels)
            {
                channel.close();
            }
        }
    }
}
