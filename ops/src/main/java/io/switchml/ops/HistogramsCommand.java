package io.switchml.ops;

import io.switchml.protocol.Json;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.protocol.telemetry.MetricNames;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import io.switchml.protocol.telemetry.MetricNames;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code ops histograms}: slot-completion latency percentiles over a window of the journal, a terminal
 * chart of the distribution and of throughput and latency over time, and optionally a self-contained
 * HTML page with SVG charts.
 */
@Command(name = "histograms", aliases = "latency",
    description = {
        "Slot-completion latency percentiles over a window, with charts; --html writes an SVG report.",
        "From the journal's per-shard snapshots (every switchml.appliance.histogram.snapshot.interval.ms, 10 s by " +
            "default): percentiles, the distribution, and slots completed per second and percentiles over time. " +
            "Window percentiles are estimated from each interval's min/p50/p90/p99/p99.9/max; count, min and max are " +
            "exact. Remotely (--url) only the since-start histogram of /metrics is available."})
final class HistogramsCommand extends OpsSubcommand
{
    private static final String DEFAULT_SINCE = "1h";

    @Option(names = "--since", paramLabel = "TIME", converter = TimeSpec.class,
        description = "Window start: an age (90s, 15m, 2h, 1d), a local time (14:00), a date and time, or an instant " +
            "(default " + DEFAULT_SINCE + ").")
    Long sinceMs;

    @Option(names = "--until", paramLabel = "TIME", converter = TimeSpec.class,
        description = "Window end, same forms (default now).")
    Long untilMs;

    @Option(names = "--shard", paramLabel = "N", description = "Only this shard (default all shards together).")
    Integer shard;

    @Option(names = "--html", paramLabel = "FILE",
        description = "Also write a self-contained HTML page with SVG charts: the latency distribution, the percentile " +
            "curve, latency percentiles and slots completed per second over time.")
    Path html;

    @Option(names = "--buckets", paramLabel = "N", defaultValue = "16",
        description = "Latency buckets of the terminal distribution chart (default ${DEFAULT-VALUE}).")
    int buckets;

    @Option(names = "--width", paramLabel = "COLUMNS", defaultValue = "60",
        description = "Width of the terminal charts (default ${DEFAULT-VALUE}).")
    int width;

    int execute() throws Exception
    {
        if (buckets < 2 || buckets > 200)
        {
            throw usage("--buckets must be within 2..200: " + buckets);
        }
        if (width < 10 || width > 500)
        {
            throw usage("--width must be within 10..500: " + width);
        }
        if (target().isRemote())
        {
            if (sinceMs != null || untilMs != null || html != null)
            {
                target().requireLocal("histograms with --since, --until or --html");
            }
            return remote();
        }
        final long nowMs = System.currentTimeMillis();
        final long fromMs = sinceMs != null ? sinceMs : TimeSpec.parse(DEFAULT_SINCE, nowMs);
        final long toMs = untilMs != null ? untilMs : nowMs;
        if (toMs <= fromMs)
        {
            throw usage("--until (" + Format.time(toMs) + ") must be after --since (" + Format.time(fromMs) + ")");
        }

        final List<LatencyWindow.Snapshot> selected = new ArrayList<>();
        long held = 0;
        long firstMs = Long.MAX_VALUE;
        long lastMs = Long.MIN_VALUE;
        try (JournalReader reader = target().openJournal())
        {
            reader.types(JournalEvent.HISTOGRAM_SNAPSHOT);
            JournalRecord record;
            while ((record = reader.poll()) != null)
            {
                held++;
                firstMs = Math.min(firstMs, record.intervalEndMs());
                lastMs = Math.max(lastMs, record.intervalEndMs());
                if (record.intervalEndMs() > fromMs && record.intervalEndMs() <= toMs &&
                    (shard == null || record.shardId() == shard))
                {
                    selected.add(LatencyWindow.Snapshot.of(record));
                }
            }
        }
        if (selected.isEmpty())
        {
            throw new OpsException(OpsException.FAILED, "no latency snapshots" + (shard != null ? " of shard " + shard : "") +
                " from " + Format.time(fromMs) + " to " + Format.time(toMs) + " in " + target().journalDir() +
                (held == 0 ? " (it holds none yet: the appliance writes one per shard every snapshot interval, 10 s by default)" :
                    " (it holds " + held + ", from " + Format.time(firstMs) + " to " + Format.time(lastMs) + "; widen --since)"));
        }
        final LatencyWindow window = new LatencyWindow(selected);
        if (html != null)
        {
            final String page = HtmlReport.render(window, target().journalDir().toString(), fromMs, toMs, nowMs);
            try
            {
                final Path parent = html.toAbsolutePath().getParent();
                if (parent != null)
                {
                    Files.createDirectories(parent);
                }
                Files.writeString(html, page, StandardCharsets.UTF_8);
            }
            catch (final IOException ex)
            {
                throw new OpsException(OpsException.FAILED, "cannot write " + html + ": " + ex.getMessage(), ex);
            }
        }
        if (json())
        {
            out().println(Json.pretty(toJson(window, fromMs, toMs)));
        }
        else
        {
            print(out(), window, fromMs, toMs);
        }
        return OpsException.OK;
    }

