package io.switchml.offload.tofino.model;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Tofino's register rule as the model enforces it: one access per register per pass; another pass (a new packet
 * or a recirculation) may access it again; indices stay within the declared size.
 */
final class RegisterRulesTest
{
    @Test
    void secondAccessInOnePassIsRefused()
    {
        final RegisterArray register = new RegisterArray(new P4Names.Register("SwitchMLIngress.count", 8, 32, false));
        assertEquals(0, register.execute(1, 3, c -> c[0]++));
        final IllegalStateException twice = assertThrows(IllegalStateException.class, () -> register.execute(1, 4, c -> c[0]));
        assertTrue(twice.getMessage().contains("accessed twice in one pass"), twice.getMessage());
        assertEquals(1, register.execute(2, 3, c -> c[0]));
        assertThrows(IllegalStateException.class, () -> register.execute(3, 8, c -> c[0]));
    }

    @Test
    void pairRegisterUpdatesBothHalvesAndOutputsOne()
    {
        final RegisterArray register = new RegisterArray(new P4Names.Register("SwitchMLIngress.lanes_00.values", 4, 32, true));
        assertEquals(7, register.execute(1, 2, c ->
        {
            c[0] = 7;
            c[1] = -9;
            return c[0];
        }));
        assertEquals(-9, register.execute(2, 2, c -> c[1]));
        assertEquals(((long)-9 << 32) | 7, register.read(2));
    }
}
