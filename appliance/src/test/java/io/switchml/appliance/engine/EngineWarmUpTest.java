package io.switchml.appliance.engine;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The start-up warm-up completes a slot per round of its fixed work when time allows (so it really drives
 * Algorithm 3 to completions, not into drops), and stops at its deadline when not. No wall-time assertion.
 */
class EngineWarmUpTest
{
    @Test
    void completesEverySlotOfItsWork()
    {
        assertEquals(EngineWarmUp.completions(), new EngineWarmUp().run(Long.MAX_VALUE / 4));
    }

    @Test
    void stopsAtItsDeadline()
    {
        assertEquals(0, new EngineWarmUp().run(0));
    }
}
