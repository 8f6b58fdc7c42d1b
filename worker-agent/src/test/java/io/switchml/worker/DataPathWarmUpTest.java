package io.switchml.worker;

import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The join-time warm-up runs each element type's kernels over its fixed amount of work when time allows, and stops at
 * its deadline when not. No wall-time assertion: the budget is checked by giving it none.
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
}
