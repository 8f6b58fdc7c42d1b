package io.switchml.ops;

import io.switchml.protocol.Json;
import io.switchml.protocol.telemetry.CountersFileReader;
import io.switchml.protocol.telemetry.ErrorRecord;
import io.switchml.protocol.telemetry.MetricNames;
import io.switchml.protocol.telemetry.SystemCounter;
import picocli.CommandLine.Command;

import java.io.PrintWriter;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code ops status}: is the appliance up; uptime, version, shards and their CPUs, jobs, aggregator
 * memory, errors.
 */
@Command(name = "status", aliases = "health",
    description = {
        "Is the appliance up: uptime, version, shards and their CPUs, jobs, aggregator memory, errors.",
        "Locally from the control endpoint, the counters file and /proc; remotely from /health and /metrics."})
final class StatusCommand extends OpsSubcommand
{
    int execute() throws Exception
    {
        final Map<String, Object> status = target().isRemote() ? remote() : local();
        if (json())
        {
            out().println(Json.pretty(status));
        }
        else
        {
            print(out(), status);
        }
        return "up".equals(status.get("status")) ? OpsException.OK : OpsException.FAILED;
    }

    private Map<String, Object> local() throws Exception
    {
        final Target target = target();
        final Map<String, Object> status = new LinkedHashMap<>();
        try (CountersFileReader counters = target.openCounters())
        {
            final long pid = counters.pid();
            if (!counters.isWriterAlive())
            {
                throw new OpsException(OpsException.UNREACHABLE, "the appliance is not running: pid " + pid +
                    " that wrote " + counters.file() + " (started " + Format.time(counters.startTimestampMs()) + ") is gone");
            }
            final Map<String, String> health;
            final List<Map<String, String>> jobs;
            final int controlPort = target.controlPort();
            final Map<String, String> failures;
            try (ControlClient control = target.control())
            {
                health = control.health();
                jobs = control.jobs();
                failures = health.getOrDefault("backendsDown", "").isEmpty() ? Map.of() : control.backendFailures();
            }
            final Map<String, Long> system = systemCounters(CounterRow.read(counters));

            status.put("status", health.getOrDefault("status", "unknown"));
            status.put("mode", "local");
            status.put("pid", pid);
            status.put("started_at", Format.iso(counters.startTimestampMs()));
            status.put("uptime_ms", parseLong(health.get("uptimeMs")));
            status.put("version", version(target.announcedVersion()));
            status.put("transport", health.get("transport"));
            status.put("control_security", controlSecurity(health.get("tls"), health.get("auth")));
            status.put("backends", backends(health.get("backends"), health.get("backendsDown")));
            if (!failures.isEmpty())
            {
                status.put("backend_failures", failures);
            }
            final int shardCount = (int)parseLong(health.get("shards"));
            final List<Map<String, Object>> shards = new ArrayList<>();
            final List<ShardThreads.ShardThread> threads = ShardThreads.of(pid);
            for (int shard = 0; shard < shardCount; shard++)
            {
                final Map<String, Object> entry = new LinkedHashMap<>();
                entry.put("shard", shard);
                if (threads.size() == shardCount)
                {
                    final ShardThreads.ShardThread thread = threads.get(shard);
                    entry.put("thread", thread.tid());
                    entry.put("cpus_allowed", thread.cpusAllowed());
                    entry.put("pinned", thread.pinned());
                    entry.put("last_cpu", thread.lastCpu());
                    entry.put("cpu_time_ms", thread.cpuTimeMs());
                }
                shards.add(entry);
            }
            status.put("shards", shards);
            status.put("jobs", jobSummary(parseLong(health.get("jobs")), system, jobs));
            status.put("memory", memory(parseLong(health.get("memoryUsedBytes")), parseLong(health.get("memoryBudgetBytes"))));
            final List<ErrorRecord> errors = counters.readErrors();
            final Map<String, Object> errorSummary = new LinkedHashMap<>();
            errorSummary.put("distinct", errors.size());
            errorSummary.put("total", system.getOrDefault(SystemCounter.ERRORS.metricName(), 0L));
            if (!errors.isEmpty())
            {
                final ErrorRecord last = errors.stream()
                    .max((a, b) -> Long.compare(a.lastObservationTimestampMs(), b.lastObservationTimestampMs())).orElseThrow();
                errorSummary.put("last_at", Format.iso(last.lastObservationTimestampMs()));
                errorSummary.put("last", firstLine(last.encodedException()));
            }
            status.put("errors", errorSummary);
            status.put("traffic", traffic(system));
            final Map<String, Object> endpoints = new LinkedHashMap<>();
            endpoints.put("control", target.controlHost() + ":" + controlPort);
            endpoints.put("dir", target.dir().toString());
            status.put("endpoints", endpoints);
        }
        return status;
    }

