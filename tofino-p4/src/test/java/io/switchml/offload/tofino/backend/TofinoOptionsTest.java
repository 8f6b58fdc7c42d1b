package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.BackendException;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.model.P4Names;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TofinoOptionsTest
{
    private static final String PREFIX = "backend.tofino.";

    private static TofinoOptions parse(final String groups) throws BackendException
    {
        return TofinoOptions.parse(Map.of("multicast-groups", groups), PREFIX, true, P4Names.SLOTS);
    }

    @Test
    void multicastGroupsStopWhereReplicationIdsWouldAlias() throws Exception
    {
        assertEquals(2047, JobInstaller.MAX_GROUP);
        final TofinoOptions options = parse("1-2047");
        assertEquals(1, options.firstGroup());
        assertEquals(2047, options.lastGroup());
        // the last group's last rank still has a replication id of its own within 16 bits
        assertEquals(0xFFFF, new JobInstaller.JobImage(1, 32, (byte)1, 64, 1, 0, 2047, new int[0], new int[0], new int[0]).rid(31));

        for (final String groups : new String[] {"1-2048", "2048-2050", "1-65535"})
        {
            final BackendException ex = assertThrows(BackendException.class, () -> parse(groups), groups);
            assertTrue(ex.getMessage().startsWith(PREFIX + "multicast-groups must be within"), ex.getMessage());
            assertTrue(ex.getMessage().contains("2047"), ex.getMessage());
        }
    }
}
