package io.switchml.worker.bench;

import io.switchml.protocol.ElementType;
import io.switchml.worker.TransportOptions;
import io.switchml.worker.WorkerContext;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.function.ToLongFunction;

/**
 * {@code switchml worker bench}: the SwitchML paper's tensor aggregation microbenchmark (section 6.1). Joins a job
 * as one rank, or as every rank of it on threads of this JVM with {@code --ranks}, runs warm-up all-reduces and then
 * timed ones of a tensor whose sum is known, checks every result, and reports the tensor aggregation time (TAT)
 * p50/p99/max, aggregated tensor elements per second (ATE/s) and retransmissions, as text or as one JSON object.
 * <p>
 * Exit codes: {@value #EXIT_OK} all results right, {@value #EXIT_WRONG_RESULT} a result was wrong,
 * {@value #EXIT_BAD_ARGUMENTS} bad arguments, {@value #EXIT_JOB_FAILED} the job failed.
 */
@Command(name = "bench", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = {
        "Tensor aggregation microbenchmark (SwitchML paper, section 6.1): warm-ups, then timed all-reduces of a " +
            "tensor whose sum is known, every result checked; TAT p50/p99/max, aggregated elements/s, retransmissions.",
        "Run one rank per process with --world/--rank, or all ranks of a job as threads here with --ranks.",
        "Exit codes: 0 ok, 1 wrong result, 2 bad arguments, 3 job failure."})
public final class WorkerBenchCommand implements Callable<Integer>
{
    /** Every result was right. */
    public static final int EXIT_OK = 0;
    /** A result was wrong. */
    public static final int EXIT_WRONG_RESULT = 1;
    /** The arguments were invalid. */
    public static final int EXIT_BAD_ARGUMENTS = 2;
    /** The job failed: refused join, abort, no progress, or an unreachable appliance. */
    public static final int EXIT_JOB_FAILED = 3;

    private static final long BYTES_PER_MB = 1_000_000L;
    /** Both element types, float32 and int32, take four bytes. */
    private static final int ELEMENT_BYTES = 4;

    @Spec
    private CommandSpec spec;

    @Mixin
    private TransportOptions transport;

    @Option(names = "--job", description = "Job name, the same on every rank (default ${DEFAULT-VALUE}).", defaultValue = "bench")
    private String jobName;

    @Option(names = "--token",
        description = "The job's shared secret, the same on every rank (default: $SWITCHML_JOB_TOKEN; with --ranks, a random one).",
        defaultValue = "${env:SWITCHML_JOB_TOKEN}")
    private String token;

    @Option(names = "--world", description = "Number of ranks in the job (with --ranks: optional, must equal it).")
    private Integer worldSize;

    @Option(names = "--rank", description = "This worker's rank, 0 .. world-1 (not with --ranks).")
    private Integer rank;

    @Option(names = "--ranks", description = "Run all N ranks of the job as threads in this JVM, against the given appliance.")
    private Integer localRanks;

    @Option(names = "--type", description = "float32 or int32 (default ${DEFAULT-VALUE}).", defaultValue = "float32")
    private String type;

    @Option(names = "--size-mb", description = "Tensor size in MB (10^6 bytes) of 4-byte elements (default ${DEFAULT-VALUE}).",
        defaultValue = "100")
    private long sizeMb;

    @Option(names = "--elements", description = "Tensor length in elements; overrides --size-mb.")
    private Integer elements;

    @Option(names = "--warmups", description = "Untimed all-reduces first (default ${DEFAULT-VALUE}).", defaultValue = "10")
    private int warmups;

    @Option(names = "--iterations", description = "Timed all-reduces (default ${DEFAULT-VALUE}).", defaultValue = "100")
    private int iterations;

    @Option(names = "--loss-rate", description = "Drop this fraction of packets each way, for tests (default ${DEFAULT-VALUE}).",
        defaultValue = "0")
    private double lossRate;

