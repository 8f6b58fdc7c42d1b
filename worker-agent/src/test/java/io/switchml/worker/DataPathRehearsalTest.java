package io.switchml.worker;

import io.switchml.protocol.ElementType;
import io.switchml.worker.transport.TransportKind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The rehearsal drives a real client through real loopback sockets to its reflector: given the time, every element
 * type completes all its rounds on the native transport and on NIO, and it leaves no thread behind. No wall-time
 * assertion: the deadline is checked by giving it none.
 */
class DataPathRehearsalTest
{
    private static final long GENEROUS_NS = 120_000_000_000L;

    @ParameterizedTest
    @ValueSource(bytes = {ElementType.INT32, ElementType.FLOAT32, ElementType.FLOAT16, ElementType.BFLOAT16})
    void completesEveryRoundOnTheNativeTransport(final byte type)
    {
        assertEquals(DataPathRehearsal.ROUNDS, rehearse(type, TransportKind.NATIVE, System.nanoTime() + GENEROUS_NS));
        assertNoRehearsalThreads();
    }

    @Test
    void completesEveryRoundOnNio()
    {
        assertEquals(DataPathRehearsal.ROUNDS,
            rehearse(ElementType.FLOAT32, TransportKind.NIO, System.nanoTime() + GENEROUS_NS));
        assertNoRehearsalThreads();
    }

    @Test
    @Timeout(60)
    void takesTheRarePathsOfLossRecovery()
    {
        final DataPathRehearsal rehearsal = new DataPathRehearsal(job(ElementType.FLOAT32, TransportKind.NATIVE));
        final long deadlineNs = System.nanoTime() + GENEROUS_NS;
        assertEquals(DataPathRehearsal.ROUNDS, rehearsal.run(() -> deadlineNs));
        final WorkerCounters counters = rehearsal.counters();
        // the reflector drops, duplicates and reorders results and answers probes: each path must have run
        assertTrue(counters.probesSent() > 0, "probes " + counters.probesSent());
        assertTrue(counters.nacksReceived() > 0, "NACKs " + counters.nacksReceived());
        assertTrue(counters.pendingsReceived() > 0, "PENDINGs " + counters.pendingsReceived());
        assertTrue(counters.retransmissions() > 0, "retransmissions " + counters.retransmissions());
        assertTrue(counters.staleResults() > 0, "stale results " + counters.staleResults());
        assertNoRehearsalThreads();
    }

    @Test
    void stopsAtItsDeadline()
    {
        assertEquals(0, rehearse(ElementType.FLOAT32, TransportKind.NATIVE, System.nanoTime()));
        assertNoRehearsalThreads();
    }

    private static int rehearse(final byte type, final TransportKind transport, final long deadlineNs)
    {
        return new DataPathRehearsal(job(type, transport)).run(() -> deadlineNs);
    }

    private static WorkerContext job(final byte type, final TransportKind transport)
    {
        return new WorkerContext().elementType(type).lanes(8176).slots(32).worldSize(4).rank(2).transport(transport);
    }

    private static void assertNoRehearsalThreads()
    {
        final String left = Thread.getAllStackTraces().keySet().stream()
            .filter(thread -> thread.isAlive() && thread.getName().startsWith("switchml-rehearsal"))
            .map(Thread::getName)
            .findFirst()
            .orElse(null);
        assertNull(left, "thread left running: " + left);
    }
}
