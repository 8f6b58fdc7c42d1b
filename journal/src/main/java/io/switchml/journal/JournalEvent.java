package io.switchml.journal;

/**
 * Types of journal event. Each has a stable {@link #typeId()} (the record type in the in-process ring
 * buffer) and is written to the queue under its {@link #name()}, so a reader of any version can decode it.
 */
public enum JournalEvent
{
    /** A job was created (CREATE accepted). */
    JOB_CREATED(1, JournalSeverity.INFO),
    /** All ranks of a job joined; it started. */
    JOB_STARTED(2, JournalSeverity.INFO),
    /** A job ended normally (every rank left). */
    JOB_ENDED(3, JournalSeverity.INFO),
    /** A job was aborted: by a rank, a lost control connection, a deadline. */
    JOB_ABORTED(4, JournalSeverity.WARN),
    /** A fault: a slot deadline, a control connection lost, an error. Severity chosen by the caller. */
    FAULT(5, JournalSeverity.WARN),
    /** Slot-completion latency of one data-plane shard over an interval: count, min, percentiles, max. */
    HISTOGRAM_SNAPSHOT(6, JournalSeverity.INFO),
    /** The appliance started (the first event of a run). */
    APPLIANCE_STARTED(7, JournalSeverity.INFO),
    /** The appliance is stopping (the last event of a run that ends cleanly). */
    APPLIANCE_STOPPING(8, JournalSeverity.INFO);

    private static final JournalEvent[] BY_TYPE_ID = new JournalEvent[9];

    static
    {
        for (final JournalEvent event : values())
        {
            BY_TYPE_ID[event.typeId] = event;
        }
    }

    private final int typeId;
    private final JournalSeverity defaultSeverity;

    JournalEvent(final int typeId, final JournalSeverity defaultSeverity)
    {
        this.typeId = typeId;
        this.defaultSeverity = defaultSeverity;
    }

    /**
     * @return the stable id of this type, at least 1 (a ring-buffer message type id).
     */
    public int typeId()
    {
        return typeId;
    }

    /**
     * @return the severity the typed {@code Journal.offer...} methods give this type.
     */
    public JournalSeverity defaultSeverity()
    {
        return defaultSeverity;
    }

    /**
     * @return the type with this id, or null when there is none.
     */
    public static JournalEvent fromTypeId(final int typeId)
    {
        return typeId > 0 && typeId < BY_TYPE_ID.length ? BY_TYPE_ID[typeId] : null;
    }

    /**
     * @return the type with this name, or null when there is none (a journal written by a newer version).
     */
    public static JournalEvent fromName(final String name)
    {
        for (int i = 1; i < BY_TYPE_ID.length; i++)
        {
            if (BY_TYPE_ID[i].name().equals(name))
            {
                return BY_TYPE_ID[i];
            }
        }
        return null;
    }
}
