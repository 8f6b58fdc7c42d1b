package io.switchml.dist;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ElementType;
import io.switchml.worker.KnownTensors;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.HdrHistogram.Histogram;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code switchml demo}: an appliance and n workers on this host over real UDP sockets, all-reducing
 * a float32 tensor whose sum is known, checking every element of every result.
 */
@Command(name = "demo", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = "Start an appliance and workers on this host, all-reduce a float32 tensor repeatedly, check "
        + "every result against the exact sum, and print tensor aggregation time (TAT) and throughput.")
public final class DemoCommand implements Callable<Integer>
{
    @Option(names = "--workers", description = "Number of workers (default ${DEFAULT-VALUE}).", defaultValue = "4")
    private int workers;

    @Option(names = "--size-mb", description = "Tensor size in MB of float32 (default ${DEFAULT-VALUE}).", defaultValue = "100")
    private int sizeMb;

    @Option(names = "--iterations", description = "Timed all-reduces (default ${DEFAULT-VALUE}).", defaultValue = "10")
    private int iterations;

    @Option(names = "--warmups", description = "Untimed all-reduces first (default ${DEFAULT-VALUE}).", defaultValue = "3")
    private int warmups;

    @Option(names = {"-k", "--lanes"}, description = "Elements per packet (default ${DEFAULT-VALUE}: two datagrams fit one UDP GSO " +
        "message on loopback).", defaultValue = "8176")
    private int lanes;

    @Option(names = {"-s", "--slots"}, description = "Pool size (default ${DEFAULT-VALUE}).", defaultValue = "32")
    private int slots;

    @Option(names = "--loss-rate", description = "Drop this fraction of packets in each direction at workers and appliance (default ${DEFAULT-VALUE}).",
        defaultValue = "0")
    private double lossRate;

    @Option(names = "--mac", description = "Authenticate every data packet with SipHash-2-4 (default ${DEFAULT-VALUE}).",
        defaultValue = "false", arity = "0..1")
    private boolean mac;

    @Option(names = "--shards", description = "Appliance data-plane shards (default ${DEFAULT-VALUE}).", defaultValue = "1")
    private int shards;

    private static String secret()
    {
        final byte[] bytes = new byte[16];
        new java.security.SecureRandom().nextBytes(bytes);
        return java.util.HexFormat.of().formatHex(bytes);
    }

