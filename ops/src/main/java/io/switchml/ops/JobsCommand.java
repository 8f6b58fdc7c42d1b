package io.switchml.ops;

import io.switchml.protocol.Json;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.protocol.telemetry.CountersFileReader;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code ops jobs}: list jobs, describe one (members, slots, counters, retransmissions, history, last
 * error), abort one.
 */
@Command(name = "jobs",
    description = {
        "Jobs: list (the default), describe one, abort one.",
        "Locally from the control endpoint, the counters file and the journal; remotely (--url) the jobs that have " +
            "counters in /metrics, without their state."},
    subcommands = {JobsCommand.ListJobs.class, JobsCommand.Describe.class, JobsCommand.Abort.class})
final class JobsCommand extends OpsSubcommand
{
    /** Job counters shown in lists and descriptions, in this order. */
    static final String[] COUNTERS = {
        "packets_in", "bytes_in", "packets_out", "slots_completed", "retransmissions_served", "duplicates", "drops"};

    @Option(names = {"-a", "--all"}, description = "Also jobs of this appliance run that have ended (from the journal).")
    boolean all;

    int execute()
    {
        return list(this, all);
    }

    /**
     * {@code ops jobs list}.
     */
    @Command(name = "list", description = "List the jobs: id, tenant/name, state, ranks joined, geometry, memory, progress.")
    static final class ListJobs extends OpsSubcommand
    {
        @Option(names = {"-a", "--all"}, description = "Also jobs of this appliance run that have ended (from the journal).")
        boolean all;

        int execute()
        {
            return list(this, all);
        }
    }

    /**
     * {@code ops jobs describe JOB}.
     */
    @Command(name = "describe", aliases = "show",
        description = "One job: state, members, slots and geometry, counters (retransmissions served, duplicates, drops), " +
            "its history in the journal and its last warning or error.")
    static final class Describe extends OpsSubcommand
    {
        @Parameters(paramLabel = "JOB", description = "Job id, name or tenant/name.")
        String job;

        int execute()
        {
            return describe(this, job);
        }
    }

    /**
     * {@code ops jobs abort JOB}.
     */
    @Command(name = "abort",
        description = "Abort a job through the control endpoint: its workers' all-reduce fails with the reason.")
    static final class Abort extends OpsSubcommand
    {
        @Parameters(paramLabel = "JOB", description = "Job id, name or tenant/name.")
        String job;

        @Option(names = "--reason", paramLabel = "TEXT", defaultValue = "aborted with switchml ops",
            description = "Why, passed on to the workers (default '${DEFAULT-VALUE}').")
        String reason;

        int execute() throws Exception
        {
            return abort(this, job, reason);
        }
    }

    /**
     * What is known about the jobs: the live ones (control endpoint or /metrics), their counters and, locally,
     * the journal's history of this run.
     */
    private record Known(Map<Integer, Map<String, Object>> jobs, JobHistory history, String countersNote)
    {
    }

    private static Known gather(final OpsSubcommand command, final boolean withHistory)
    {
        final Target target = command.target();
        final Map<Integer, Map<String, Object>> jobs = new TreeMap<>();
        final List<CounterRow> rows;
        String countersNote = null;
        JobHistory history = null;
        if (target.isRemote())
        {
            rows = CounterRow.fromSamples(PrometheusParser.parse(target.httpGetOk("metrics")));
        }
        else
        {
            try (ControlClient control = target.control())
            {
                for (final Map<String, String> line : control.jobs())
                {
                    final Map<String, Object> job = new LinkedHashMap<>();
                    for (final Map.Entry<String, String> field : line.entrySet())
                    {
                        if (!field.getKey().isEmpty())
                        {
                            job.put(Format.snakeCase(field.getKey()), typed(field.getKey(), field.getValue()));
                        }
                    }
                    jobs.put(((Number)job.get("job")).intValue(), job);
                }
            }
            catch (final java.io.IOException ex)
            {
                throw new OpsException(OpsException.UNREACHABLE, "lost the control endpoint: " + ex.getMessage(), ex);
            }
            List<CounterRow> read = List.of();
            try (CountersFileReader file = target.openCounters())
            {
                read = CounterRow.read(file);
            }
            catch (final OpsException ex)
            {
                countersNote = "counters unavailable: " + ex.getMessage();
            }
            rows = read;
            if (withHistory)
            {
                try (JournalReader reader = target.openJournal())
                {
                    history = JobHistory.read(reader);
                }
                catch (final OpsException ex)
                {
                    countersNote = (countersNote == null ? "" : countersNote + "; ") + "no history: " + ex.getMessage();
                }
            }
        }
        for (final CounterRow row : rows)
        {
            if (!CounterRow.JOB.equals(row.type()))
            {
                continue;
            }
            final Map<String, Object> job = jobs.computeIfAbsent(row.ownerId(), id ->
            {
                final Map<String, Object> created = new LinkedHashMap<>();
                created.put("job", id);
                created.put("name", row.jobName());
                created.put("tenant", row.tenant());
                return created;
            });
            @SuppressWarnings("unchecked")
            final Map<String, Object> counters = (Map<String, Object>)job.computeIfAbsent("counters", ignore -> new LinkedHashMap<>());
            counters.put(row.name(), row.value());
        }
        if (history != null)
        {
            for (final int jobId : history.jobIds())
            {
                final Map<String, Object> job = jobs.get(jobId);
                if (job != null)
                {
                    addHistory(job, history, jobId);
                }
            }
        }
        return new Known(jobs, history, countersNote);
    }

