package io.switchml.ops;

import io.switchml.protocol.Json;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.journal.JournalSeverity;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.util.ArrayDeque;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code ops events}: the journal's events (job life cycle, faults, appliance start and stop, and on request
 * the latency snapshots), the last few or all, filtered by job, severity, type and time, and followed live.
 */
@Command(name = "events", aliases = "journal",
    description = {
        "Tail the event journal, filtered by job, severity and type; --follow.",
        "Events: job created, started, ended and aborted, faults, appliance started and stopping, and (--snapshots) " +
            "the per-shard latency snapshots. Needs the journal, so it runs on the appliance host; it also reads the " +
            "journal of an appliance that has stopped. With --json, one JSON object per line."})
final class EventsCommand extends OpsSubcommand
{
    @Option(names = "--job", paramLabel = "JOB", description = "Only events of this job: its id, name or tenant/name.")
    String job;

    @Option(names = "--severity", paramLabel = "LEVEL",
        description = "Only events of this severity or worse: info, warn or error (default info: all).")
    String severity;

    @Option(names = "--type", paramLabel = "TYPE", split = ",",
        description = "Only these event types, e.g. JOB_ABORTED,FAULT (any of: ${COMPLETION-CANDIDATES}).",
        completionCandidates = EventTypes.class)
    List<String> types;

    @Option(names = "--snapshots", description = "Include the HISTOGRAM_SNAPSHOT events (left out unless --type names them).")
    boolean snapshots;

    @Option(names = "--since", paramLabel = "TIME", converter = TimeSpec.class,
        description = "Only events at or after TIME: an age (15m, 2h), a local time (14:00), a date and time, or an instant.")
    Long sinceMs;

    @Option(names = {"-n", "--lines"}, paramLabel = "N", defaultValue = "20",
        description = "How many past events to show, the latest ones (default ${DEFAULT-VALUE}; 0 with --follow: only new ones).")
    int lines;

    @Option(names = "--all", description = "Show every past event that matches, not only the last --lines.")
    boolean all;

    @Option(names = {"-f", "--follow"}, description = "Keep printing new events as the appliance writes them.")
    boolean follow;

    @Option(names = "--max-events", paramLabel = "N",
        description = "Stop after printing N events (past and new); with --follow, e.g. to wait for a job to end.")
    Integer maxEvents;

    @Option(names = "--follow-ms", paramLabel = "MS",
        description = "With --follow: stop after MS milliseconds (exit code 3 if --max-events were not reached by then).")
    Long followMs;

