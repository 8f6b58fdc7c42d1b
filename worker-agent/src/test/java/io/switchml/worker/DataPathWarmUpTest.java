package io.switchml.worker;

import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The join-time warm-up runs each element type's kernels over its fixed amount of work when time allows, and stops at
 * its deadline when not. No wall-time assertion: the budget is checked by giving it none. After the join it goes on
 * through its grace without holding the join up, and the client's first call stops it.
 */
class DataPathWarmUpTest
{
    @ParameterizedTest
    @ValueSource(bytes = {ElementType.INT32, ElementType.FLOAT32, ElementType.FLOAT16, ElementType.BFLOAT16})
    void runsEachElementTypesKernelsOverItsWholeWork(final byte type)
    {
        final WorkerContext context = new WorkerContext().elementType(type).lanes(2233).worldSize(4);
        assertEquals(DataPathWarmUp.rounds(2233), new DataPathWarmUp(context).run(Long.MAX_VALUE / 4));
    }

    @Test
    void stopsAtItsDeadline()
    {
        final WorkerContext context = new WorkerContext().elementType(ElementType.FLOAT32).lanes(2233).worldSize(4);
        assertEquals(0, new DataPathWarmUp(context).run(0));
    }

    @Test
    void goesOnThroughItsGraceAfterTheJoinUntilTheFirstCallStopsIt()
    {
        assertTrue(DataPathWarmUp.UNTIL_FIRST_CALL, "allowed by default");
        assertFalse(new WorkerContext().warmUpUntilFirstCall(), "but asked for by worker serve alone");
        final WorkerContext context = new WorkerContext().elementType(ElementType.FLOAT32).lanes(2233).worldSize(4);
        final DataPathWarmUp warmUp = new DataPathWarmUp(context);
        final long budgetEnd = warmUp.deadlineNs();
        final long before = System.nanoTime();
        warmUp.start().endAfterGrace();
        final long graceEnd = warmUp.deadlineNs();
        assertTrue(graceEnd - (before + DataPathWarmUp.JOIN_GRACE_NS) >= 0, "ends no earlier than the grace");
        assertTrue(graceEnd - budgetEnd <= 0, "nor later than its budget");

        final long stopAt = System.nanoTime();
        warmUp.stopForFirstCall();
        assertTrue(warmUp.deadlineNs() - stopAt >= 0 && warmUp.deadlineNs() - graceEnd < 0, "the first call moves its deadline to now");
        // the first call waits 200 ms at most (then runs beside it); here, without a job's warm JVM, it may take longer
        assertTrue(warmUp.awaitStopped(java.time.Duration.ofSeconds(30)), "stops at the deadline");
        assertFalse(warmUp.running());
    }
}