    @Option(names = "--loss-seed", description = "Seed of the loss generator (default ${DEFAULT-VALUE}).", defaultValue = "1")
    private long lossSeed;

    @Option(names = "--barrier", negatable = true, defaultValue = "true", fallbackValue = "true",
        description = "Meet the other ranks (a one-element all-reduce) before each all-reduce, so a rank's TAT excludes " +
            "waiting for ranks still checking the previous result (default ${DEFAULT-VALUE}).")
    private boolean barrier;

    @Option(names = "--values", defaultValue = "known",
        description = "float32 tensors: known (pseudo-random, a new block exponent every 4096 elements, each element " +
            "checked within the quantization bound) or peers ((rank+1) * (1 + i %% 8), the tensor bench/rack's Gloo " +
            "and MPI harnesses use, cheap to check) (default ${DEFAULT-VALUE}).")
    private String values;

    @Option(names = "--json", description = "Print one JSON object with every figure instead of text.")
    private boolean json;

    @Override
    public Integer call()
    {
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();

        final int world;
        final int firstRank;
        final int rankCount;
        final int tensorLength;
        final byte elementType;
        final WorkerContext[] contexts;
        try
        {
            elementType = ElementType.parse(type);
            if (localRanks != null)
            {
                if (localRanks < 1)
                {
                    throw new IllegalArgumentException("--ranks must be positive: " + localRanks);
                }
                if (rank != null)
                {
                    throw new IllegalArgumentException("--rank cannot be combined with --ranks, which runs every rank");
                }
                if (worldSize != null && !worldSize.equals(localRanks))
                {
                    throw new IllegalArgumentException("--world " + worldSize + " differs from --ranks " + localRanks);
                }
                world = localRanks;
                firstRank = 0;
                rankCount = localRanks;
                if (token == null)
                {
                    token = HexFormat.of().formatHex(new SecureRandom().generateSeed(16));
                }
            }
            else
            {
                if (worldSize == null || rank == null)
                {
                    throw new IllegalArgumentException("give --world and --rank, or --ranks N to run every rank here");
                }
                world = worldSize;
                firstRank = rank;
                rankCount = 1;
            }
            if (elements != null)
            {
                tensorLength = elements;
            }
            else
            {
                if (sizeMb < 1)
                {
                    throw new IllegalArgumentException("--size-mb must be positive: " + sizeMb);
                }
                tensorLength = (int)Math.min(Integer.MAX_VALUE - 8, sizeMb * BYTES_PER_MB / ELEMENT_BYTES);
            }
            if (tensorLength < 1)
            {
                throw new IllegalArgumentException("--elements must be positive: " + tensorLength);
            }
            if (warmups < 0)
            {
                throw new IllegalArgumentException("--warmups must not be negative: " + warmups);
            }
            if (iterations < 1)
            {
                throw new IllegalArgumentException("--iterations must be positive: " + iterations);
            }
            if (!"known".equals(values) && !"peers".equals(values))
            {
                throw new IllegalArgumentException("--values must be known or peers: " + values);
            }
            contexts = new WorkerContext[rankCount];
            for (int i = 0; i < rankCount; i++)
            {
                contexts[i] = transport.applyTo(new WorkerContext()).jobName(jobName).token(token)
                    .worldSize(world).rank(firstRank + i).elementType(elementType).lossRate(lossRate).lossSeed(lossSeed)
                    .conclude();
            }
        }
        catch (final IllegalArgumentException ex)
        {
            err.println("switchml worker bench: " + ex.getMessage());
            err.flush();
            return EXIT_BAD_ARGUMENTS;
        }

        final RankBenchmark.Result[] results = runRanks(contexts, tensorLength);

        final Histogram tatNs = new Histogram(1, RankBenchmark.HIGHEST_TRACKABLE_NS, 3);
        String wrongResult = null;
        String jobFailure = null;
        for (final RankBenchmark.Result result : results)
        {
            tatNs.add(result.tatNs);
            wrongResult = wrongResult == null ? result.wrongResult : wrongResult;
            jobFailure = jobFailure == null ? result.jobFailure : jobFailure;
        }
        final int exitCode = wrongResult != null ? EXIT_WRONG_RESULT : jobFailure != null ? EXIT_JOB_FAILED : EXIT_OK;
        final String error = wrongResult != null ? wrongResult : jobFailure;
        final Report report = new Report(world, firstRank, tensorLength, elementType, exitCode, error, tatNs, results);
        if (json)
        {
            out.println(report.json());
        }
        else
        {
            report.text(out);
        }
        out.flush();
        if (error != null)
        {
            err.println("switchml worker bench: " + (exitCode == EXIT_WRONG_RESULT ? "WRONG RESULT: " : "job failed: ") + error);
            err.flush();
        }
        return exitCode;
    }