    private Map<String, Object> toJson(final LatencyWindow window, final long fromMs, final long toMs)
    {
        final Map<String, Object> json = new LinkedHashMap<>();
        json.put("journal", target().journalDir().toString());
        json.put("from", Format.iso(fromMs));
        json.put("to", Format.iso(toMs));
        json.put("snapshots", window.snapshots().size());
        json.put("shards", window.shards());
        json.put("estimated", window.snapshots().size() > 1);
        json.put("latency_ns", summary(window));
        final List<Map<String, Object>> perShard = new ArrayList<>();
        for (final int shardId : window.shards())
        {
            final Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("shard", shardId);
            entry.putAll(summary(window.shard(shardId)));
            perShard.add(entry);
        }
        json.put("per_shard", perShard);
        final List<Map<String, Object>> distribution = new ArrayList<>();
        for (final LatencyWindow.Bucket bucket : window.distribution(buckets))
        {
            final Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("low_ns", Math.round(bucket.lowNs()));
            entry.put("high_ns", Math.round(bucket.highNs()));
            entry.put("count", Math.round(bucket.count() * 10) / 10.0);
            distribution.add(entry);
        }
        json.put("distribution", distribution);
        final List<Map<String, Object>> intervals = new ArrayList<>();
        for (final LatencyWindow.Interval interval : window.timeline(Integer.MAX_VALUE))
        {
            final Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("start", Format.iso(interval.startMs()));
            entry.put("end", Format.iso(interval.endMs()));
            entry.put("slots_per_sec", Math.round(interval.slotsPerSec() * 10) / 10.0);
            entry.putAll(summary(interval.window()));
            intervals.add(entry);
        }
        json.put("intervals", intervals);
        if (html != null)
        {
            json.put("html", html.toAbsolutePath().toString());
        }
        return json;
    }

    private static Map<String, Object> summary(final LatencyWindow window)
    {
        final Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("count", window.count());
        if (window.count() > 0)
        {
            summary.put("min", window.minNs());
            for (int i = 0; i < LatencyWindow.REPORTED_QUANTILES.length; i++)
            {
                summary.put(LatencyWindow.JSON_NAMES[i], Math.round(window.quantileNs(LatencyWindow.REPORTED_QUANTILES[i])));
            }
            summary.put("max", window.maxNs());
        }
        return summary;
    }

