package io.switchml.ops;

import io.switchml.protocol.Json;
import io.switchml.protocol.telemetry.CountersFileReader;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * {@code ops counters}: every counter of the appliance (system, per shard, per job), once or refreshed
 * like {@code top} with rates.
 */
@Command(name = "counters",
    description = {
        "Every counter: system totals, per shard and per job; --watch refreshes like top.",
        "Locally from the counters file (live, no round trip to the appliance); remotely from /metrics. With --watch " +
            "the table is redrawn in place on a terminal, with rates per second; when stdout is not a terminal each " +
            "refresh is appended, without cursor escapes."})
final class CountersCommand extends OpsSubcommand
{
    private static final String CLEAR_SCREEN = "\033[H\033[2J";

    @Option(names = "--job", paramLabel = "JOB", description = "Only this job's counters: its id, name or tenant/name.")
    String job;

    @Option(names = "--name", paramLabel = "PATTERN", split = ",",
        description = "Only counters whose name contains PATTERN, or matches it when it has * or ? (e.g. 'drop_*'); " +
            "several patterns, comma-separated, match any.")
    List<String> namePatterns;

    @Option(names = "--type", paramLabel = "TYPE", split = ",", description = "Only these types: system, shard, job.")
    List<String> types;

    @Option(names = "--nonzero", description = "Leave out counters that are 0.")
    boolean nonZero;

    @Option(names = {"-w", "--watch"}, description = "Refresh until interrupted (or --iterations), with rates per second.")
    boolean watch;

    @Option(names = "--interval-ms", paramLabel = "MS", defaultValue = "1000",
        description = "Time between refreshes with --watch (default ${DEFAULT-VALUE}).")
    long intervalMs;

    @Option(names = "--iterations", paramLabel = "N", defaultValue = "0",
        description = "With --watch: stop after N refreshes (default 0: until interrupted).")
    int iterations;

    int execute() throws Exception
    {
        if (intervalMs < 10)
        {
            throw usage("--interval-ms must be at least 10: " + intervalMs);
        }
        if (iterations < 0)
        {
            throw usage("--iterations must not be negative: " + iterations);
        }
        if (types != null)
        {
            for (final String type : types)
            {
                if (!List.of(CounterRow.SYSTEM, CounterRow.SHARD, CounterRow.JOB).contains(type))
                {
                    throw usage("--type must be system, shard or job: '" + type + "'");
                }
            }
        }
        final List<Pattern> names = new ArrayList<>();
        if (namePatterns != null)
        {
            namePatterns.forEach(pattern -> names.add(compile(pattern)));
        }
        final Target target = target();
        final CountersFileReader file = target.isRemote() ? null : target.openCounters();
        try
        {
            final int frames = watch ? iterations : 1;
            Map<String, Long> previous = null;
            long previousNs = 0;
            boolean running = true;
            final long startNs = System.nanoTime();
            for (int frame = 1; frames == 0 || frame <= frames; frame++)
            {
                if (frame > 1)
                {
                    final long dueNs = startNs + (frame - 1) * intervalMs * 1_000_000L;
                    final long waitNs = dueNs - System.nanoTime();
                    if (waitNs > 0)
                    {
                        Thread.sleep(waitNs / 1_000_000L, (int)(waitNs % 1_000_000L));
                    }
                }
                final long nowNs = System.nanoTime();
                final long nowMs = System.currentTimeMillis();
                final List<CounterRow> all = file != null ? CounterRow.read(file) :
                    CounterRow.fromSamples(PrometheusParser.parse(target.httpGetOk("metrics")));
                running = file == null || file.isWriterAlive();
                final List<CounterRow> rows = filter(all, names);
                if (frame == 1 && job != null && all.stream().noneMatch(row -> CounterRow.JOB.equals(row.type()) && matchesJob(row)))
                {
                    throw new OpsException(OpsException.FAILED, "no counters of job '" + job + "'" + knownJobs(all));
                }
                final Map<String, Double> rates = new HashMap<>();
                final Map<String, Long> values = new HashMap<>();
                for (final CounterRow row : rows)
                {
                    values.put(row.key(), row.value());
                    if (previous != null && previous.containsKey(row.key()) && !row.gauge())
                    {
                        rates.put(row.key(), (row.value() - previous.get(row.key())) * 1e9 / (nowNs - previousNs));
                    }
                }
                render(out(), rows, rates, watch, frame, frames, nowMs, file, running);
                out().flush();
                previous = values;
                previousNs = nowNs;
            }
            if (!running)
            {
                throw new OpsException(OpsException.UNREACHABLE, "the appliance is not running: pid " + file.pid() +
                    " that wrote " + file.file() + " is gone; these are its last values");
            }
            return OpsException.OK;
        }
        finally
        {
            if (file != null)
            {
                file.close();
            }
        }
    }

