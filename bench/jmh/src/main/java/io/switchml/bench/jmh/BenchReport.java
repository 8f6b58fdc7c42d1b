package io.switchml.bench.jmh;

import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.CommandLineOptionException;
import org.openjdk.jmh.runner.options.CommandLineOptions;
import org.openjdk.jmh.runner.options.Options;
import org.openjdk.jmh.runner.options.OptionsBuilder;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Pattern;

/**
 * Runs the benchmarks with the JMH options given on the command line and writes the results to a folder: JMH's own
 * JSON ({@code results.json}), a second JSON of the block floating point loops with C2's auto-vectorizer off
 * ({@code results-no-superword.json}), and a Markdown summary ({@code results.md}) with GB/s, the host, the date and
 * the SuperWord comparison.
 * <p>
 * Usage: {@code java -cp jmh-benchmarks.jar io.switchml.bench.jmh.BenchReport [--out DIR] [--no-superword-check]
 * [JMH options, e.g. -f 1 -wi 3 -i 5 -w 1s -r 1s]}.
 * <p>
 * GB/s is bytes per operation over nanoseconds per operation (1 byte/ns = 1 GB/s = 10^9 bytes/s). Bytes per
 * operation come from each benchmark's size parameter: {@code elements} and {@code lanes} and {@code k} count 4-byte
 * values, {@code packetBytes} counts bytes (eight packets for a {@code batchOfEight}, sixteen for a
 * {@code batchOfSixteen}).
 */
public final class BenchReport
{
    /** Benchmarks run again with -XX:-UseSuperWord (when the first run had them) to see which loops C2 vectorizes. */
    private static final String SUPERWORD_INCLUDE = "io\\.switchml\\.bench\\.jmh\\.(BlockFloatingPoint|Vectorization)Benchmark\\..*";
    private static final String PACKAGE_PREFIX = "io.switchml.bench.jmh.";

    private BenchReport()
    {
    }

    public static void main(final String[] args) throws IOException, RunnerException
    {
        Path out = Path.of("docs", "jmh");
        boolean superwordCheck = true;
        final List<String> jmhArgs = new ArrayList<>();
        for (int i = 0; i < args.length; i++)
        {
            switch (args[i])
            {
                case "--out" -> out = Path.of(args[++i]);
                case "--no-superword-check" -> superwordCheck = false;
                default -> jmhArgs.add(args[i]);
            }
        }
        final CommandLineOptions cli;
        try
        {
            cli = new CommandLineOptions(jmhArgs.toArray(String[]::new));
        }
        catch (final CommandLineOptionException ex)
        {
            System.err.println("BenchReport: " + ex.getMessage());
            System.exit(2);
            return;
        }
        Files.createDirectories(out);
        final ZonedDateTime started = ZonedDateTime.now(ZoneOffset.UTC);
        final String loadAtStart = loadAverage();

        final Options main = new OptionsBuilder().parent(cli)
            .resultFormat(ResultFormatType.JSON).result(out.resolve("results.json").toString()).build();
        final Collection<RunResult> results = new Runner(main).run();

        Collection<RunResult> noSuperword = List.of();
        if (superwordCheck)
        {
            final Options withoutSuperword = withoutSuperword(cli, results, out.resolve("results-no-superword.json"));
            if (withoutSuperword != null)
            {
                noSuperword = new Runner(withoutSuperword).run();
            }
        }

        final String markdown = markdown(started, loadAtStart, String.join(" ", jmhArgs), results, noSuperword);
        Files.writeString(out.resolve("results.md"), markdown, StandardCharsets.UTF_8);
        System.out.println(markdown);
        System.out.println("BenchReport: wrote " + out.resolve("results.md") + ", " + out.resolve("results.json") +
            (superwordCheck ? ", " + out.resolve("results-no-superword.json") : ""));
    }