    private void print(final PrintWriter out, final LatencyWindow window, final long fromMs, final long toMs)
    {
        final boolean unicode = unicode();
        final List<Integer> shards = window.shards();
        final double seconds = Math.max(1, window.endMs() - window.startMs()) / 1000.0;
        out.println("slot-completion latency, " + Format.time(fromMs) + " to " + Format.time(toMs) +
            (shard != null ? ", shard " + shard : ""));
        out.println(window.snapshots().size() + " snapshots of " + shards.size() + " shard(s) from " + target().journalDir() +
            ": " + Format.count(window.count()) + " slots completed, " + Format.si(window.count() / seconds) + " slots/s on average");
        out.println();

        final List<LatencyWindow> columns = new ArrayList<>();
        final List<String> headers = new ArrayList<>();
        columns.add(window);
        headers.add(shards.size() > 1 ? "all shards" : "shard " + shards.get(0));
        if (shards.size() > 1)
        {
            for (final int shardId : shards)
            {
                columns.add(window.shard(shardId));
                headers.add("shard " + shardId);
            }
        }
        final StringBuilder header = new StringBuilder(String.format("%-7s", ""));
        for (final String name : headers)
        {
            header.append(String.format("  %12s", name));
        }
        out.println(header.toString().stripTrailing());
        out.println(row("count", columns, w -> Format.count(w.count())));
        out.println(row("min", columns, w -> Format.latency(w.count() == 0 ? Double.NaN : w.minNs(), unicode)));
        for (int i = 0; i < LatencyWindow.REPORTED_QUANTILES.length; i++)
        {
            final double quantile = LatencyWindow.REPORTED_QUANTILES[i];
            out.println(row(LatencyWindow.REPORTED_NAMES[i], columns, w -> Format.latency(w.quantileNs(quantile), unicode)));
        }
        out.println(row("max", columns, w -> Format.latency(w.count() == 0 ? Double.NaN : w.maxNs(), unicode)));
        if (window.snapshots().size() > 1)
        {
            out.println("(percentiles over more than one interval are estimated from each interval's percentiles)");
        }

        if (window.count() > 0)
        {
            out.println();
            out.println("distribution: estimated slots per latency bucket (buckets even in log latency)");
            final List<LatencyWindow.Bucket> distribution = window.distribution(buckets);
            double most = 0;
            for (final LatencyWindow.Bucket bucket : distribution)
            {
                most = Math.max(most, bucket.count());
            }
            final int barWidth = Math.max(10, width - 34);
            for (final LatencyWindow.Bucket bucket : distribution)
            {
                out.printf("  %9s - %9s |%s| %s%n", Format.latency(bucket.lowNs(), unicode), Format.latency(bucket.highNs(), unicode),
                    TerminalChart.bar(bucket.count(), most, barWidth, unicode), Format.count(Math.round(bucket.count())));
            }
        }

        final List<LatencyWindow.Interval> timeline = window.timeline(Math.max(10, width - 24));
        if (timeline.size() > 1)
        {
            out.println();
            final long[] spans = timeline.stream().mapToLong(i -> i.endMs() - i.startMs()).sorted().toArray();
            final long spanMs = spans[spans.length / 2];
            out.println("over time: one column per " + Format.duration(spanMs) + " interval, " +
                Format.clock(timeline.get(0).startMs()) + " to " + Format.clock(timeline.get(timeline.size() - 1).endMs()));
            final List<Double> throughput = new ArrayList<>();
            double peak = 0;
            for (final LatencyWindow.Interval interval : timeline)
            {
                throughput.add(interval.slotsPerSec());
                peak = Math.max(peak, interval.slotsPerSec());
            }
            out.printf("  %-7s %-14s %s%n", "slots/s", "max " + Format.si(peak), TerminalChart.sparkline(throughput, unicode));
            for (final int index : new int[] {0, 2})
            {
                final List<Double> series = new ArrayList<>();
                double max = 0;
                for (final LatencyWindow.Interval interval : timeline)
                {
                    final double value = interval.window().quantileNs(LatencyWindow.REPORTED_QUANTILES[index]);
                    series.add(value);
                    max = Double.isNaN(value) ? max : Math.max(max, value);
                }
                out.printf("  %-7s %-14s %s%n", LatencyWindow.REPORTED_NAMES[index], "max " + Format.latency(max, unicode),
                    TerminalChart.sparkline(series, unicode));
            }
        }
        if (html != null)
        {
            out.println();
            out.println("wrote " + html.toAbsolutePath());
        }
    }

    private static String row(final String name, final List<LatencyWindow> columns,
        final java.util.function.Function<LatencyWindow, String> cell)
    {
        final StringBuilder row = new StringBuilder(String.format("%-7s", name));
        for (final LatencyWindow column : columns)
        {
            row.append(String.format("  %12s", cell.apply(column)));
        }
        return row.toString();
    }