    int execute() throws Exception
    {
        target().requireLocal("events");
        if (lines < 0)
        {
            throw usage("--lines must not be negative: " + lines);
        }
        if (maxEvents != null && maxEvents < 1)
        {
            throw usage("--max-events must be positive: " + maxEvents);
        }
        if (followMs != null && (!follow || followMs < 1))
        {
            throw usage("--follow-ms needs --follow and a positive value");
        }
        JournalSeverity minimum = JournalSeverity.INFO;
        if (severity != null)
        {
            minimum = JournalSeverity.fromName(severity.toUpperCase(Locale.ROOT));
            if (minimum == null)
            {
                throw usage("--severity must be info, warn or error: '" + severity + "'");
            }
        }
        final EnumSet<JournalEvent> selected = EnumSet.allOf(JournalEvent.class);
        if (types != null)
        {
            selected.clear();
            for (final String type : types)
            {
                // job-aborted, job_aborted and JOB_ABORTED alike
                final JournalEvent event = JournalEvent.fromName(type.strip().toUpperCase(Locale.ROOT).replace('-', '_'));
                if (event == null)
                {
                    throw usage("--type: unknown event type '" + type + "' (known: " + String.join(", ", new EventTypes()) + ")");
                }
                selected.add(event);
            }
        }
        else if (!snapshots)
        {
            selected.remove(JournalEvent.HISTOGRAM_SNAPSHOT);
        }

        try (JournalReader reader = target().openJournal())
        {
            reader.minSeverity(minimum).types(selected);
            if (sinceMs != null)
            {
                reader.fromTimestampMs(sinceMs);
            }
            final Integer jobId = job != null && job.matches("\\d+") ? Integer.valueOf(job) : null;
            if (jobId != null)
            {
                reader.jobId(jobId);
            }
            final ArrayDeque<JournalRecord> past = new ArrayDeque<>();
            JournalRecord record;
            while ((record = reader.poll()) != null)
            {
                if (matchesName(record))
                {
                    past.addLast(record);
                    if (!all && past.size() > lines)
                    {
                        past.removeFirst();
                    }
                }
            }
            int printed = 0;
            for (final JournalRecord event : past)
            {
                if (maxEvents != null && printed >= maxEvents)
                {
                    break;
                }
                print(out(), event);
                printed++;
            }
            out().flush();
            if (!follow || maxEvents != null && printed >= maxEvents)
            {
                return OpsException.OK;
            }
            final long deadlineNs = followMs == null ? Long.MAX_VALUE : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(followMs);
            while (maxEvents == null || printed < maxEvents)
            {
                final long remainingMs = followMs == null ? 1_000 : TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime());
                if (remainingMs <= 0)
                {
                    return maxEvents != null ? OpsException.TIMED_OUT : OpsException.OK;
                }
                record = reader.poll(Math.min(remainingMs, 1_000));
                if (record != null && matchesName(record))
                {
                    print(out(), record);
                    out().flush();
                    printed++;
                }
            }
            return OpsException.OK;
        }
    }

    private boolean matchesName(final JournalRecord record)
    {
        if (job == null || job.matches("\\d+"))
        {
            return true;
        }
        return job.equals(record.jobName()) || job.equals(record.tenant() + "/" + record.jobName());
    }

    private void print(final PrintWriter out, final JournalRecord record)
    {
        if (json())
        {
            out.println(Json.write(toJson(record)));
            return;
        }
        final boolean unicode = unicode();
        final String who;
        final String what;
        if (record.type() == JournalEvent.HISTOGRAM_SNAPSHOT)
        {
            who = "shard " + record.shardId();
            what = Format.count(record.count()) + " slots in " + Format.duration(record.intervalEndMs() - record.intervalStartMs()) +
                (record.count() > 0 ? ": p50 " + Format.latency(record.p50Ns(), unicode) + ", p99 " +
                    Format.latency(record.p99Ns(), unicode) + ", max " + Format.latency(record.maxNs(), unicode) : "");
        }
        else
        {
            who = record.hasJobId() ? "job " + record.jobId() + " " + record.tenant() + "/" + record.jobName() : "";
            what = record.message() == null ? "" : record.message();
        }
        out.printf("%s  %-5s  %-18s  %-22s  %s%n", Format.time(record.timestampMs()), record.severity(), record.type(),
            Format.fit(who, 22), what);
    }

    /**
     * @return the event as a JSON object: index, time, type, severity, job fields when about a job, message,
     * and the latency fields of a snapshot.
     */
    static Map<String, Object> toJson(final JournalRecord record)
    {
        final Map<String, Object> json = new LinkedHashMap<>();
        json.put("index", record.index());
        json.put("time", Format.iso(record.timestampMs()));
        json.put("type", record.type().name());
        json.put("severity", record.severity().name());
        if (record.hasJobId())
        {
            json.put("job", record.jobId());
            json.put("tenant", record.tenant());
            json.put("job_name", record.jobName());
        }
        json.put("message", record.message());
        if (record.type() == JournalEvent.HISTOGRAM_SNAPSHOT)
        {
            json.put("shard", record.shardId());
            json.put("interval_start", Format.iso(record.intervalStartMs()));
            json.put("interval_end", Format.iso(record.intervalEndMs()));
            json.put("count", record.count());
            json.put("min_ns", record.minNs());
            json.put("p50_ns", record.p50Ns());
            json.put("p90_ns", record.p90Ns());
            json.put("p99_ns", record.p99Ns());
            json.put("p999_ns", record.p999Ns());
            json.put("max_ns", record.maxNs());
        }
        return json;
    }

    /**
     * The event type names, for --help.
     */
    static final class EventTypes extends java.util.ArrayList<String>
    {
        private static final long serialVersionUID = 1L;

        EventTypes()
        {
            for (final JournalEvent event : JournalEvent.values())
            {
                add(event.name());
            }
        }
    }
}
