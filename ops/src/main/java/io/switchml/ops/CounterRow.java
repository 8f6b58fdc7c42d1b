package io.switchml.ops;

import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.CountersFileReader;
import io.switchml.protocol.telemetry.MetricNames;
import io.switchml.protocol.telemetry.SystemCounter;
import org.agrona.concurrent.status.CountersReader;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One counter as the CLI shows it, read from the counters file (local) or from {@code /metrics} (remote).
 *
 * @param id      counter id in the counters file, or -1 when read through {@code /metrics}.
 * @param type    "system", "shard" or "job".
 * @param ownerId shard id or job id; the counter id for a system counter.
 * @param name    metric name, e.g. "packets_in".
 * @param tenant  tenant of a job counter, else "".
 * @param jobName name of a job counter's job, else "".
 * @param gauge   whether the value may go down.
 * @param value   the value.
 * @param label   the counter's label in the counters file, or its Prometheus name remotely.
 */
record CounterRow(int id, String type, int ownerId, String name, String tenant, String jobName, boolean gauge,
    long value, String label)
{
    static final String SYSTEM = "system";
    static final String SHARD = "shard";
    static final String JOB = "job";

    private static final String TOTAL_SUFFIX = "_total";
    private static final String SHARD_PREFIX = MetricNames.PREFIX + MetricNames.scope(CounterTypes.SHARD);
    private static final String JOB_PREFIX = MetricNames.PREFIX + MetricNames.scope(CounterTypes.JOB);
    private static final String BACKEND_PREFIX = MetricNames.PREFIX + MetricNames.scope(CounterTypes.BACKEND);
    private static final List<String> NOT_IN_COUNTERS_FILE = List.of(MetricNames.SLOT_LATENCY_SECONDS,
        MetricNames.SHARD_CPU_SECONDS, MetricNames.MEMORY_USED_BYTES, MetricNames.MEMORY_BUDGET_BYTES, MetricNames.BUILD,
        MetricNames.BACKEND_UP);

    /**
     * @return a key that identifies the counter across reads (for rates), e.g. "shard/0/packets_in".
     */
    String key()
    {
        return type + "/" + ownerId + "/" + name;
    }

    /**
     * @return who the counter belongs to, e.g. "", "shard 0", "job 3 acme/resnet".
     */
    String owner()
    {
        return switch (type)
        {
            case SHARD -> "shard " + ownerId;
            case JOB -> "job " + ownerId + " " + tenant + "/" + jobName;
            default -> "";
        };
    }

    Map<String, Object> toJson()
    {
        final Map<String, Object> json = new LinkedHashMap<>();
        if (id >= 0)
        {
            json.put("id", id);
        }
        json.put("type", type);
        if (!SYSTEM.equals(type))
        {
            json.put(type, ownerId);
        }
        if (JOB.equals(type))
        {
            json.put("tenant", tenant);
            json.put("job_name", jobName);
        }
        json.put("name", name);
        json.put("kind", gauge ? "gauge" : "counter");
        json.put("value", value);
        return json;
    }

    /**
     * @return every counter allocated in the counters file, in id order.
     */
    static List<CounterRow> read(final CountersFileReader file)
    {
        final CountersReader reader = file.countersReader();
        final List<CounterRow> rows = new ArrayList<>();
        reader.forEach((counterId, typeId, keyBuffer, label) ->
        {
            String name = CounterTypes.metricName(keyBuffer);
            final boolean gauge = CounterTypes.KIND_GAUGE == CounterTypes.kind(keyBuffer);
            final long value = reader.getCounterValue(counterId);
            switch (typeId)
            {
                case CounterTypes.SYSTEM ->
                {
                    if (name.isEmpty())
                    {
                        final SystemCounter systemCounter = SystemCounter.get(counterId);
                        name = null != systemCounter ? systemCounter.metricName() : "counter_" + counterId;
                    }
                    rows.add(new CounterRow(counterId, SYSTEM, counterId, name, "", "", gauge, value, label));
                }
                case CounterTypes.SHARD -> rows.add(new CounterRow(
                    counterId, SHARD, CounterTypes.ownerId(keyBuffer), name, "", "", gauge, value, label));
                case CounterTypes.JOB -> rows.add(new CounterRow(counterId, JOB, CounterTypes.ownerId(keyBuffer), name,
                    CounterTypes.tenant(keyBuffer), CounterTypes.jobName(keyBuffer), gauge, value, label));
                case CounterTypes.BACKEND -> rows.add(new CounterRow(counterId, "backend " + CounterTypes.tenant(keyBuffer),
                    CounterTypes.ownerId(keyBuffer), name, "", "", gauge, value, label));
                default -> rows.add(new CounterRow(counterId, "type" + typeId, counterId,
                    name.isEmpty() ? "counter_" + counterId : name, "", "", gauge, value, label));
            }
        });
        return rows;
    }

    /**
     * @return the counters of the counters file in {@code /metrics} samples (system, per shard, per job and per
     * backend), named back as in the file ({@link MetricNames#internalName}); the slot latency histogram, the build
     * info, the JVM's and process's metrics and the other values the file does not hold are left out.
     */
    static List<CounterRow> fromSamples(final List<PrometheusParser.Sample> samples)
    {
        final List<CounterRow> rows = new ArrayList<>();
        for (final PrometheusParser.Sample sample : samples)
        {
            final String metric = sample.name();
            if (!metric.startsWith(MetricNames.PREFIX) || NOT_IN_COUNTERS_FILE.stream().anyMatch(metric::startsWith) ||
                Double.isNaN(sample.value()))
            {
                continue;
            }
            final String type = sample.type().toLowerCase(Locale.ROOT);
            final boolean gauge = "gauge".equals(type);
            final String family = "counter".equals(type) && metric.endsWith(TOTAL_SUFFIX) ?
                metric.substring(0, metric.length() - TOTAL_SUFFIX.length()) : metric;
            final Map<String, String> labels = sample.labels();
            final String reason = labels.get(MetricNames.REASON_LABEL);
            if (labels.containsKey(MetricNames.JOB_LABEL) && family.startsWith(JOB_PREFIX))
            {
                final String scoped = family.substring(JOB_PREFIX.length());
                rows.add(new CounterRow(-1, JOB, parseId(labels.get(MetricNames.JOB_LABEL)),
                    MetricNames.internalName(scoped, reason), labels.getOrDefault(MetricNames.TENANT_LABEL, ""),
                    labels.getOrDefault(MetricNames.JOB_NAME_LABEL, ""), gauge, value(sample, scoped), metric));
            }
            else if (labels.containsKey(MetricNames.SHARD_LABEL) && family.startsWith(SHARD_PREFIX))
            {
                final String scoped = family.substring(SHARD_PREFIX.length());
                rows.add(new CounterRow(-1, SHARD, parseId(labels.get(MetricNames.SHARD_LABEL)),
                    MetricNames.internalName(scoped, reason), "", "", gauge, value(sample, scoped), metric));
            }
            else if (labels.containsKey(MetricNames.BACKEND_LABEL) && family.startsWith(BACKEND_PREFIX))
            {
                final String scoped = family.substring(BACKEND_PREFIX.length());
                final String name = MetricNames.FALLBACKS.equals(scoped) ? scoped : MetricNames.internalName(scoped, reason);
                rows.add(new CounterRow(-1, "backend " + labels.get(MetricNames.BACKEND_LABEL), -1, name, "", "", gauge,
                    value(sample, scoped), MetricNames.FALLBACKS.equals(scoped) && null != reason ? reason : metric));
            }
            else if (labels.isEmpty())
            {
                final String scoped = family.substring(MetricNames.PREFIX.length());
                final String name = MetricNames.internalName(scoped, null);
                int ownerId = -1;
                for (final SystemCounter counter : SystemCounter.values())
                {
                    if (counter.metricName().equals(name))
                    {
                        ownerId = counter.id();
                    }
                }
                rows.add(new CounterRow(-1, SYSTEM, ownerId, name, "", "", gauge, value(sample, scoped), metric));
            }
        }
        return rows;
    }

    private static long value(final PrometheusParser.Sample sample, final String scopedName)
    {
        return Math.round(sample.value() * MetricNames.internalScale(scopedName));
    }

    private static int parseId(final String text)
    {
        try
        {
            return Integer.parseInt(text);
        }
        catch (final NumberFormatException ex)
        {
            return -1;
        }
    }
}