    private static void addHistory(final Map<String, Object> job, final JobHistory history, final int jobId)
    {
        final List<Map<String, Object>> events = new ArrayList<>();
        for (final JournalRecord record : history.events(jobId))
        {
            events.add(EventsCommand.toJson(record));
        }
        job.put("history", events);
        final JournalRecord end = history.end(jobId);
        if (end != null)
        {
            job.put("ended_at", Format.iso(end.timestampMs()));
            job.put("end_reason", end.message());
        }
        final JournalRecord lastError = history.lastError(jobId);
        job.put("last_error", lastError == null ? null : EventsCommand.toJson(lastError));
    }

    private static Map<String, Object> endedJob(final JobHistory history, final int jobId)
    {
        final JournalRecord first = history.first(jobId);
        final JournalRecord end = history.end(jobId);
        final Map<String, Object> job = new LinkedHashMap<>();
        job.put("job", jobId);
        job.put("name", first.jobName());
        job.put("tenant", first.tenant());
        job.put("state", end == null ? "unknown" : end.type() == JournalEvent.JOB_ABORTED ? "aborted" : "ended");
        for (final JournalRecord record : history.events(jobId))
        {
            if (record.type() == JournalEvent.JOB_CREATED && record.message() != null)
            {
                for (final Map.Entry<String, String> field : io.switchml.protocol.ControlProtocol.parse("JOB " + record.message()).entrySet())
                {
                    if (!field.getKey().isEmpty() && !job.containsKey(Format.snakeCase(field.getKey())) && !"ageMs".equals(field.getKey()) &&
                        !"joined".equals(field.getKey()))
                    {
                        job.put(Format.snakeCase(field.getKey()), typed(field.getKey(), field.getValue()));
                    }
                }
            }
        }
        addHistory(job, history, jobId);
        return job;
    }

