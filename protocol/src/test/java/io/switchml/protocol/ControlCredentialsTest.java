package io.switchml.protocol;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The credentials file: every credential has a secret of its own, so that a line repeating another's secret cannot
 * change which role a client gets (the first match would win, silently).
 */
final class ControlCredentialsTest
{
    @TempDir
    Path dir;

    @Test
    void aSecretGivenTwiceIsRefusedNamingBothLines() throws Exception
    {
        final Path file = dir.resolve("credentials");
        Files.writeString(file, "operator ops 0perator-secret-0000\n# a tenant\ntenant team-a 0perator-secret-0000\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));

        final IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> ControlCredentials.load(file));
        assertEquals(file + " line 3: the same secret as operator 'ops'; every credential needs a " +
            "secret of its own", refused.getMessage());

        Files.writeString(file, "operator ops 0perator-secret-0000\ntenant team-a team-a-secret-000000\n");
        assertEquals("team-a", ControlCredentials.load(file).find("team-a-secret-000000").name());
    }
}
