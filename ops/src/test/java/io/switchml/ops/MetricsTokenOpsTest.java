package io.switchml.ops;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Properties;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code switchml ops} in remote mode against an appliance whose {@code /metrics} requires a token: refused with the
 * option to give, served with {@code --metrics-token-file}, and a token file others may read refused by name.
 */
@Timeout(60)
final class MetricsTokenOpsTest
{
    @TempDir
    Path dir;

    private Appliance appliance;

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    @Test
    void remoteCommandsSendTheTokenFromItsFile() throws Exception
    {
        final Path token = dir.resolve("metrics-token");
        Files.createFile(token, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(token, "tok-3141\n");
        final Properties properties = new Properties();
        properties.setProperty(ApplianceContext.HTTP_METRICS_TOKEN_FILE_PROP, token.toString());
        appliance = Appliance.launch(new ApplianceContext().apply(properties).dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()));
        final String url = "--url=http://127.0.0.1:" + appliance.httpPort();

        final OpsCli.Result refused = OpsCli.run("counters", url);
        assertEquals(OpsException.FAILED, refused.exitCode(), refused::toString);
        assertTrue(refused.err().contains("answered 401") && refused.err().contains("(give --metrics-token-file)"),
            refused::toString);

        final OpsCli.Result counters = OpsCli.run("counters", url, "--metrics-token-file=" + token);
        assertEquals(0, counters.exitCode(), counters::toString);
        assertTrue(counters.out().contains("jobs_active"), counters::toString);

        Files.writeString(token, "two words\n");
        final OpsCli.Result malformed = OpsCli.run("counters", url, "--metrics-token-file=" + token);
        assertEquals(OpsException.USAGE, malformed.exitCode(), malformed::toString);
        assertTrue(malformed.err().contains("must hold one token of 1..1024 printable ASCII characters"), malformed::toString);

        Files.setPosixFilePermissions(token, PosixFilePermissions.fromString("rw-r--r--"));
        final OpsCli.Result open = OpsCli.run("counters", url, "--metrics-token-file=" + token);
        assertEquals(OpsException.USAGE, open.exitCode(), open::toString);
        assertTrue(open.err().contains("--metrics-token-file " + token + " is readable or writable by other users"),
            open::toString);
    }
}
