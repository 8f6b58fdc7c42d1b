package io.switchml.ops;

import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.journal.JournalSeverity;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The journal's job events of the latest appliance run (job ids start again at 1 when the appliance
 * restarts, so only events after the last APPLIANCE_STARTED are taken): when each job was created,
 * started and ended, why, and its last warning or error.
 */
final class JobHistory
{
    private final Map<Integer, List<JournalRecord>> eventsByJob = new LinkedHashMap<>();
    private long runStartedMs;

    private JobHistory()
    {
    }

    /**
     * Read the journal.
     */
    static JobHistory read(final JournalReader reader)
    {
        final JobHistory history = new JobHistory();
        final EnumSet<JournalEvent> types = EnumSet.allOf(JournalEvent.class);
        types.remove(JournalEvent.HISTOGRAM_SNAPSHOT);
        reader.types(types);
        JournalRecord record;
        while ((record = reader.poll()) != null)
        {
            if (record.type() == JournalEvent.APPLIANCE_STARTED)
            {
                history.eventsByJob.clear();
                history.runStartedMs = record.timestampMs();
            }
            else if (record.hasJobId())
            {
                history.eventsByJob.computeIfAbsent(record.jobId(), ignore -> new ArrayList<>()).add(record);
            }
        }
        return history;
    }

    /**
     * @return when the latest run started (epoch ms), or 0 when the journal does not say.
     */
    long runStartedMs()
    {
        return runStartedMs;
    }

    /**
     * @return ids of the jobs with events, in order of their first event.
     */
    List<Integer> jobIds()
    {
        return new ArrayList<>(eventsByJob.keySet());
    }

    /**
     * @return the job's events in journal order; empty when none.
     */
    List<JournalRecord> events(final int jobId)
    {
        return eventsByJob.getOrDefault(jobId, List.of());
    }

    /**
     * @return the job's last event of severity WARN or worse up to the event that ended it, or null. (The
     * appliance may journal a second end event for an aborted job when its ranks then leave; that one is not
     * the job's error.)
     */
    JournalRecord lastError(final int jobId)
    {
        JournalRecord last = null;
        for (final JournalRecord record : events(jobId))
        {
            if (record.severity().isAtLeast(JournalSeverity.WARN))
            {
                last = record;
            }
            if (record.type() == JournalEvent.JOB_ENDED || record.type() == JournalEvent.JOB_ABORTED)
            {
                break;
            }
        }
        return last;
    }

    /**
     * @return the event that ended the job (JOB_ENDED or JOB_ABORTED), or null while it runs.
     */
    JournalRecord end(final int jobId)
    {
        for (final JournalRecord record : events(jobId))
        {
            if (record.type() == JournalEvent.JOB_ENDED || record.type() == JournalEvent.JOB_ABORTED)
            {
                return record;
            }
        }
        return null;
    }

    /**
     * @return the id of the latest job with this name (or tenant/name), or -1.
     */
    int findByName(final String name)
    {
        int found = -1;
        for (final Map.Entry<Integer, List<JournalRecord>> entry : eventsByJob.entrySet())
        {
            for (final JournalRecord record : entry.getValue())
            {
                if (name.equals(record.jobName()) || name.equals(record.tenant() + "/" + record.jobName()))
                {
                    found = entry.getKey();
                }
            }
        }
        return found;
    }

    /**
     * @return the job's tenant and name from its events, or null.
     */
    JournalRecord first(final int jobId)
    {
        final List<JournalRecord> events = events(jobId);
        return events.isEmpty() ? null : events.get(0);
    }
}