    private Map<String, Object> remote()
    {
        final Target target = target();
        final HttpResponse<String> healthResponse = target.httpGet("health");
        final Object parsed;
        try
        {
            parsed = Json.parse(healthResponse.body());
        }
        catch (final IllegalArgumentException ex)
        {
            throw new OpsException(OpsException.FAILED, "GET " + healthResponse.uri() + " answered " +
                healthResponse.statusCode() + " without JSON: " + healthResponse.body().strip());
        }
        if (!(parsed instanceof Map<?, ?> health))
        {
            throw new OpsException(OpsException.FAILED, "GET " + healthResponse.uri() + " is not a JSON object");
        }
        final List<PrometheusParser.Sample> samples = PrometheusParser.parse(target.httpGetOk("metrics"));
        final Map<String, Long> system = systemCounters(CounterRow.fromSamples(samples));
        final Map<String, Object> status = new LinkedHashMap<>();
        status.put("status", healthResponse.statusCode() == 200 ? String.valueOf(health.get("status")) : "not ready (" +
            healthResponse.statusCode() + ", " + health.get("status") + ")");
        status.put("mode", "remote");
        status.put("url", target.url().toString());
        status.put("uptime_ms", number(health.get("uptimeMs")));
        String applianceVersion = null;
        for (final PrometheusParser.Sample sample : samples)
        {
            if ((io.switchml.protocol.telemetry.MetricNames.BUILD + "_info").equals(sample.name()))
            {
                applianceVersion = sample.labels().get("version");
            }
        }
        status.put("version", version(applianceVersion));
        status.put("transport", health.get("transport"));
        final Map<String, Object> backends = new LinkedHashMap<>();
        for (final PrometheusParser.Sample sample : samples)
        {
            if (MetricNames.BACKEND_UP.equals(sample.name()))
            {
                backends.put(sample.labels().get(MetricNames.BACKEND_LABEL), sample.value() == 1 ? "up" : "down");
            }
        }
        status.put("backends", backends);
        final List<Map<String, Object>> shards = new ArrayList<>();
        for (int shard = 0; shard < number(health.get("shards")); shard++)
        {
            final Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("shard", shard);
            shards.add(entry);
        }
        status.put("shards", shards);
        status.put("jobs", jobSummary(number(health.get("jobs")), system, null));
        status.put("memory", memory(number(health.get("memoryUsedBytes")), number(health.get("memoryBudgetBytes"))));
        final Map<String, Object> errorSummary = new LinkedHashMap<>();
        errorSummary.put("total", system.getOrDefault(SystemCounter.ERRORS.metricName(), 0L));
        status.put("errors", errorSummary);
        status.put("traffic", traffic(system));
        return status;
    }

    /**
     * @param appliance the version the appliance reports (its journal locally, switchml_build_info remotely), or null.
     */
    private static Map<String, Object> version(final String appliance)
    {
        final Map<String, Object> version = new LinkedHashMap<>();
        version.put("ops", Version.version());
        version.put("appliance", appliance);
        return version;
    }

