package io.switchml.ops;

import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.CountersFileReader;
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

    private static final String PREFIX = "switchml_";

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
     * @return the counters in {@code /metrics} samples (system, per shard and per job), leaving out the
     * slot latency summary.
     */
    static List<CounterRow> fromSamples(final List<PrometheusParser.Sample> samples)
    {
        final List<CounterRow> rows = new ArrayList<>();
        for (final PrometheusParser.Sample sample : samples)
        {
            final String metric = sample.name();
            if (!metric.startsWith(PREFIX) || metric.startsWith(PREFIX + "slot_latency_seconds") || Double.isNaN(sample.value()))
            {
                continue;
            }
            final boolean gauge = "gauge".equals(sample.type().toLowerCase(Locale.ROOT));
            final long value = (long)sample.value();
            final Map<String, String> labels = sample.labels();
            if (labels.containsKey("job") && metric.startsWith(PREFIX + "job_"))
            {
                rows.add(new CounterRow(-1, JOB, parseId(labels.get("job")), metric.substring(PREFIX.length() + 4),
                    labels.getOrDefault("tenant", ""), labels.getOrDefault("name", ""), gauge, value, metric));
            }
            else if (labels.containsKey("shard") && metric.startsWith(PREFIX + "shard_"))
            {
                rows.add(new CounterRow(-1, SHARD, parseId(labels.get("shard")), metric.substring(PREFIX.length() + 6),
                    "", "", gauge, value, metric));
            }
            else if (labels.isEmpty())
            {
                final String name = metric.substring(PREFIX.length());
                int ownerId = -1;
                for (final SystemCounter counter : SystemCounter.values())
                {
                    if (counter.metricName().equals(name))
                    {
                        ownerId = counter.id();
                    }
                }
                rows.add(new CounterRow(-1, SYSTEM, ownerId, name, "", "", gauge, value, metric));
            }
        }
        return rows;
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