    private int remote()
    {
        final List<PrometheusParser.Sample> samples = PrometheusParser.parse(target().httpGetOk("metrics"));
        final Map<Integer, Map<String, Object>> byShard = new TreeMap<>();
        final Map<Integer, TreeMap<Double, Double>> bucketsByShard = new TreeMap<>();
        for (final PrometheusParser.Sample sample : samples)
        {
            if (!sample.name().startsWith(MetricNames.SLOT_LATENCY_SECONDS) ||
                !sample.labels().containsKey(MetricNames.SHARD_LABEL))
            {
                continue;
            }
            final int shardId = Integer.parseInt(sample.labels().get(MetricNames.SHARD_LABEL));
            if (shard != null && shard != shardId)
            {
                continue;
            }
            final Map<String, Object> entry = byShard.computeIfAbsent(shardId, id ->
            {
                final Map<String, Object> created = new LinkedHashMap<>();
                created.put("shard", id);
                return created;
            });
            if (sample.name().endsWith("_count"))
            {
                entry.put("count", (long)sample.value());
            }
            else if (sample.name().endsWith("_bucket") && sample.labels().containsKey("le"))
            {
                final String le = sample.labels().get("le");
                bucketsByShard.computeIfAbsent(shardId, id -> new TreeMap<>()).put(
                    "+Inf".equals(le) ? Double.POSITIVE_INFINITY : Double.parseDouble(le), sample.value());
            }
        }
        bucketsByShard.forEach((shardId, buckets) ->
        {
            for (int i = 0; i < LatencyWindow.REPORTED_QUANTILES.length; i++)
            {
                final double seconds = bucketQuantile(LatencyWindow.REPORTED_QUANTILES[i], buckets);
                if (!Double.isNaN(seconds))
                {
                    byShard.get(shardId).put(LatencyWindow.JSON_NAMES[i], Math.round(seconds * 1e9));
                }
            }
        });
        if (byShard.isEmpty())
        {
            throw new OpsException(OpsException.FAILED, target().url() + "metrics has no slot latency" +
                (shard != null ? " of shard " + shard : ""));
        }
        if (json())
        {
            final Map<String, Object> json = new LinkedHashMap<>();
            json.put("source", target().url() + "metrics");
            json.put("window", "since the appliance started");
            json.put("quantiles", "interpolated within the histogram buckets");
            json.put("unit", "ns");
            json.put("per_shard", new ArrayList<>(byShard.values()));
            out().println(Json.pretty(json));
            return OpsException.OK;
        }
        final PrintWriter out = out();
        out.println("slot-completion latency since the appliance started, from " + target().url() + "metrics" +
            " (quantiles interpolated within its histogram buckets, as PromQL's histogram_quantile does)");
        out.println("(windows, the distribution chart and --html need the journal: run on the appliance host)");
        out.printf("%-7s  %12s", "shard", "count");
        for (final String name : LatencyWindow.REPORTED_NAMES)
        {
            out.printf("  %10s", name);
        }
        out.println();
        for (final Map<String, Object> entry : byShard.values())
        {
            out.printf("%-7s  %12s", entry.get("shard"), Format.count((Long)entry.getOrDefault("count", 0L)));
            for (final String name : LatencyWindow.JSON_NAMES)
            {
                final Object value = entry.get(name);
                out.printf("  %10s", value == null ? "-" : Format.latency((Long)value, unicode()));
            }
            out.println();
        }
        return OpsException.OK;
    }

    /**
     * The q-quantile of a classic histogram the way PromQL's {@code histogram_quantile} estimates it: linear
     * interpolation within the bucket the rank falls in (from 0 for the first bucket); the highest finite bound when
     * it falls in the +Inf bucket.
     *
     * @param buckets cumulative counts by upper bound, +Inf included.
     * @return the estimate in the buckets' unit, or NaN when there are no observations.
     */
    static double bucketQuantile(final double q, final TreeMap<Double, Double> buckets)
    {
        final Double total = buckets.get(Double.POSITIVE_INFINITY);
        if (null == total || total <= 0)
        {
            return Double.NaN;
        }
        final double rank = q * total;
        double lowerBound = 0;
        double below = 0;
        for (final Map.Entry<Double, Double> bucket : buckets.entrySet())
        {
            if (bucket.getValue() >= rank)
            {
                if (Double.isInfinite(bucket.getKey()))
                {
                    return lowerBound;
                }
                final double inBucket = bucket.getValue() - below;
                return inBucket <= 0 ? bucket.getKey() :
                    lowerBound + (bucket.getKey() - lowerBound) * (rank - below) / inBucket;
            }
            lowerBound = bucket.getKey();
            below = bucket.getValue();
        }
        return lowerBound;
    }
}
