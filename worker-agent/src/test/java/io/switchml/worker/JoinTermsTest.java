package io.switchml.worker;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The JOIN reply's terms for the data path: the MAC key is checked before the rank's agents start, so that a reply
 * without one, or with one that is not 32 hex digits, fails the join naming it instead of an agent's thread.
 */
final class JoinTermsTest
{
    @Test
    void parsesTheKeyHalvesTheMacSwitchAndTheBackend() throws IOException
    {
        final JobJoin.JoinTerms terms = JobJoin.JoinTerms.parse(
            Map.of("mac", "on", "key", "0123456789abcdeffedcba9876543210", "backend", "xdp"));

        assertTrue(terms.macEnabled());
        assertEquals(0x0123456789abcdefL, terms.macK0());
        assertEquals(0xfedcba9876543210L, terms.macK1());
        assertEquals("xdp", terms.backend());
    }

    @Test
    void anApplianceThatNamesNoBackendIsUnknownAndMacOffUnlessSaid() throws IOException
    {
        final JobJoin.JoinTerms terms = JobJoin.JoinTerms.parse(Map.of("key", "0".repeat(32)));

        assertFalse(terms.macEnabled());
        assertEquals("unknown", terms.backend());
    }

    @Test
    void aMissingShortOrNonHexKeyIsAnIoErrorNamingIt()
    {
        assertEquals("appliance sent no MAC key",
            assertThrows(IOException.class, () -> JobJoin.JoinTerms.parse(Map.of("mac", "on"))).getMessage());
        assertEquals("appliance sent a malformed MAC key",
            assertThrows(IOException.class, () -> JobJoin.JoinTerms.parse(Map.of("key", "0".repeat(31)))).getMessage());
        assertEquals("appliance sent a malformed MAC key",
            assertThrows(IOException.class, () -> JobJoin.JoinTerms.parse(Map.of("key", "-".repeat(32)))).getMessage());
    }
}