    /**
     * Options to run again, with -XX:-UseSuperWord, exactly those benchmarks of the first run that
     * {@link #SUPERWORD_INCLUDE} names, with the command line's run settings (not its patterns, which JMH would add
     * to the includes).
     *
     * @return the options, or null when the first run had none of those benchmarks.
     */
    private static Options withoutSuperword(final CommandLineOptions cli, final Collection<RunResult> results, final Path file)
    {
        final ChainedOptionsBuilder builder = new OptionsBuilder();
        boolean any = false;
        for (final RunResult run : results)
        {
            final String name = run.getParams().getBenchmark();
            if (name.matches(SUPERWORD_INCLUDE))
            {
                builder.include("^" + Pattern.quote(name) + "$");
                any = true;
            }
        }
        if (!any)
        {
            return null;
        }
        if (cli.getForkCount().hasValue())
        {
            builder.forks(cli.getForkCount().get());
        }
        if (cli.getWarmupIterations().hasValue())
        {
            builder.warmupIterations(cli.getWarmupIterations().get());
        }
        if (cli.getWarmupTime().hasValue())
        {
            builder.warmupTime(cli.getWarmupTime().get());
        }
        if (cli.getMeasurementIterations().hasValue())
        {
            builder.measurementIterations(cli.getMeasurementIterations().get());
        }
        if (cli.getMeasurementTime().hasValue())
        {
            builder.measurementTime(cli.getMeasurementTime().get());
        }
        if (cli.getJvm().hasValue())
        {
            builder.jvm(cli.getJvm().get());
        }
        if (cli.getJvmArgs().hasValue())
        {
            builder.jvmArgs(cli.getJvmArgs().get().toArray(String[]::new));
        }
        if (cli.getJvmArgsPrepend().hasValue())
        {
            builder.jvmArgsPrepend(cli.getJvmArgsPrepend().get().toArray(String[]::new));
        }
        final List<String> append = new ArrayList<>(cli.getJvmArgsAppend().orElse(List.of()));
        append.add("-XX:-UseSuperWord");
        return builder.jvmArgsAppend(append.toArray(String[]::new))
            .resultFormat(ResultFormatType.JSON).result(file.toString()).build();
    }

    /**
     * Bytes one operation processes, from the benchmark's size parameter.
     *
     * @return the bytes, or 0 when the benchmark has no size parameter.
     */
    static long bytesPerOp(final BenchmarkParams params)
    {
        for (final String key : new String[]{"elements", "lanes", "k"})
        {
            final String value = params.getParam(key);
            if (value != null)
            {
                return Long.parseLong(value) * 4;
            }
        }
        final String packetBytes = params.getParam("packetBytes");
        if (packetBytes == null)
        {
            return 0;
        }
        // a batch benchmark handles PacketMacBatch.LANES packets per operation
        final long packets = params.getBenchmark().endsWith("batchOfEight") ? 8 :
            params.getBenchmark().endsWith("batchOfSixteen") ? 16 : 1;
        return packets * Long.parseLong(packetBytes);
    }

    private static String shortName(final BenchmarkParams params)
    {
        final String name = params.getBenchmark();
        return name.startsWith(PACKAGE_PREFIX) ? name.substring(PACKAGE_PREFIX.length()) : name;
    }

    private static String paramText(final BenchmarkParams params)
    {
        final List<String> parts = new ArrayList<>();
        for (final String key : params.getParamsKeys())
        {
            parts.add(key + "=" + params.getParam(key));
        }
        return String.join(", ", parts);
    }

    private static String key(final BenchmarkParams params)
    {
        return params.getBenchmark() + "(" + paramText(params) + ")";
    }

