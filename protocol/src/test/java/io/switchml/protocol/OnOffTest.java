package io.switchml.protocol;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class OnOffTest
{
    @Test
    void takesOnTrueOffFalseAndRefusesTheRestWithTheCallersError() throws Exception
    {
        assertTrue(OnOff.parse("on", IllegalStateException::new));
        assertTrue(OnOff.parse("true", IllegalStateException::new));
        assertFalse(OnOff.parse("off", IllegalStateException::new));
        assertFalse(OnOff.parse("false", IllegalStateException::new));
        for (final String value : new String[] {"maybe", "On", "yes", "1", ""})
        {
            final Exception refusal = new java.io.IOException("x must be on or off: '" + value + "'");
            assertSame(refusal, assertThrows(java.io.IOException.class, () -> OnOff.parse(value, () -> refusal)));
        }
    }
}
