package io.switchml.appliance.telemetry;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Info;
import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.Unit;
import io.switchml.appliance.backend.Backend;
import io.switchml.protocol.BuildInfo;
import io.switchml.protocol.telemetry.MetricNames;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.status.CountersReader;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;
import java.util.Map;
import java.util.function.DoubleSupplier;
import java.util.function.IntToLongFunction;
import java.util.function.Supplier;

/**
 * The appliance's Prometheus registry (client_java) and the exposition of it: the counters file and slot latencies
 * ({@link CountersCollector}), {@code switchml_build_info{version,commit}}, the JVM and process metrics of
 * {@code prometheus-metrics-instrumentation-jvm}, and gauges and counters read by callback from the control plane
 * (aggregator memory, each shard thread's CPU time). Every value is read when scraped; nothing is pushed from the
 * data path.
 */
public final class ApplianceMetrics
{
    private final PrometheusRegistry registry = new PrometheusRegistry();
    private final ExpositionFormats formats = ExpositionFormats.init();

    /**
     * @param counters      the counters to export, e.g. {@link CountersFile#countersReader()}.
     * @param slotLatencies called on each scrape: latency histograms in ns by shard id.
     */
    public ApplianceMetrics(
        final CountersReader counters, final Supplier<? extends Map<Integer, ? extends Histogram>> slotLatencies)
    {
        registry.register(new CountersCollector(counters, slotLatencies));
        final Info buildInfo = Info.builder()
            .name(MetricNames.BUILD + "_info")
            .help("The running build: release and commit")
            .labelNames("version", "commit")
            .register(registry);
        buildInfo.setLabelValues(BuildInfo.version(), BuildInfo.commit());
        JvmMetrics.builder().register(registry);
    }

    /**
     * Export the aggregator memory reserved by jobs against its budget.
     */
    public ApplianceMetrics memory(final DoubleSupplier usedBytes, final DoubleSupplier budgetBytes)
    {
        GaugeWithCallback.builder().name(MetricNames.MEMORY_USED_BYTES).unit(Unit.BYTES)
            .help("Aggregator memory reserved by the admitted jobs")
            .callback((callback) -> callback.call(usedBytes.getAsDouble()))
            .register(registry);
        GaugeWithCallback.builder().name(MetricNames.MEMORY_BUDGET_BYTES).unit(Unit.BYTES)
            .help("Aggregator memory budget (switchml.appliance.memory.budget.bytes)")
            .callback((callback) -> callback.call(budgetBytes.getAsDouble()))
            .register(registry);
        return this;
    }

    /**
     * Export whether each aggregation backend is healthy: {@code switchml_backend_up{backend}} 1, or 0 while it is
     * not started or has failed (the reason is in the log, the journal and every fallback's reason). An alert on an
     * offload that stopped working needs this: its jobs go to software quietly, correct but slower.
     *
     * @param backends the backends, in order of preference; empty until they are started.
     */
    public ApplianceMetrics backends(final Supplier<? extends List<? extends Backend>> backends)
    {
        GaugeWithCallback.builder().name(MetricNames.BACKEND_UP)
            .help("1 while the aggregation backend is started and healthy, else 0 (the reason is in the log)")
            .labelNames(MetricNames.BACKEND_LABEL)
            .callback((callback) ->
            {
                for (final Backend backend : backends.get())
                {
                    callback.call(backend.health() == null ? 1 : 0, backend.name());
                }
            })
            .register(registry);
        return this;
    }

    /**
     * Export each shard thread's CPU time, read from the JVM's {@link ThreadMXBean} by thread id.
     *
     * @param shardCount    number of shards.
     * @param shardThreadId thread id of a shard's thread, or -1 while it has none.
     */
    public ApplianceMetrics shardCpu(final int shardCount, final IntToLongFunction shardThreadId)
    {
        final ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        if (!threads.isThreadCpuTimeSupported())
        {
            return this;
        }
        CounterWithCallback.builder().name(MetricNames.SHARD_CPU_SECONDS).unit(Unit.SECONDS)
            .help("CPU time used by each data-plane shard's thread (user and system)")
            .labelNames(MetricNames.SHARD_LABEL)
            .callback((callback) ->
            {
                for (int shard = 0; shard < shardCount; shard++)
                {
                    final long threadId = shardThreadId.applyAsLong(shard);
                    final long cpuNs = threadId < 0 ? -1 : threads.getThreadCpuTime(threadId);
                    if (cpuNs >= 0)
                    {
                        callback.call(Unit.nanosToSeconds(cpuNs), Integer.toString(shard));
                    }
                }
            })
            .register(registry);
        return this;
    }

    /**
     * @return the registry, to register more or to scrape directly.
     */
    public PrometheusRegistry registry()
    {
        return registry;
    }

    /**
     * @param acceptHeader the scraper's {@code Accept} header, or null.
     * @return the writer for it: OpenMetrics text when asked for, else the Prometheus text format 0.0.4 (protobuf is
     * not built in, so a scraper that prefers it gets text too).
     */
    public ExpositionFormatWriter writerFor(final String acceptHeader)
    {
        final ExpositionFormatWriter writer = formats.findWriter(acceptHeader);
        if (writer.isAvailable())
        {
            return writer;
        }
        return formats.getOpenMetricsTextFormatWriter().accepts(acceptHeader) ?
            formats.getOpenMetricsTextFormatWriter() : formats.getPrometheusTextFormatWriter();
    }

    /**
     * Scrape the registry and write it.
     *
     * @return the content type written.
     */
    public String write(final String acceptHeader, final OutputStream out) throws IOException
    {
        final ExpositionFormatWriter writer = writerFor(acceptHeader);
        writer.write(out, registry.scrape());
        return writer.getContentType();
    }
}
