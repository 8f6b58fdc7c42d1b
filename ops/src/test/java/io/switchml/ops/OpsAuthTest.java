package io.switchml.ops;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlCredentials;
import io.switchml.protocol.ElementType;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An appliance with control authorization on, as the package installs it: a worker creates its job with its tenant's
 * line of the credentials file, a worker without one is refused with a message that says why, and {@code ops} lists
 * and aborts jobs with the file's operator line (--credential-file) and is refused without it.
 */
@Timeout(60)
class OpsAuthTest
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

    private WorkerContext worker(final String job, final String credential)
    {
        return new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token("token-" + job).tenant("team-a")
            .credential(credential).worldSize(1).rank(0).elementType(ElementType.INT32).lanes(64).slots(4);
    }

    @Test
    void workersAndOpsUseTheCredentialsFileAndNothingWorksWithoutIt() throws Exception
    {
        final Path credentials = dir.resolve("credentials");
        Files.writeString(credentials, "operator ops 0perator-secret-0000\ntenant team-a team-a-secret-000000\n");
        Files.setPosixFilePermissions(credentials, PosixFilePermissions.fromString("rw-------"));
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()).controlCredentialsFile(credentials.toString()));

        final AllReduceException refused = assertThrows(AllReduceException.class, () -> WorkerClient.connect(worker("anon", null)));
        assertTrue(refused.getMessage().contains("CREATE needs a credential"), refused.getMessage());

        final String secret = ControlCredentials.secretFor(credentials, ControlCredentials.TENANT, "team-a");
        try (WorkerClient client = WorkerClient.connect(worker("victim", secret)))
        {
            final String[] base = {"--dir=" + dir.resolve("state"), "--control-port=" + appliance.controlPort()};
            final OpsCli.Result denied = OpsCli.run("jobs", "abort", "victim", base[0], base[1], "--credential-file=" +
                dir.resolve("no-such-file"));
            assertNotEquals(0, denied.exitCode(), denied::toString);
            final OpsCli.Result anonymous = OpsCli.run("jobs", "abort", "victim", base[0], base[1], "--credential-file=");
            assertNotEquals(0, anonymous.exitCode(), anonymous::toString);
            assertTrue(anonymous.err().contains("needs a credential"), anonymous::toString);
            assertEquals(1, appliance.registry().jobCount(), "the job runs on");
            final OpsCli.Result status = OpsCli.run("status", base[0], base[1], "--credential-file=" + credentials);
            assertTrue(status.out().contains("INSECURE: control channel is plain TCP (--insecure-control), authorization on"),
                status::toString);

            final OpsCli.Result aborted = OpsCli.run("jobs", "abort", "victim", "--reason", "maintenance", base[0], base[1],
                "--credential-file=" + credentials);
            assertEquals(0, aborted.exitCode(), aborted::toString);
            final int[] tensor = new int[64];
            final AllReduceException failure = assertThrows(AllReduceException.class, () -> client.allReduce(tensor, tensor));
            assertTrue(failure.getMessage().contains("aborted by operator ops: maintenance"), failure.getMessage());
        }
    }
}
