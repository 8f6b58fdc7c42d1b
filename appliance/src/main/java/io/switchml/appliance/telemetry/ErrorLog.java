package io.switchml.appliance.telemetry;

import io.switchml.protocol.telemetry.SystemCounter;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.agrona.concurrent.status.AtomicCounter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The appliance's error log: an Agrona {@link DistinctErrorLog} over the counters file's error section,
 * so each distinct error (same type, message and stack trace) is stored once with a count and its first
 * and last times, and the ops CLI can read it from another process. Every recorded error also increments
 * {@link SystemCounter#ERRORS}.
 * <p>
 * Thread-safe: any thread may record. Also an {@link ErrorHandler}, to hand to an {@code AgentRunner}.
 * Not for the hot path's expected failures, which are counters.
 */
public final class ErrorLog implements ErrorHandler
{
    private static final Logger LOG = LoggerFactory.getLogger(ErrorLog.class);

    private final DistinctErrorLog log;
    private final AtomicCounter errors;

    /**
     * @param buffer buffer the errors are written to (the counters file's error section).
     * @param clock  epoch clock for the observation times.
     * @param errors counter incremented for every error recorded, repeats included.
     */
    public ErrorLog(final AtomicBuffer buffer, final EpochClock clock, final AtomicCounter errors)
    {
        this.log = new DistinctErrorLog(buffer, clock);
        this.errors = errors;
    }

    /**
     * Record an error. When the log is full the error is still counted, and printed to standard error so
     * that it is not lost.
     *
     * @return whether the error is in the log (false when the log is full).
     */
    public boolean record(final Throwable error)
    {
        errors.increment();
        final boolean recorded = log.record(error);
        if (!recorded)
        {
            LOG.error("error log full, error not recorded", error);
        }
        return recorded;
    }

    /**
     * {@link #record(Throwable)}.
     */
    public void onError(final Throwable error)
    {
        record(error);
    }

    /**
     * @return the buffer the errors are written to.
     */
    public AtomicBuffer buffer()
    {
        return log.buffer();
    }
}