    private static int list(final OpsSubcommand command, final boolean all)
    {
        if (all)
        {
            command.target().requireLocal("jobs --all");
        }
        final Known known = gather(command, all);
        final Map<Integer, Map<String, Object>> jobs = new TreeMap<>(known.jobs());
        if (all && known.history() != null)
        {
            for (final int jobId : known.history().jobIds())
            {
                if (!jobs.containsKey(jobId) && known.history().first(jobId) != null)
                {
                    jobs.put(jobId, endedJob(known.history(), jobId));
                }
            }
        }
        final PrintWriter out = command.out();
        if (command.json())
        {
            final List<Map<String, Object>> list = new ArrayList<>(jobs.values());
            list.forEach(job -> job.remove("history"));
            out.println(Json.pretty(list));
            return OpsException.OK;
        }
        if (jobs.isEmpty())
        {
            out.println(all ? "no jobs in this appliance run" : "no jobs (--all adds the ended jobs of this run)");
        }
        else
        {
            final String format = "%-5s %-24s %-8s %-6s %-8s %-7s %6s %6s %10s %8s %12s %9s %7s%n";
            out.printf(format, "JOB", "TENANT/NAME", "STATE", "RANKS", "BACKEND", "TYPE", "K", "S", "MEMORY", "AGE", "SLOTS DONE",
                "RETRANS", "DROPS");
            for (final Map<String, Object> job : jobs.values())
            {
                final Map<?, ?> counters = job.get("counters") instanceof Map<?, ?> map ? map : Map.of();
                out.printf(format, job.get("job"), Format.fit(job.get("tenant") + "/" + job.get("name"), 24),
                    job.getOrDefault("state", "-"),
                    job.containsKey("joined") ? job.get("joined") + "/" + job.get("world") : job.getOrDefault("world", "-"),
                    job.getOrDefault("backend", "-") + (job.containsKey("fallback") ? "*" : ""), job.getOrDefault("type", "-"), job.getOrDefault("k", "-"), job.getOrDefault("s", "-"),
                    job.get("memory_bytes") instanceof Number bytes ? Format.bytes(bytes.longValue()) : "-",
                    job.get("age_ms") instanceof Number age ? Format.duration(age.longValue()) : "-",
                    counter(counters, "slots_completed"), counter(counters, "retransmissions_served"), counter(counters, "drops"));
            }
        }
        if (command.target().isRemote())
        {
            out.println("(remote: jobs with counters in /metrics; state, ranks and geometry come from the control endpoint " +
                "on the appliance host)");
        }
        if (known.countersNote() != null)
        {
            out.println("(" + known.countersNote() + ")");
        }
        if (jobs.values().stream().anyMatch(job -> job.containsKey("fallback")))
        {
            out.println("(* not on its first-choice backend: `switchml ops jobs describe JOB` says why)");
        }
        return OpsException.OK;
    }

    private static String counter(final Map<?, ?> counters, final String name)
    {
        return counters.get(name) instanceof Number value ? Format.count(value.longValue()) : "-";
    }

    private static int resolve(final Known known, final String spec)
    {
        if (spec.matches("\\d+"))
        {
            final int jobId = Integer.parseInt(spec);
            if (known.jobs().containsKey(jobId) || known.history() != null && !known.history().events(jobId).isEmpty())
            {
                return jobId;
            }
            return -1;
        }
        int found = -1;
        for (final Map<String, Object> job : known.jobs().values())
        {
            if (spec.equals(job.get("name")) || spec.equals(job.get("tenant") + "/" + job.get("name")))
            {
                found = ((Number)job.get("job")).intValue();
            }
        }
        if (found < 0 && known.history() != null)
        {
            found = known.history().findByName(spec);
        }
        return found;
    }

    private static String jobNotFound(final Known known, final String spec)
    {
        final List<String> names = new ArrayList<>();
        for (final Map<String, Object> job : known.jobs().values())
        {
            names.add(job.get("job") + " " + job.get("tenant") + "/" + job.get("name"));
        }
        return "no job '" + spec + "'" + (names.isEmpty() ? " (no jobs now)" : " (jobs now: " + String.join(", ", names) + ")");
    }