    private static String markdown(
        final ZonedDateTime started, final String loadAtStart, final String jmhArgs,
        final Collection<RunResult> results, final Collection<RunResult> noSuperword)
    {
        final StringBuilder md = new StringBuilder(4096);
        md.append("# JMH micro-benchmarks: results\n\n");
        md.append("Generated by `bench/jmh/run.sh` (`io.switchml.bench.jmh.BenchReport`); see [README.md](README.md) for what is ")
            .append("measured and for the analysis. Raw JMH output: `results.json`")
            .append(noSuperword.isEmpty() ? "" : ", `results-no-superword.json`").append(".\n\n");
        md.append("| | |\n|---|---|\n");
        md.append("| date | ").append(started.format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'", Locale.ROOT))).append(" |\n");
        md.append("| CPUs (`nproc`) | ").append(Runtime.getRuntime().availableProcessors()).append(" |\n");
        md.append("| CPU model | ").append(cpuModel()).append(" |\n");
        md.append("| OS | ").append(System.getProperty("os.name")).append(' ').append(System.getProperty("os.version"))
            .append(' ').append(System.getProperty("os.arch")).append(" |\n");
        md.append("| JVM | ").append(System.getProperty("java.vm.name")).append(' ').append(System.getProperty("java.vm.version"))
            .append(" (").append(System.getProperty("java.vm.vendor")).append(") |\n");
        md.append("| JMH | ").append(jmhVersion()).append(", options `")
            .append(jmhArgs.isEmpty() ? "(annotation defaults)" : jmhArgs).append("` |\n");
        md.append("| load average at start, end | ").append(loadAtStart).append("; ").append(loadAverage()).append(" |\n\n");
        md.append("**Noisy.** These figures come from a shared 2-core machine on which other builds and tests ran at the same ")
            .append("time, with one fork and a few one-second iterations. Take them as orders of magnitude; differences ")
            .append("under about 30% between runs are not meaningful. ± is JMH's 99.9% confidence half-width.\n\n");

        md.append("## Throughput\n\n");
        md.append("GB/s = bytes per operation / ns per operation (10^9 bytes/s). ns/op is JMH's score, the mean of the ")
            .append("measurement iterations; the median iteration is less sensitive to bursts of load from other processes, ")
            .append("so GB/s and ops/s are given at the median.\n\n");
        md.append("| benchmark | parameters | ns/op (mean) | ± | ns/op (median) | bytes/op | GB/s | million ops/s |\n");
        md.append("|---|---|---:|---:|---:|---:|---:|---:|\n");
        for (final RunResult run : results)
        {
            final BenchmarkParams params = run.getParams();
            final Result<?> primary = run.getPrimaryResult();
            final double medianNs = medianIteration(run);
            final long bytes = bytesPerOp(params);
            md.append("| ").append(shortName(params)).append(" | ").append(paramText(params)).append(" | ")
                .append(format(primary.getScore())).append(" | ").append(format(primary.getScoreError())).append(" | ")
                .append(format(medianNs)).append(" | ")
                .append(bytes).append(" | ").append(bytes > 0 ? String.format(Locale.ROOT, "%.2f", bytes / medianNs) : "-")
                .append(" | ").append(String.format(Locale.ROOT, "%.2f", 1e3 / medianNs)).append(" |\n");
            if (!"ns/op".equals(primary.getScoreUnit()))
            {
                md.append("\n(unit of the row above is ").append(primary.getScoreUnit()).append(", not ns/op)\n\n");
            }
        }

        if (!noSuperword.isEmpty())
        {
            final Map<String, RunResult> byKey = new HashMap<>();
            for (final RunResult run : results)
            {
                byKey.put(key(run.getParams()), run);
            }
            md.append("\n## Auto-vectorization: C2 SuperWord on (default) and off (`-XX:-UseSuperWord`)\n\n");
            md.append("Median iterations. A loop that runs much faster with SuperWord on is vectorized; one that runs the ")
                .append("same is not. ")
                .append("`VectorizationBenchmark.*` are rewrites of the `BlockFloatingPoint` loops that give bit-identical results ")
                .append("(see README.md); they are not used by the product.\n\n");
            md.append("| benchmark | median ns/op, SuperWord on | median ns/op, off | on is faster by | verdict |\n");
            md.append("|---|---:|---:|---:|---|\n");
            for (final RunResult off : noSuperword)
            {
                final RunResult on = byKey.get(key(off.getParams()));
                if (on == null)
                {
                    continue;
                }
                final double onNs = medianIteration(on);
                final double offNs = medianIteration(off);
                final double ratio = offNs / onNs;
                final String verdict = ratio >= 1.5 ? "vectorized" : ratio <= 1.2 ? "not vectorized" : "unclear (noise?)";
                md.append("| ").append(shortName(on.getParams())).append(" | ").append(format(onNs)).append(" | ")
                    .append(format(offNs)).append(" | ").append(String.format(Locale.ROOT, "%.2fx", ratio)).append(" | ")
                    .append(verdict).append(" |\n");
            }
        }
        return md.toString();
    }

    /**
     * Median of the primary scores of all measurement iterations of all forks.
     */
    static double medianIteration(final RunResult run)
    {
        final List<Double> scores = new ArrayList<>();
        for (final BenchmarkResult fork : run.getBenchmarkResults())
        {
            for (final IterationResult iteration : fork.getIterationResults())
            {
                scores.add(iteration.getPrimaryResult().getScore());
            }
        }
        if (scores.isEmpty())
        {
            return run.getPrimaryResult().getScore();
        }
        Collections.sort(scores);
        final int middle = scores.size() / 2;
        return scores.size() % 2 == 1 ? scores.get(middle) : (scores.get(middle - 1) + scores.get(middle)) / 2;
    }

    private static String format(final double value)
    {
        if (Double.isNaN(value))
        {
            return "-";
        }
        return value >= 100 ? String.format(Locale.ROOT, "%.0f", value) : String.format(Locale.ROOT, "%.1f", value);
    }

    private static String cpuModel()
    {
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc/cpuinfo")))
            {
                if (line.startsWith("model name"))
                {
                    return line.substring(line.indexOf(':') + 1).strip();
                }
            }
        }
        catch (final IOException | RuntimeException ignored)
        {
            // not Linux: fall through
        }
        return System.getProperty("os.arch");
    }

    private static String jmhVersion()
    {
        try (InputStream in = BenchReport.class.getResourceAsStream("/META-INF/maven/org.openjdk.jmh/jmh-core/pom.properties"))
        {
            if (in != null)
            {
                final Properties properties = new Properties();
                properties.load(in);
                return properties.getProperty("version", "unknown");
            }
        }
        catch (final IOException ignored)
        {
            // reported as unknown
        }
        return "unknown";
    }

    private static String loadAverage()
    {
        try
        {
            final String[] fields = Files.readString(Path.of("/proc/loadavg")).strip().split(" ");
            return fields[0] + " " + fields[1] + " " + fields[2];
        }
        catch (final IOException | RuntimeException ex)
        {
            return "unknown";
        }
    }
}
