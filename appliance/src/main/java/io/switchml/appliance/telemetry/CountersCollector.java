package io.switchml.appliance.telemetry;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.prometheus.metrics.model.snapshots.Unit;
import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.MetricNames;
import io.switchml.protocol.telemetry.SystemCounter;
import org.HdrHistogram.Histogram;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.status.CountersReader;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * The counters file and the shards' slot latencies as Prometheus metric families, read on each scrape: the shards
 * keep writing their Agrona counters and HdrHistogram recorders as before, and nothing here runs on their threads.
 * Names and labels come from {@link MetricNames}:
 * <pre>
 * switchml_received_packets_total 42                                        system counters, unlabelled
 * switchml_shard_received_packets_total{shard="0"} 17                       per shard
 * switchml_shard_dropped_packets_total{reason="bad_magic",shard="0"} 1      one family, the reason a label
 * switchml_job_received_packets_total{job_name="resnet",sml_job="7",tenant="acme"} 9
 * switchml_slot_latency_seconds_bucket{shard="0",le="1.0E-5"} 12            classic histogram from the HdrHistogram
 * </pre>
 * Allocates on every scrape; not for the hot path.
 */
public final class CountersCollector implements MultiCollector
{
    /**
     * Upper bounds of the slot latency histogram's buckets, in seconds: 1-2.5-5 steps from 1 µs (the recorder's
     * resolution) to 10 s (its highest trackable value), then +Inf.
     */
    public static final double[] SLOT_LATENCY_BOUNDS_SECONDS = {
        1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2,
        0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, Double.POSITIVE_INFINITY };

    private static final double NANOS_PER_SECOND = 1e9;

    private final CountersReader counters;
    private final Supplier<? extends Map<Integer, ? extends Histogram>> slotLatencies;

    /**
     * @param counters      the counters to export, e.g. {@link CountersFile#countersReader()}.
     * @param slotLatencies called on each scrape: latency histograms in ns by shard id, e.g.
     *                      {@link Telemetry#slotLatencyTotals()}.
     */
    public CountersCollector(
        final CountersReader counters, final Supplier<? extends Map<Integer, ? extends Histogram>> slotLatencies)
    {
        this.counters = counters;
        this.slotLatencies = slotLatencies;
    }

    public MetricSnapshots collect()
    {
        final Map<String, Family> families = new LinkedHashMap<>();
        counters.forEach((counterId, typeId, keyBuffer, label) ->
        {
            String name = CounterTypes.metricName(keyBuffer);
            String help = null;
            if (CounterTypes.SYSTEM == typeId)
            {
                final SystemCounter systemCounter = SystemCounter.get(counterId);
                if (null != systemCounter)
                {
                    name = name.isEmpty() ? systemCounter.metricName() : name;
                    help = systemCounter.description();
                }
            }
            final MetricNames.Exported exported = name.isEmpty() ? null : MetricNames.export(typeId, name, label);
            if (null == exported)
            {
                return;
            }
            final boolean gauge = CounterTypes.KIND_GAUGE == CounterTypes.kind(keyBuffer);
            Family family = families.get(exported.family());
            if (null == family)
            {
                family = new Family(gauge, gauge && name.contains("_max"), null != help ? help : help(typeId, exported));
                families.put(exported.family(), family);
            }
            final Labels labels = labels(typeId, keyBuffer, exported.reason());
            family.add(labels, counters.getCounterValue(counterId) / exported.divisor());
        });

        final List<MetricSnapshot> snapshots = new ArrayList<>(families.size() + 1);
        for (final Map.Entry<String, Family> entry : families.entrySet())
        {
            snapshots.add(entry.getValue().snapshot(entry.getKey()));
        }
        final Map<Integer, ? extends Histogram> latencies = slotLatencies.get();
        if (!latencies.isEmpty())
        {
            snapshots.add(slotLatencySnapshot(latencies));
        }
        return new MetricSnapshots(snapshots);
    }

