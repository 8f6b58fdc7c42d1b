package io.switchml.appliance;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The start-up warning for a multicast port (derived from the data port) inside the kernel's ephemeral port range,
 * read from a file in ip_local_port_range's format.
 */
class MulticastPortWarningTest
{
    @TempDir
    Path dir;

    @Test
    void aPortInsideTheEphemeralRangeIsNamedWithTheOptionToSet() throws Exception
    {
        final Path range = Files.writeString(dir.resolve("ip_local_port_range"), "32768\t60999\n");
        final String warning = Appliance.warnIfEphemeral(new int[] {8471, 35844}, range);
        assertNotNull(warning);
        assertTrue(warning.contains("multicast port 35844") && warning.contains("32768-60999") &&
            warning.contains(ApplianceContext.MULTICAST_PORT_PROP), warning);
    }

    @Test
    void portsOutsideTheRangeOrAnUnreadableRangeSayNothing() throws Exception
    {
        final Path range = Files.writeString(dir.resolve("ip_local_port_range"), "32768\t60999\n");
        assertNull(Appliance.warnIfEphemeral(new int[] {8471, 18471, 61000}, range));
        assertNull(Appliance.warnIfEphemeral(new int[] {35844}, dir.resolve("missing")));
        assertNull(Appliance.warnIfEphemeral(new int[] {35844}, Files.writeString(dir.resolve("garbled"), "x")));
    }
}
