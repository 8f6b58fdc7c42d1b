package io.switchml.worker;

import io.switchml.protocol.ElementType;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The join-time warm-up runs every kernel of each element type's data path on scratch data and keeps to its budget.
 */
class DataPathWarmUpTest
{
    @ParameterizedTest
    @ValueSource(bytes = {ElementType.INT32, ElementType.FLOAT32, ElementType.FLOAT16, ElementType.BFLOAT16})
    void runsEachElementTypesKernelsWithinItsBudget(final byte type)
    {
        final WorkerContext context = new WorkerContext().elementType(type).lanes(2233).worldSize(4);
        final long startNs = System.nanoTime();
        new DataPathWarmUp(context).run();
        final long tookNs = System.nanoTime() - startNs;
        assertTrue(tookNs < DataPathWarmUp.BUDGET_NS + 200_000_000L, "took " + tookNs / 1_000_000 + " ms");
    }
}
