package io.switchml.journal;

/**
 * Severity of a journal event, in increasing order, so a reader can ask for "this or worse".
 */
public enum JournalSeverity
{
    /** Normal life-cycle events: jobs created, started and ended, appliance start and stop, latency snapshots. */
    INFO,
    /** Something went wrong for one job or peer but the appliance carries on: an abort, a slot deadline. */
    WARN,
    /** An error of the appliance itself. */
    ERROR;

    private static final JournalSeverity[] VALUES = values();

    /**
     * @return the severity with this {@link #ordinal()}, or null when there is none.
     */
    public static JournalSeverity fromOrdinal(final int ordinal)
    {
        return ordinal >= 0 && ordinal < VALUES.length ? VALUES[ordinal] : null;
    }

    /**
     * @return the severity with this name, or null when there is none (a journal written by a newer version).
     */
    public static JournalSeverity fromName(final String name)
    {
        for (final JournalSeverity severity : VALUES)
        {
            if (severity.name().equals(name))
            {
                return severity;
            }
        }
        return null;
    }

    /**
     * @return whether this severity is {@code minimum} or worse.
     */
    public boolean isAtLeast(final JournalSeverity minimum)
    {
        return ordinal() >= minimum.ordinal();
    }
}