    private static Map<String, Object> jobSummary(
        final long total, final Map<String, Long> system, final List<Map<String, String>> jobs)
    {
        final Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("total", total);
        summary.put("active", system.getOrDefault(SystemCounter.JOBS_ACTIVE.metricName(), 0L));
        summary.put("created", system.getOrDefault(SystemCounter.JOBS_CREATED.metricName(), 0L));
        summary.put("aborted", system.getOrDefault(SystemCounter.JOBS_ABORTED.metricName(), 0L));
        if (jobs != null)
        {
            final List<String> names = new ArrayList<>();
            for (final Map<String, String> job : jobs)
            {
                names.add(job.get("job") + " " + job.get("tenant") + "/" + job.get("name") + " (" + job.get("state") + ")");
            }
            summary.put("list", names);
        }
        return summary;
    }

    private static Map<String, Object> memory(final long usedBytes, final long budgetBytes)
    {
        final Map<String, Object> memory = new LinkedHashMap<>();
        memory.put("used_bytes", usedBytes);
        memory.put("budget_bytes", budgetBytes);
        memory.put("used_percent", budgetBytes > 0 ? Math.round(1000.0 * usedBytes / budgetBytes) / 10.0 : 0.0);
        return memory;
    }

    private static Map<String, Object> traffic(final Map<String, Long> system)
    {
        final Map<String, Object> traffic = new LinkedHashMap<>();
        for (final SystemCounter counter : new SystemCounter[] {
            SystemCounter.PACKETS_IN, SystemCounter.PACKETS_OUT, SystemCounter.BYTES_IN, SystemCounter.BYTES_OUT, SystemCounter.DROPS})
        {
            traffic.put(counter.metricName(), system.getOrDefault(counter.metricName(), 0L));
        }
        return traffic;
    }

    private static Map<String, Long> systemCounters(final List<CounterRow> rows)
    {
        final Map<String, Long> values = new LinkedHashMap<>();
        for (final CounterRow row : rows)
        {
            if (CounterRow.SYSTEM.equals(row.type()))
            {
                values.put(row.name(), row.value());
            }
        }
        return values;
    }

    /**
     * @return each backend of the HEALTH reply's comma lists with "up" or "down", in order of preference.
     */
    static Map<String, Object> backends(final String names, final String down)
    {
        final Map<String, Object> backends = new LinkedHashMap<>();
        if (names == null || names.isEmpty())
        {
            return backends;
        }
        final List<String> failed = down == null || down.isEmpty() ? List.of() : List.of(down.split(","));
        for (final String name : names.split(","))
        {
            backends.put(name, failed.contains(name) ? "down" : "up");
        }
        return backends;
    }