    @Override
    public Integer call() throws Exception
    {
        final String token = java.util.HexFormat.of().formatHex(java.security.SecureRandom.getSeed(16));
        final int elements = (int)Math.min(Integer.MAX_VALUE - 8, sizeMb * 1_000_000L / Float.BYTES);
        final java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("switchml-demo");
        // control authorization on, as in the package: a credentials file only its owner may read, an operator's and
        // the demo tenant's secret; the workers take theirs from it as a user's would (--credential-file)
        final java.nio.file.Path credentials = dir.resolve("credentials");
        java.nio.file.Files.writeString(credentials, "operator demo-operator " + secret() + "\ntenant default " + secret() + "\n");
        java.nio.file.Files.setPosixFilePermissions(credentials, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        final String credential = io.switchml.protocol.ControlCredentials.secretFor(credentials,
            io.switchml.protocol.ControlCredentials.TENANT, "default");
        final ApplianceContext applianceContext = new ApplianceContext().dataPort(0).controlPort(0).shards(shards)
            .httpPort(0).dir(dir.toString()).controlCredentialsFile(credentials.toString())
            .lossRate(lossRate).lossSeed(42);
        try (Appliance appliance = Appliance.launch(applianceContext))
        {
            System.out.printf(Locale.ROOT, "appliance: %d shard(s) on udp ports %s (%s), control tcp port %d " +
                    "(authorization on, credentials in %s); MAC %s%n",
                shards, java.util.Arrays.toString(appliance.dataPorts()), appliance.transportName(), appliance.controlPort(),
                credentials, mac ? "on" : "off (trusted host)");
            System.out.printf(Locale.ROOT, "%d workers, %d MB float32 tensor (%d elements), k=%d, s=%d, %d warm-ups + %d timed all-reduces%n",
                workers, sizeMb, elements, lanes, slots, warmups, iterations);

            final int rounds = warmups + iterations;
            final AtomicLongArray startNs = new AtomicLongArray(rounds * workers);
            final AtomicLongArray endNs = new AtomicLongArray(rounds * workers);
            final AtomicReference<String> failure = new AtomicReference<>();
            final AtomicLongArray retransmissions = new AtomicLongArray(workers);
            final CyclicBarrier barrier = new CyclicBarrier(workers);
            final Thread[] threads = new Thread[workers];
            for (int rank = 0; rank < workers; rank++)
            {
                final int r = rank;
                threads[rank] = Thread.ofPlatform().name("demo-worker-" + rank).start(() ->
                {
                    final WorkerContext context = new WorkerContext().controlPort(appliance.controlPort()).jobName("demo")
                        .token(token).credential(credential).macEnabled(mac)
                        .worldSize(workers).rank(r).elementType(ElementType.FLOAT32).lanes(lanes).slots(slots)
                        .lossRate(lossRate).lossSeed(7);
                    try (WorkerClient client = WorkerClient.connect(context))
                    {
                        if (r == 0)
                        {
                            System.out.println("worker transport: " + client.transportDescription());
                            System.out.println("appliance backend: " + client.placementDescription());
                        }
                        final float[] tensor = new float[elements];
                        for (int round = 0; round < rounds && failure.get() == null; round++)
                        {
                            KnownTensors.fill(tensor, r, round);
                            barrier.await();
                            startNs.set(round * workers + r, System.nanoTime());
                            client.allReduce(tensor, tensor, ReduceOp.SUM);
                            endNs.set(round * workers + r, System.nanoTime());
                            final String error = KnownTensors.verifyFloat(tensor, workers, round, lanes, ReduceOp.SUM);
                            if (error != null)
                            {
                                failure.compareAndSet(null, "rank " + r + " round " + round + ": " + error);
                            }
                        }
                        retransmissions.set(r, client.counters().retransmissions());
                        System.out.printf(Locale.ROOT, "  rank %d: smoothed RTT %.2f ms, retransmission timeout %.2f ms, %s%n",
                            r, client.smoothedRttNs() / 1e6, client.retransmitTimeoutNs() / 1e6, client.counters());
                    }
                    catch (final Exception | Error ex)
                    {
                        // an Error too (OutOfMemoryError with a small -Xmx): the run fails, the other ranks leave the barrier
                        failure.compareAndSet(null, "rank " + r + ": " + ex);
                        barrier.reset();
                    }
                });
            }
            for (final Thread thread : threads)
            {
                thread.join();
            }
            if (failure.get() != null)
            {
                System.out.println("FAILED: " + failure.get());
                return 1;
            }

            final Histogram tat = new Histogram(3);
            for (int round = warmups; round < rounds; round++)
            {
                long first = Long.MAX_VALUE;
                long last = Long.MIN_VALUE;
                for (int r = 0; r < workers; r++)
                {
                    first = Math.min(first, startNs.get(round * workers + r));
                    last = Math.max(last, endNs.get(round * workers + r));
                }
                tat.recordValue(last - first);
                System.out.printf(Locale.ROOT, "  all-reduce %2d: TAT %8.1f ms%n", round - warmups + 1, (last - first) / 1e6);
            }
            long totalRetransmissions = 0;
            for (int r = 0; r < workers; r++)
            {
                totalRetransmissions += retransmissions.get(r);
            }
            final double p50Ms = tat.getValueAtPercentile(50) / 1e6;
            final double p99Ms = tat.getValueAtPercentile(99) / 1e6;
            System.out.printf(Locale.ROOT, "every result of %d all-reduces checked on every rank: all %d elements within n/f of the exact sum%n",
                rounds, elements);
            System.out.printf(Locale.ROOT, "TAT p50 %.1f ms, p99 %.1f ms; aggregated elements/s at p50: %.3g (%.2f Gbit/s of float32 per worker)%n",
                p50Ms, p99Ms, elements / (p50Ms / 1e3), elements * 32.0 / (p50Ms / 1e3) / 1e9);
            System.out.printf(Locale.ROOT, "worker retransmissions %d, appliance: slots completed %d, retransmissions served %d, duplicates %d%n",
                totalRetransmissions, appliance.counter("slots_completed"), appliance.counter("retransmissions_served"),
                appliance.counter("duplicates"));
            System.out.println("PASSED");
            return 0;
        }
    }
}