    /**
     * @return the histograms (ns) as one classic histogram family in seconds, a data point per shard.
     */
    static HistogramSnapshot slotLatencySnapshot(final Map<Integer, ? extends Histogram> latencies)
    {
        final HistogramSnapshot.Builder builder = HistogramSnapshot.builder()
            .name(MetricNames.SLOT_LATENCY_SECONDS)
            .help("Time from a slot's first contribution to its result, per shard, since start")
            .unit(Unit.SECONDS);
        for (final Map.Entry<Integer, ? extends Histogram> entry : new TreeMap<>(latencies).entrySet())
        {
            final Histogram histogram = entry.getValue();
            final long[] counts = new long[SLOT_LATENCY_BOUNDS_SECONDS.length];
            long below = 0;
            for (int i = 0; i < counts.length - 1; i++)
            {
                final long cumulative = histogram.getCountBetweenValues(
                    0, (long)(SLOT_LATENCY_BOUNDS_SECONDS[i] * NANOS_PER_SECOND));
                counts[i] = cumulative - below;
                below = cumulative;
            }
            final long total = histogram.getTotalCount();
            counts[counts.length - 1] = total - below;
            builder.dataPoint(HistogramSnapshot.HistogramDataPointSnapshot.builder()
                .labels(Labels.of(MetricNames.SHARD_LABEL, Integer.toString(entry.getKey())))
                .classicHistogramBuckets(ClassicHistogramBuckets.of(SLOT_LATENCY_BOUNDS_SECONDS, counts))
                .sum(0 == total ? 0.0 : histogram.getMean() * total / NANOS_PER_SECOND)
                .build());
        }
        return builder.build();
    }

    private static Labels labels(final int typeId, final DirectBuffer keyBuffer, final String reason)
    {
        final Labels labels = switch (typeId)
        {
            case CounterTypes.SHARD -> Labels.of(MetricNames.SHARD_LABEL, Integer.toString(CounterTypes.ownerId(keyBuffer)));
            case CounterTypes.JOB -> Labels.of(
                MetricNames.JOB_LABEL, Integer.toString(CounterTypes.ownerId(keyBuffer)),
                MetricNames.TENANT_LABEL, CounterTypes.tenant(keyBuffer),
                MetricNames.JOB_NAME_LABEL, CounterTypes.jobName(keyBuffer));
            case CounterTypes.BACKEND -> Labels.of(MetricNames.BACKEND_LABEL, CounterTypes.tenant(keyBuffer));
            default -> Labels.EMPTY;
        };
        return null == reason ? labels : labels.add(MetricNames.REASON_LABEL, reason);
    }

    private static String help(final int typeId, final MetricNames.Exported exported)
    {
        final String owner = switch (typeId)
        {
            case CounterTypes.SHARD -> "Per shard: ";
            case CounterTypes.JOB -> "Per job: ";
            case CounterTypes.BACKEND -> "Per backend: ";
            default -> "";
        };
        final String what = exported.family().substring(
            MetricNames.PREFIX.length() + MetricNames.scope(typeId).length()).replace('_', ' ');
        return owner + what + (null != exported.reason() ? ", by reason" : "");
    }

    private static Unit unit(final String family)
    {
        if (family.endsWith("_seconds"))
        {
            return Unit.SECONDS;
        }
        return family.endsWith("_bytes") ? Unit.BYTES : null;
    }

    private static final class Family
    {
        final boolean gauge;
        final boolean maximum;
        final String help;
        final Map<Labels, double[]> values = new LinkedHashMap<>();

        Family(final boolean gauge, final boolean maximum, final String help)
        {
            this.gauge = gauge;
            this.maximum = maximum;
            this.help = help;
        }

        /**
         * Add a value; two counters with the same labels (a retired shard's and its successor's) add up, or for a
         * maximum the larger is kept.
         */
        void add(final Labels labels, final double value)
        {
            final double[] total = values.computeIfAbsent(labels, (ignore) -> new double[1]);
            total[0] = maximum ? Math.max(total[0], value) : total[0] + value;
        }

        MetricSnapshot snapshot(final String name)
        {
            final Unit unit = unit(name);
            if (gauge)
            {
                final GaugeSnapshot.Builder builder = GaugeSnapshot.builder().name(name).help(help).unit(unit);
                values.forEach((labels, value) -> builder.dataPoint(
                    GaugeSnapshot.GaugeDataPointSnapshot.builder().labels(labels).value(value[0]).build()));
                return builder.build();
            }
            final CounterSnapshot.Builder builder = CounterSnapshot.builder().name(name).help(help).unit(unit);
            values.forEach((labels, value) -> builder.dataPoint(
                CounterSnapshot.CounterDataPointSnapshot.builder().labels(labels).value(value[0]).build()));
            return builder.build();
        }
    }
}