    @SuppressWarnings("unchecked")
    private void print(final PrintWriter out, final Map<String, Object> status)
    {
        final String row = "%-11s %s%n";
        final String mode = "local".equals(status.get("mode")) ? "pid " + status.get("pid") + ", " : "";
        out.printf(row, "appliance", status.get("status") + " (" + mode + "up " + Format.duration((Long)status.get("uptime_ms")) +
            (status.containsKey("started_at") ? ", started " + Format.time(java.time.Instant.parse(
                (String)status.get("started_at")).toEpochMilli()) : "") + ")");
        final Map<String, Object> versions = (Map<String, Object>)status.get("version");
        out.printf(row, "version", "ops " + versions.get("ops") + (versions.get("appliance") != null ?
            ", appliance " + versions.get("appliance") : " (the appliance did not report its own)"));
        final List<Map<String, Object>> shards = (List<Map<String, Object>>)status.get("shards");
        final Map<String, Object> backends = (Map<String, Object>)status.get("backends");
        if (backends != null && !backends.isEmpty())
        {
            final Map<String, Object> failures = (Map<String, Object>)status.getOrDefault("backend_failures", Map.of());
            out.printf(row, "backends", String.join(", ", backends.entrySet().stream()
                .map(entry -> entry.getKey() + " " + entry.getValue() +
                    (failures.containsKey(entry.getKey()) ? " (" + failures.get(entry.getKey()) + ")" : "")).toList()) +
                (backends.containsValue("down") && failures.isEmpty() ? " (why: the appliance's log, `switchml ops events`)" : ""));
        }
        out.printf(row, "shards", shards.size() + " on " + status.get("transport"));
        for (final Map<String, Object> shard : shards)
        {
            if (shard.containsKey("thread"))
            {
                out.printf("  shard %-3s thread %s, cpus %s%s, last ran on cpu %s, %s cpu time%n", shard.get("shard"),
                    shard.get("thread"), shard.get("cpus_allowed"), Boolean.TRUE.equals(shard.get("pinned")) ? " (pinned)" : " (not pinned)",
                    shard.get("last_cpu"), Format.duration((Long)shard.get("cpu_time_ms")));
            }
            else
            {
                out.println("  (each shard's CPUs are visible on the appliance host only)");
                break;
            }
        }
        final Map<String, Object> jobs = (Map<String, Object>)status.get("jobs");
        out.printf(row, "jobs", jobs.get("total") + " (" + jobs.get("active") + " active; " + jobs.get("created") +
            " created, " + jobs.get("aborted") + " aborted since start)");
        if (jobs.get("list") instanceof List<?> list)
        {
            for (final Object job : list)
            {
                out.printf("  job %s%n", job);
            }
        }
        final Map<String, Object> memory = (Map<String, Object>)status.get("memory");
        out.printf(row, "memory", Format.bytes((Long)memory.get("used_bytes")) + " of " +
            Format.bytes((Long)memory.get("budget_bytes")) + " aggregator budget (" + memory.get("used_percent") + "%)");
        final Map<String, Object> traffic = (Map<String, Object>)status.get("traffic");
        out.printf(row, "traffic", Format.count((Long)traffic.get("packets_in")) + " packets in (" +
            Format.bytes((Long)traffic.get("bytes_in")) + "), " + Format.count((Long)traffic.get("packets_out")) +
            " out (" + Format.bytes((Long)traffic.get("bytes_out")) + "), " + Format.count((Long)traffic.get("drops")) + " dropped");
        final Map<String, Object> errors = (Map<String, Object>)status.get("errors");
        out.printf(row, "errors", errors.containsKey("distinct") ?
            errors.get("distinct") + " distinct, " + errors.get("total") + " in all" +
                (errors.containsKey("last") ? "; last at " + errors.get("last_at") + ": " + errors.get("last") : "") :
            errors.get("total") + " in all (the error log is readable on the appliance host)");
        if (status.get("control_security") != null)
        {
            out.printf(row, "security", status.get("control_security"));
        }
        if (status.get("endpoints") instanceof Map<?, ?> endpoints)
        {
            out.printf(row, "control", endpoints.get("control"));
            out.printf(row, "dir", endpoints.get("dir"));
        }
        else
        {
            out.printf(row, "url", status.get("url"));
        }
    }

    private static String firstLine(final String text)
    {
        final int newline = text.indexOf('\n');
        return (newline < 0 ? text : text.substring(0, newline)).strip();
    }

    private static long parseLong(final String value)
    {
        try
        {
            return value == null ? 0 : Long.parseLong(value);
        }
        catch (final NumberFormatException ex)
        {
            return 0;
        }
    }

    private static long number(final Object value)
    {
        return value instanceof Number number ? number.longValue() : 0;
    }

    /**
     * @return what protects the control channel, flagging plain TCP and missing authorization, or null when the
     * appliance does not say (an older one).
     */
    static String controlSecurity(final String tls, final String auth)
    {
        if (tls == null && auth == null)
        {
            return null;
        }
        return ("on".equals(tls) ? "control channel TLS" : "INSECURE: control channel is plain TCP (--insecure-control)") +
            ", " + ("on".equals(auth) ? "authorization on" : "INSECURE: authorization off (no credentials file)");
    }
}
