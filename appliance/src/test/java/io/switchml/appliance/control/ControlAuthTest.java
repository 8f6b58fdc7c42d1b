package io.switchml.appliance.control;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Control-plane authorization over real TCP, with the credentials file an operator would write: who may create,
 * list and abort jobs. Each case starts from an appliance with an operator and two tenants.
 */
@Timeout(60)
class ControlAuthTest
{
    private static final String OPERATOR = "0perator-secret-0000";
    private static final String TEAM_A = "team-a-secret-000000";
    private static final String TEAM_B = "team-b-secret-000000";

    @TempDir
    Path tempDir;

    private Appliance appliance;

    private Path credentials(final String permissions) throws IOException
    {
        final Path file = tempDir.resolve("credentials");
        Files.writeString(file, "# role name secret\noperator ops " + OPERATOR + "\ntenant team-a " + TEAM_A +
            "\n\ntenant team-b " + TEAM_B + "\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString(permissions));
        return file;
    }

    private void start() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(tempDir.toString())
            .controlCredentialsFile(credentials("rw-------").toString()));
    }

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private String request(final String line) throws IOException
    {
        return requestAll(line).get(0);
    }

    private List<String> requestAll(final String line) throws IOException
    {
        try (Socket socket = new Socket("127.0.0.1", appliance.controlPort()))
        {
            socket.setSoTimeout(10_000);
            final OutputStream out = socket.getOutputStream();
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            out.flush();
            final BufferedReader reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            final List<String> lines = new ArrayList<>();
            String reply;
            while ((reply = reader.readLine()) != null)
            {
                lines.add(reply);
                if (!reply.startsWith("JOB "))
                {
                    break;
                }
            }
            return lines;
        }
    }

    private int create(final String name, final String auth) throws IOException
    {
        final String reply = request("CREATE name=" + name + " world=2 type=int32 k=64 s=4 mac=off token=" + name +
            "-token-1234" + (auth == null ? "" : " auth=" + auth));
        assertTrue(reply.startsWith("OK job="), reply);
        return Integer.parseInt(reply.split(" ")[1].substring("job=".length()));
    }

    @Test
    void createNeedsAKnownCredentialAndATenantCreatesOnlyItsOwnJobs() throws Exception
    {
        start();
        assertEquals("ERR message=CREATE needs a credential: auth=SECRET of an operator or of the tenant",
            request("CREATE name=anon world=2 type=int32 k=64 s=4"));
        assertEquals("ERR message=CREATE needs a credential: auth=SECRET of an operator or of the tenant (the one given " +
            "is not known)", request("CREATE name=anon world=2 type=int32 k=64 s=4 auth=not-a-known-secret-0000"));
        assertEquals("ERR message=the credential of tenant 'team-a' cannot create jobs of tenant 'team-b'",
            request("CREATE name=x tenant=team-b world=2 type=int32 k=64 s=4 auth=" + TEAM_A));
        assertEquals(0, appliance.registry().jobCount(), "nothing refused was created");

        final int a = create("a1", TEAM_A);
        assertEquals("team-a", appliance.registry().job(a).tenant(), "a tenant's job goes to its tenant");
        final int op = create("op1", OPERATOR);
        assertEquals("default", appliance.registry().job(op).tenant());
        assertEquals("OK", request("HEALTH").split(" ")[0], "HEALTH is open to liveness probes");
        assertTrue(request("HEALTH").contains(" auth=on "));
    }

    @Test
    void jobsAndStatsNeedACredentialAndATenantSeesOnlyItsJobs() throws Exception
    {
        start();
        create("a1", TEAM_A);
        create("b1", TEAM_B);
        assertTrue(request("JOBS").startsWith("ERR message=JOBS needs a credential"));
        assertTrue(request("STATS").startsWith("ERR message=STATS needs a credential"));
        assertTrue(request("STATS auth=" + TEAM_B).startsWith("STATS "));
        final List<String> all = requestAll("JOBS auth=" + OPERATOR);
        assertEquals(3, all.size(), "two jobs and END: " + all);
        final List<String> own = requestAll("JOBS auth=" + TEAM_A);
        assertEquals(2, own.size(), own.toString());
        assertTrue(own.get(0).contains("name=a1"), own.toString());

        // why a backend is down names infrastructure: operators only
        assertTrue(request("BACKENDS").startsWith("ERR message=BACKENDS needs a credential"));
        assertEquals("ERR message=BACKENDS takes an operator's credential", request("BACKENDS auth=" + TEAM_A));
        assertEquals("BACKEND name=software up=1", request("BACKENDS auth=" + OPERATOR));
    }

    @Test
    void abortTakesAnOperatorTheJobsTenantOrTheJobsTokenAndNobodyElse() throws Exception
    {
        start();
        final int a1 = create("a1", TEAM_A);
        final int a2 = create("a2", TEAM_A);
        final int a3 = create("a3", TEAM_A);
        final int a4 = create("a4", TEAM_A);

        assertEquals("ERR message=ABORTJOB needs a credential: auth=SECRET of an operator or of the tenant, or the job's token=",
            request("ABORTJOB job=" + a1 + " reason=no token at all"));
        assertEquals("ERR message=not authorized to abort job " + a1 + ": it takes an operator's credential, the job's " +
            "tenant's, or the job's token", request("ABORTJOB job=" + a1 + " auth=" + TEAM_B + " reason=another tenant"));
        assertEquals("ERR message=not authorized to abort job " + a1 + ": it takes an operator's credential, the job's " +
            "tenant's, or the job's token", request("ABORTJOB job=" + a1 + " token=a2-token-1234 reason=another job's token"));
        assertEquals(4, appliance.registry().jobCount(), "every refused abort left the job alone");

        assertEquals("OK job=" + a1, request("ABORTJOB job=" + a1 + " auth=" + TEAM_A + " reason=own tenant"));
        assertEquals("OK job=" + a2, request("ABORTJOB job=" + a2 + " token=a2-token-1234 reason=its token"));
        assertEquals("OK job=" + a3, request("ABORTJOB job=" + a3 + " auth=" + OPERATOR + " reason=operator"));
        assertEquals(1, appliance.registry().jobCount());
        assertTrue(appliance.registry().job(a4) != null);
    }

    @Test
    void aCredentialsFileOthersCanReadStopsTheStartNamingTheOption() throws Exception
    {
        final Path file = credentials("rw-r-----");
        final IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> Appliance.launch(
            new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(tempDir.toString())
                .controlCredentialsFile(file.toString())));
        assertTrue(refused.getMessage().startsWith(ApplianceContext.CONTROL_CREDENTIALS_FILE_PROP + ": credentials file " + file +
            " is readable or writable by other users [GROUP_READ]: chmod 600 it"), refused.getMessage());

        Files.writeString(file, "operator ops short\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        final IllegalArgumentException malformed = assertThrows(IllegalArgumentException.class, () -> Appliance.launch(
            new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(tempDir.toString())
                .controlCredentialsFile(file.toString())));
        assertTrue(malformed.getMessage().contains(file + " line 1: expected 'operator|tenant NAME SECRET'"), malformed.getMessage());
    }
}
