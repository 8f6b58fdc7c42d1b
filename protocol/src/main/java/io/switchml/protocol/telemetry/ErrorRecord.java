package io.switchml.protocol.telemetry;

/**
 * One distinct error read from the counters file's error log: how many times it was observed, when
 * first and last, and its encoded stack trace.
 *
 * @param observationCount             times the error was recorded.
 * @param firstObservationTimestampMs  epoch ms of the first observation.
 * @param lastObservationTimestampMs   epoch ms of the latest observation.
 * @param encodedException             the exception's stack trace as text.
 */
public record ErrorRecord(
    int observationCount,
    long firstObservationTimestampMs,
    long lastObservationTimestampMs,
    String encodedException)
{
}