    private boolean peerValues()
    {
        return "peers".equals(values);
    }

    private RankBenchmark.Result[] runRanks(final WorkerContext[] contexts, final int tensorLength)
    {
        final RankBenchmark.Result[] results = new RankBenchmark.Result[contexts.length];
        if (contexts.length == 1)
        {
            results[0] = RankBenchmark.run(contexts[0], tensorLength, warmups, iterations, barrier, peerValues());
            return results;
        }
        final Thread[] threads = new Thread[contexts.length];
        for (int i = 0; i < contexts.length; i++)
        {
            final int index = i;
            threads[i] = Thread.ofPlatform().name("switchml-bench-rank-" + contexts[i].rank()).start(() ->
            {
                try
                {
                    results[index] = RankBenchmark.run(
                        contexts[index], tensorLength, warmups, iterations, barrier, peerValues());
                }
                catch (final RuntimeException | Error ex)
                {
                    final RankBenchmark.Result failed = new RankBenchmark.Result(contexts[index].rank());
                    failed.jobFailure = "rank " + contexts[index].rank() + ": " + ex;
                    results[index] = failed;
                }
            });
        }
        for (final Thread thread : threads)
        {
            boolean interrupted = false;
            while (true)
            {
                try
                {
                    thread.join();
                    break;
                }
                catch (final InterruptedException ex)
                {
                    interrupted = true;
                }
            }
            if (interrupted)
            {
                Thread.currentThread().interrupt();
            }
        }
        return results;
    }

    /** The figures of one benchmark run, as text or JSON. */
    private final class Report
    {
        private final int world;
        private final int firstRank;
        private final int tensorLength;
        private final byte elementType;
        private final int exitCode;
        private final String error;
        private final Histogram tatNs;
        private final RankBenchmark.Result[] results;

        Report(
            final int world, final int firstRank, final int tensorLength, final byte elementType, final int exitCode,
            final String error, final Histogram tatNs, final RankBenchmark.Result[] results)
        {
            this.world = world;
            this.firstRank = firstRank;
            this.tensorLength = tensorLength;
            this.elementType = elementType;
            this.exitCode = exitCode;
            this.error = error;
            this.tatNs = tatNs;
            this.results = results;
        }

        private long sum(final ToLongFunction<RankBenchmark.Result> field)
        {
            long total = 0;
            for (final RankBenchmark.Result result : results)
            {
                total += field.applyAsLong(result);
            }
            return total;
        }

        private static double ms(final double ns)
        {
            return ns / 1e6;
        }

        /** Elements per second for a TAT, NaN when there is none. */
        private double elementsPerSec(final double tatNs)
        {
            return tatNs > 0 ? tensorLength / (tatNs / 1e9) : Double.NaN;
        }

        private long tensorBytes()
        {
            return (long)tensorLength * ELEMENT_BYTES;
        }