    @SuppressWarnings("unchecked")
    private static int describe(final OpsSubcommand command, final String spec)
    {
        final Known known = gather(command, true);
        final int jobId = resolve(known, spec);
        if (jobId < 0)
        {
            throw new OpsException(OpsException.FAILED, jobNotFound(known, spec));
        }
        final Map<String, Object> job = known.jobs().containsKey(jobId) ? known.jobs().get(jobId) : endedJob(known.history(), jobId);
        if (command.json())
        {
            command.out().println(Json.pretty(job));
            return OpsException.OK;
        }
        final PrintWriter out = command.out();
        final String row = "%-15s %s%n";
        out.println("job " + jobId + "  " + job.get("tenant") + "/" + job.get("name"));
        out.printf(row, "state", job.getOrDefault("state", "unknown (remote: the state comes from the control endpoint)") +
            (job.get("age_ms") instanceof Number age ? ", age " + Format.duration(age.longValue()) : "") +
            (job.containsKey("end_reason") ? ": " + job.get("end_reason") : ""));
        if (job.containsKey("world"))
        {
            out.printf(row, "members", (job.containsKey("joined") ? job.get("joined") + " of " + job.get("world") + " ranks joined" :
                job.get("world") + " ranks") + " (the appliance does not report members' addresses)");
        }
        if (job.containsKey("backend"))
        {
            out.printf(row, "backend", job.get("backend") + (job.containsKey("fallback") ? " (passed over: " + job.get("fallback") + ")" :
                " (its first choice)"));
        }
        if (job.containsKey("k"))
        {
            out.printf(row, "slots", job.get("s") + " slots of k=" + job.get("k") + " " + job.get("type") + " lanes, " +
                (job.get("memory_bytes") instanceof Number bytes ? Format.bytes(bytes.longValue()) : "?") +
                " of aggregator memory, slot timeout " + job.get("slot_timeout_ms") + " ms, MAC " + job.get("mac"));
        }
        final Map<String, Object> counters = (Map<String, Object>)job.get("counters");
        if (counters != null)
        {
            out.printf(row, "packets", Format.count(num(counters, "packets_in")) + " in (" + Format.bytes(num(counters, "bytes_in")) +
                "), " + Format.count(num(counters, "packets_out")) + " out");
            out.printf(row, "slots done", Format.count(num(counters, "slots_completed")));
            out.printf(row, "retransmissions", Format.count(num(counters, "retransmissions_served")) +
                " served from the shadow copy; " + Format.count(num(counters, "duplicates")) + " duplicates ignored; " +
                Format.count(num(counters, "drops")) + " dropped");
        }
        else
        {
            out.printf(row, "counters", known.jobs().containsKey(jobId) ? "none (" + known.countersNote() + ")" :
                "none: a job's counters are freed when it ends");
        }
        if (job.get("history") instanceof List<?> history)
        {
            boolean first = true;
            for (final Object event : history)
            {
                final Map<String, Object> e = (Map<String, Object>)event;
                final String message = (String)e.get("message");
                out.printf(row, first ? "history" : "", Format.time(java.time.Instant.parse((String)e.get("time")).toEpochMilli()) +
                    "  " + e.get("type") + (message != null && !message.startsWith("job=") ? ": " + message : ""));
                first = false;
            }
            final Map<String, Object> lastError = (Map<String, Object>)job.get("last_error");
            out.printf(row, "last error", lastError == null ? "none" : Format.time(java.time.Instant.parse(
                (String)lastError.get("time")).toEpochMilli()) + "  " + lastError.get("severity") + " " + lastError.get("type") +
                ": " + lastError.get("message"));
        }
        else
        {
            out.printf(row, "last error", command.target().isRemote() ? "(the journal is readable on the appliance host only)" :
                "(no journal: " + known.countersNote() + ")");
        }
        return OpsException.OK;
    }

    private static int abort(final OpsSubcommand command, final String spec, final String reason) throws Exception
    {
        final Target target = command.target();
        try (ControlClient control = target.control())
        {
            int jobId = -1;
            String name = null;
            for (final Map<String, String> job : control.jobs())
            {
                if (spec.equals(job.get("job")) || spec.equals(job.get("name")) || spec.equals(job.get("tenant") + "/" + job.get("name")))
                {
                    jobId = Integer.parseInt(job.get("job"));
                    name = job.get("tenant") + "/" + job.get("name");
                }
            }
            if (jobId < 0)
            {
                if (!spec.matches("\\d+"))
                {
                    throw new OpsException(OpsException.FAILED, "no running job '" + spec + "'");
                }
                jobId = Integer.parseInt(spec);
            }
            control.abortJob(jobId, reason);
            if (command.json())
            {
                final Map<String, Object> json = new LinkedHashMap<>();
                json.put("aborted", jobId);
                json.put("name", name);
                json.put("reason", reason);
                command.out().println(Json.pretty(json));
            }
            else
            {
                command.out().println("aborted job " + jobId + (name != null ? " (" + name + ")" : "") + ": " + reason);
            }
            return OpsException.OK;
        }
    }

    private static long num(final Map<String, Object> counters, final String name)
    {
        return counters.get(name) instanceof Number number ? number.longValue() : 0;
    }

    static Object typed(final String key, final String value)
    {
        if (!List.of("name", "tenant", "state", "type", "mac").contains(key) && value.matches("-?\\d{1,18}"))
        {
            return Long.parseLong(value);
        }
        return value;
    }
}
