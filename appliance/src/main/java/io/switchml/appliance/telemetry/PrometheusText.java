package io.switchml.appliance.telemetry;

import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.SystemCounter;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.status.CountersReader;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Renders the counters file and the shards' slot latencies in the Prometheus text exposition format
 * (version 0.0.4), deriving names and labels from the counters' type ids and keys ({@link CounterTypes}):
 * <pre>
 * switchml_packets_in 42                                      system counters, unlabelled
 * switchml_shard_packets_in{shard="0"} 17                     per shard (duplicates summed)
 * switchml_shard_drop_bad_magic{shard="0"} 1
 * switchml_job_packets_in{job="7",tenant="acme",name="resnet"} 9
 * switchml_slot_latency_seconds{shard="0",quantile="0.99"} 1.2E-5
 * </pre>
 * Not for the hot path: it allocates freely.
 */
public final class PrometheusText
{
    /** Content type of the text exposition format. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
    /** Prefix of every metric name. */
    public static final String PREFIX = "switchml_";
    /** Family of the slot latency summary. */
    public static final String SLOT_LATENCY = PREFIX + "slot_latency_seconds";

    private static final double[] QUANTILES = { 0.5, 0.9, 0.99, 0.999 };
    private static final double NANOS_PER_SECOND = 1e9;

    private PrometheusText()
    {
    }

    /**
     * @param counters      the counters to export.
     * @param slotLatencies latency histogram (in ns) by shard id, exported as a summary; may be empty.
     * @return the exposition text.
     */
    public static String render(final CountersReader counters, final Map<Integer, ? extends Histogram> slotLatencies)
    {
        final Map<String, Family> families = new LinkedHashMap<>();
        counters.forEach(
            (counterId, typeId, keyBuffer, label) ->
            {
                final long value = counters.getCounterValue(counterId);
                String metricName = CounterTypes.metricName(keyBuffer);
                final boolean gauge = CounterTypes.KIND_GAUGE == CounterTypes.kind(keyBuffer);
                switch (typeId)
                {
                    case CounterTypes.SYSTEM ->
                    {
                        if (metricName.isEmpty())
                        {
                            final SystemCounter systemCounter = SystemCounter.get(counterId);
                            metricName = null != systemCounter ? systemCounter.metricName() : label;
                        }
                        family(families, PREFIX + sanitize(metricName), gauge, label).add("", value);
                    }
                    case CounterTypes.SHARD -> family(
                        families, PREFIX + "shard_" + sanitize(metricName), gauge, "Per-shard " + metricName)
                        .add("shard=\"" + CounterTypes.ownerId(keyBuffer) + "\"", value);
                    case CounterTypes.JOB -> family(
                        families, PREFIX + "job_" + sanitize(metricName), gauge, "Per-job " + metricName)
                        .add("job=\"" + CounterTypes.ownerId(keyBuffer) +
                            "\",tenant=\"" + escapeLabelValue(CounterTypes.tenant(keyBuffer)) +
                            "\",name=\"" + escapeLabelValue(CounterTypes.jobName(keyBuffer)) + "\"", value);
                    case CounterTypes.BACKEND -> family(
                        families, PREFIX + "backend_" + sanitize(metricName), gauge, "Per-backend " + metricName)
                        .add("backend=\"" + escapeLabelValue(CounterTypes.tenant(keyBuffer)) + "\"" +
                            ("fallbacks".equals(metricName) ? ",reason=\"" + escapeLabelValue(label) + "\"" : ""), value);
                    default ->
                    {
                    }
                }
            });

        final StringBuilder out = new StringBuilder(8192);
        for (final Map.Entry<String, Family> entry : families.entrySet())
        {
            final Family family = entry.getValue();
            header(out, entry.getKey(), family.help, family.gauge ? "gauge" : "counter");
            for (final Map.Entry<String, long[]> sample : family.samples.entrySet())
            {
                out.append(entry.getKey());
                if (!sample.getKey().isEmpty())
                {
                    out.append('{').append(sample.getKey()).append('}');
                }
                out.append(' ').append(sample.getValue()[0]).append('\n');
            }
        }

        if (!slotLatencies.isEmpty())
        {
            header(out, SLOT_LATENCY, "Slot latency per shard", "summary");
            for (final Map.Entry<Integer, ? extends Histogram> entry : new TreeMap<>(slotLatencies).entrySet())
            {
                final String shard = "shard=\"" + entry.getKey() + "\"";
                final Histogram histogram = entry.getValue();
                final long count = histogram.getTotalCount();
                for (final double quantile : QUANTILES)
                {
                    out.append(SLOT_LATENCY).append('{').append(shard).append(",quantile=\"").append(quantile)
                        .append("\"} ")
                        .append(0 == count ? "NaN" : formatDouble(
                            histogram.getValueAtPercentile(quantile * 100.0) / NANOS_PER_SECOND))
                        .append('\n');
                }
                out.append(SLOT_LATENCY).append("_sum{").append(shard).append("} ")
                    .append(formatDouble(0 == count ? 0.0 : histogram.getMean() * count / NANOS_PER_SECOND))
                    .append('\n');
                out.append(SLOT_LATENCY).append("_count{").append(shard).append("} ").append(count).append('\n');
            }
        }
        return out.toString();
    }

    /**
     * @return the name lower-cased with every character outside {@code [a-z0-9_]} replaced by '_', and an
     * '_' in front if it would start with a digit.
     */
    public static String sanitize(final String name)
    {
        final String lower = name.toLowerCase(Locale.ROOT);
        final StringBuilder builder = new StringBuilder(lower.length() + 1);
        for (int i = 0; i < lower.length(); i++)
        {
            final char c = lower.charAt(i);
            builder.append((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ? c : '_');
        }
        if (builder.isEmpty() || Character.isDigit(builder.charAt(0)))
        {
            builder.insert(0, '_');
        }
        return builder.toString();
    }

    /**
     * @return the value with backslash, double quote and newline escaped, for a label value.
     */
    public static String escapeLabelValue(final String value)
    {
        return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    private static Family family(
        final Map<String, Family> families, final String name, final boolean gauge, final String help)
    {
        return families.computeIfAbsent(name, (ignore) -> new Family(gauge, help));
    }

    private static void header(final StringBuilder out, final String name, final String help, final String type)
    {
        out.append("# HELP ").append(name).append(' ')
            .append(help.replace("\\", "\\\\").replace("\n", "\\n")).append('\n');
        out.append("# TYPE ").append(name).append(' ').append(type).append('\n');
    }

    private static String formatDouble(final double value)
    {
        return Double.toString(value);
    }

    private static final class Family
    {
        final boolean gauge;
        final String help;
        final Map<String, long[]> samples = new LinkedHashMap<>();

        Family(final boolean gauge, final String help)
        {
            this.gauge = gauge;
            this.help = help;
        }

        void add(final String labels, final long value)
        {
            samples.computeIfAbsent(labels, (ignore) -> new long[1])[0] += value;
        }
    }
}