        String json()
        {
            final boolean any = tatNs.getTotalCount() > 0;
            final double p50Ns = any ? tatNs.getValueAtPercentile(50) : Double.NaN;
            final double meanNs = any ? tatNs.getMean() : Double.NaN;
            final JsonWriter w = new JsonWriter().beginObject()
                .field("ok", exitCode == EXIT_OK)
                .field("exit_code", exitCode)
                .field("error", error)
                .field("job", jobName)
                .field("tenant", transport.tenant())
                .field("world", world)
                .field("first_rank", firstRank)
                .field("local_ranks", results.length)
                .field("type", ElementType.name(elementType))
                .field("elements", tensorLength)
                .field("tensor_bytes", tensorBytes())
                .field("lanes", transport.lanes())
                .field("slots", transport.slots())
                .field("mac", transport.macEnabled())
                .field("fast_retransmit", transport.fastRetransmit())
                .field("barrier", barrier)
                .field("values", values)
                .field("loss_rate", lossRate)
                .field("warmups", warmups)
                .field("iterations", iterations)
                .field("rounds_checked", sum(r -> r.roundsChecked))
                .field("samples", tatNs.getTotalCount())
                .field("tat_p50_ms", ms(p50Ns))
                .field("tat_p99_ms", any ? ms(tatNs.getValueAtPercentile(99)) : Double.NaN)
                .field("tat_max_ms", any ? ms(tatNs.getMaxValue()) : Double.NaN)
                .field("tat_min_ms", any ? ms(tatNs.getMinValue()) : Double.NaN)
                .field("tat_mean_ms", ms(meanNs))
                .field("ate_per_sec_p50", elementsPerSec(p50Ns))
                .field("ate_per_sec_mean", elementsPerSec(meanNs))
                .field("tensor_gbit_per_sec_p50", elementsPerSec(p50Ns) * ELEMENT_BYTES * 8 / 1e9)
                .field("retransmissions", sum(r -> r.retransmissionsTimed))
                .field("retransmissions_total", sum(r -> r.retransmissionsTotal))
                .field("fast_retransmissions_total", sum(r -> r.fastRetransmissionsTotal))
                .field("tail_probes_total", sum(r -> r.tailProbesTotal))
                .field("probes_total", sum(r -> r.probesTotal))
                .field("nacks_total", sum(r -> r.nacksTotal))
                .field("pendings_total", sum(r -> r.pendingsTotal))
                .field("packets_sent", sum(r -> r.packetsSent))
                .field("packets_received", sum(r -> r.packetsReceived))
                .field("stale_results", sum(r -> r.staleResults))
                .field("spurious_probes_total", sum(r -> r.spuriousProbes))
                .field("macs_in_lanes_total", sum(r -> r.macsInLanes))
                .field("selector_waits_total", sum(r -> r.selectorWaits))
                .field("coalesced_sleeps_total", sum(r -> r.coalescedSleeps))
                .field("spurious_retransmissions_total", sum(r -> r.spuriousRetransmissions))
                .field("transport", results.length > 0 ? results[0].transport : "")
                .field("backend", results.length > 0 ? results[0].backend : "")
                .beginArray("ranks");
            for (final RankBenchmark.Result result : results)
            {
                final Histogram h = result.tatNs;
                final boolean has = h.getTotalCount() > 0;
                w.beginObject()
                    .field("rank", result.rank)
                    .field("ok", result.ok())
                    .field("rounds_checked", result.roundsChecked)
                    .field("samples", h.getTotalCount())
                    .field("tat_p50_ms", has ? ms(h.getValueAtPercentile(50)) : Double.NaN)
                    .field("tat_p99_ms", has ? ms(h.getValueAtPercentile(99)) : Double.NaN)
                    .field("tat_max_ms", has ? ms(h.getMaxValue()) : Double.NaN)
                    .field("ate_per_sec_p50", has ? elementsPerSec(h.getValueAtPercentile(50)) : Double.NaN)
                    .field("retransmissions", result.retransmissionsTimed)
                    .field("retransmissions_total", result.retransmissionsTotal)
                    .field("smoothed_rtt_ms", ms(result.smoothedRttNs))
                    .field("first_tat_ms", result.firstTatNs >= 0 ? ms(result.firstTatNs) : Double.NaN)
                    // the process's CPU: one rank's figure only where the process runs one rank
                    .field("timed_cpu_sec", result.timedCpuNs >= 0 && results.length == 1 ?
                        result.timedCpuNs / 1e9 : Double.NaN)
                    .beginArray("tats_ms");
                for (int i = 0; i < result.timed; i++)
                {
                    w.value(ms(result.tatsInOrderNs[i]));
                }
                w.endArray().endObject();
            }
            return w.endArray().endObject().toString();
        }

