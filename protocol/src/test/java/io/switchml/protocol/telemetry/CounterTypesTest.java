package io.switchml.protocol.telemetry;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CounterTypesTest
{
    @Test
    void typeIdsAreFixed()
    {
        assertEquals(0, CounterTypes.SYSTEM);
        assertEquals(1, CounterTypes.SHARD);
        assertEquals(2, CounterTypes.JOB);
    }

    @Test
    void jobKeyRoundTrips()
    {
        final UnsafeBuffer key = new UnsafeBuffer(new byte[CounterTypes.KEY_LENGTH]);
        key.setMemory(0, CounterTypes.KEY_LENGTH, (byte)0x7F);
        assertEquals(112, CounterTypes.encodeKey(key, 7, CounterTypes.KIND_COUNTER, "packets_in", "acme", "résnet"));

        assertEquals(7, CounterTypes.ownerId(key));
        assertEquals(CounterTypes.KIND_COUNTER, CounterTypes.kind(key));
        assertEquals("packets_in", CounterTypes.metricName(key));
        assertEquals("acme", CounterTypes.tenant(key));
        assertEquals("résnet", CounterTypes.jobName(key));
    }

    @Test
    void keyWithoutTenantOrNameHasEmptyStrings()
    {
        final UnsafeBuffer key = new UnsafeBuffer(new byte[CounterTypes.KEY_LENGTH]);
        key.setMemory(0, CounterTypes.KEY_LENGTH, (byte)0x7F);
        CounterTypes.encodeKey(key, 3, CounterTypes.KIND_GAUGE, "duty_cycle_max_ns", null, null);

        assertEquals(CounterTypes.KIND_GAUGE, CounterTypes.kind(key));
        assertEquals("", CounterTypes.tenant(key));
        assertEquals("", CounterTypes.jobName(key));
    }

    @Test
    void longNamesAreTruncatedOnACharacterBoundary()
    {
        final UnsafeBuffer key = new UnsafeBuffer(new byte[CounterTypes.KEY_LENGTH]);
        final String longName = "é".repeat(40);
        CounterTypes.encodeKey(key, 1, CounterTypes.KIND_COUNTER, "drops", longName, "x".repeat(100));

        assertEquals("é".repeat(16), CounterTypes.tenant(key));
        assertEquals("x".repeat(CounterTypes.MAX_KEY_STRING_LENGTH), CounterTypes.jobName(key));
        assertEquals("ab", CounterTypes.truncateUtf8("ab\uD83D\uDE00", 5));
        assertEquals(6, CounterTypes.truncateUtf8("ab\uD83D\uDE00", 6).getBytes(StandardCharsets.UTF_8).length);
    }

    @Test
    void metricNamesAreValidated()
    {
        assertTrue(CounterTypes.isValidMetricName("drop_bad_magic"));
        assertFalse(CounterTypes.isValidMetricName("Drop"));
        assertFalse(CounterTypes.isValidMetricName("0drop"));
        assertFalse(CounterTypes.isValidMetricName("drop-bad"));
        assertFalse(CounterTypes.isValidMetricName(""));
        assertFalse(CounterTypes.isValidMetricName("x".repeat(CounterTypes.MAX_METRIC_NAME_LENGTH + 1)));
        final UnsafeBuffer key = new UnsafeBuffer(new byte[CounterTypes.KEY_LENGTH]);
        assertThrows(IllegalArgumentException.class,
            () -> CounterTypes.encodeKey(key, 1, CounterTypes.KIND_COUNTER, "Bad Name", null, null));
    }

    @Test
    void systemCountersHaveFixedIdsAndValidUniqueNames()
    {
        final Set<String> names = new HashSet<>();
        for (final SystemCounter counter : SystemCounter.values())
        {
            assertEquals(counter.ordinal(), counter.id(), counter.name());
            assertSame(counter, SystemCounter.get(counter.id()));
            assertTrue(CounterTypes.isValidMetricName(counter.metricName()), counter.metricName());
            assertTrue(names.add(counter.metricName()), "duplicate " + counter.metricName());
            assertFalse(counter.description().isBlank());
        }
        assertEquals(0, SystemCounter.BYTES_IN.id());
        assertEquals(11, SystemCounter.CONTROL_CONNECTIONS.id());
        assertTrue(SystemCounter.JOBS_ACTIVE.isGauge());
        assertNull(SystemCounter.get(SystemCounter.values().length));
        assertNull(SystemCounter.get(-1));
    }
}