    private List<CounterRow> filter(final List<CounterRow> all, final List<Pattern> names)
    {
        final List<CounterRow> rows = new ArrayList<>();
        for (final CounterRow row : all)
        {
            if (types != null && !types.contains(row.type()) ||
                job != null && !(CounterRow.JOB.equals(row.type()) && matchesJob(row)) ||
                !names.isEmpty() && names.stream().noneMatch(name -> name.matcher(row.name()).find()) ||
                nonZero && row.value() == 0)
            {
                continue;
            }
            rows.add(row);
        }
        return rows;
    }

    private boolean matchesJob(final CounterRow row)
    {
        return job.equals(Integer.toString(row.ownerId())) || job.equals(row.jobName()) ||
            job.equals(row.tenant() + "/" + row.jobName());
    }

    private static String knownJobs(final List<CounterRow> all)
    {
        final Map<Integer, String> jobs = new LinkedHashMap<>();
        for (final CounterRow row : all)
        {
            if (CounterRow.JOB.equals(row.type()))
            {
                jobs.put(row.ownerId(), row.ownerId() + " " + row.tenant() + "/" + row.jobName());
            }
        }
        return jobs.isEmpty() ? " (no job has counters now: only running jobs do)" : " (jobs: " + String.join(", ", jobs.values()) + ")";
    }

    static Pattern compile(final String pattern)
    {
        if (pattern.indexOf('*') < 0 && pattern.indexOf('?') < 0)
        {
            return Pattern.compile(Pattern.quote(pattern));
        }
        final StringBuilder regex = new StringBuilder("^");
        for (final char c : pattern.toCharArray())
        {
            regex.append(c == '*' ? ".*" : c == '?' ? "." : Pattern.quote(String.valueOf(c)));
        }
        return Pattern.compile(regex.append('$').toString());
    }

    private void render(
        final PrintWriter out,
        final List<CounterRow> rows,
        final Map<String, Double> rates,
        final boolean watching,
        final int frame,
        final int frames,
        final long nowMs,
        final CountersFileReader file,
        final boolean running)
    {
        final String source = file != null ? file.file().toString() : target().url() + "metrics";
        if (json())
        {
            final Map<String, Object> document = new LinkedHashMap<>();
            document.put("time", Format.iso(nowMs));
            document.put("source", source);
            if (file != null)
            {
                document.put("pid", file.pid());
                document.put("running", running);
            }
            if (watching)
            {
                document.put("refresh", frame);
            }
            final List<Map<String, Object>> counters = new ArrayList<>();
            for (final CounterRow row : rows)
            {
                final Map<String, Object> entry = row.toJson();
                if (watching)
                {
                    final Double rate = rates.get(row.key());
                    entry.put("rate_per_sec", rate == null ? null : Math.round(rate * 10) / 10.0);
                }
                counters.add(entry);
            }
            document.put("counters", counters);
            out.println(watching ? Json.write(document) : Json.pretty(document));
            return;
        }
        if (watching && interactive())
        {
            out.print(CLEAR_SCREEN);
        }
        else if (watching && frame > 1)
        {
            out.println();
        }
        out.println("counters of " + source + (file != null ? " (pid " + file.pid() + (running ? "" : ", NOT RUNNING") + ")" : "") +
            " at " + Format.time(nowMs) + (watching ? ", refresh " + frame + (frames > 0 ? "/" + frames : "") +
            " every " + intervalMs + " ms" : ""));
        int ownerWidth = 5;
        int nameWidth = 4;
        for (final CounterRow row : rows)
        {
            ownerWidth = Math.max(ownerWidth, Math.min(40, row.owner().length()));
            nameWidth = Math.max(nameWidth, row.name().length());
        }
        final String format = "%-6s  %-" + ownerWidth + "s  %-" + nameWidth + "s  %15s" + (watching ? "  %10s" : "%s") + "%n";
        out.printf(format, "TYPE", "OWNER", "NAME", "VALUE", watching ? "RATE/s" : "");
        for (final CounterRow row : rows)
        {
            final Double rate = rates.get(row.key());
            out.printf(format, row.type(), Format.fit(row.owner(), ownerWidth), row.name(), Format.count(row.value()),
                watching ? (row.gauge() ? "gauge" : rate == null ? "-" : Format.si(rate)) : "");
        }
        if (rows.isEmpty())
        {
            out.println("(no counters match" + (job != null ? " job " + job : "") +
                (namePatterns != null ? " name " + String.join(",", namePatterns).toLowerCase(Locale.ROOT) : "") + ")");
        }
    }
}