        void text(final PrintWriter out)
        {
            out.printf(Locale.ROOT, "job %s: world %d, %s, %s %d elements (%.1f MB), k=%d, s=%d, MAC %s, %d warm-ups + %d timed " +
                    "all-reduces%s%n",
                jobName, world, results.length == 1 ? "rank " + firstRank : "ranks 0-" + (results.length - 1) + " on threads here",
                ElementType.name(elementType), tensorLength, tensorBytes() / 1e6, transport.lanes(), transport.slots(),
                transport.macEnabled() ? "on" : "off", warmups, iterations,
                barrier ? ", barrier before each" : "");
            if (results.length > 0 && !results[0].transport.isEmpty())
            {
                out.println("transport: " + results[0].transport);
                out.println("backend: " + results[0].backend);
            }
            for (final RankBenchmark.Result result : results)
            {
                final Histogram h = result.tatNs;
                if (h.getTotalCount() > 0)
                {
                    out.printf(Locale.ROOT, "  rank %d: TAT p50 %.2f ms, p99 %.2f ms, max %.2f ms; retransmissions %d (timed) / %d " +
                            "(all); smoothed RTT %.3f ms%n",
                        result.rank, ms(h.getValueAtPercentile(50)), ms(h.getValueAtPercentile(99)), ms(h.getMaxValue()),
                        result.retransmissionsTimed, result.retransmissionsTotal, ms(result.smoothedRttNs));
                }
            }
            if (exitCode == EXIT_OK)
            {
                out.printf(Locale.ROOT, "every result checked: %d all-reduces, %s%n", sum(r -> r.roundsChecked),
                    elementType == ElementType.FLOAT32 ? "every element within n/f (+1/2 ulp) of the exact sum" : "bit-exact int32 sums");
                final double p50Ns = tatNs.getValueAtPercentile(50);
                out.printf(Locale.ROOT, "TAT over %d samples: p50 %.2f ms, p99 %.2f ms, max %.2f ms, mean %.2f ms%n",
                    tatNs.getTotalCount(), ms(p50Ns), ms(tatNs.getValueAtPercentile(99)), ms(tatNs.getMaxValue()),
                    ms(tatNs.getMean()));
                out.printf(Locale.ROOT, "aggregated tensor elements/s: %.4g at p50, %.4g at mean (%.2f Gbit/s of tensor per worker at p50)%n",
                    elementsPerSec(p50Ns), elementsPerSec(tatNs.getMean()), elementsPerSec(p50Ns) * ELEMENT_BYTES * 8 / 1e9);
                out.printf(Locale.ROOT, "retransmissions: %d in timed all-reduces, %d in all (%d after a NACK); probes %d (%d " +
                    "tail), NACKs %d, PENDINGs %d; spurious: %d probes, %d resends (packets sent %d)%n",
                    sum(r -> r.retransmissionsTimed), sum(r -> r.retransmissionsTotal), sum(r -> r.fastRetransmissionsTotal),
                    sum(r -> r.probesTotal), sum(r -> r.tailProbesTotal), sum(r -> r.nacksTotal), sum(r -> r.pendingsTotal),
                    sum(r -> r.spuriousProbes),
                    sum(r -> r.spuriousRetransmissions), sum(r -> r.packetsSent));
                out.println("PASSED");
            }
            else
            {
                out.println((exitCode == EXIT_WRONG_RESULT ? "WRONG RESULT: " : "JOB FAILED: ") + error);
            }
        }
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new WorkerBenchCommand()).execute(args));
    }
}
