package io.switchml.appliance.control;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.LineMutator;
import io.switchml.protocol.TestSeed;
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
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Seeded mutation of valid control lines sent over real TCP to an appliance with authorization on: every line gets
 * one reply line (or the connection is closed, for what the endpoint refuses outright), the appliance keeps
 * answering, and a refused line changes nothing: after each ERR the job count and the reserved memory are what they
 * were. {@code -Dswitchml.fuzz.iterations=N} runs longer ({@code bench/} style); the seed is in every message.
 */
@Timeout(120)
class ControlFuzzTest
{
    private static final int ITERATIONS = Integer.getInteger("switchml.fuzz.iterations", 3_000);
    private static final String OPERATOR = "0perator-secret-0000";
    private static final String[] LINES = {
        "CREATE name=f1 world=2 type=int32 k=64 s=4 mac=off token=fuzz-token-1234 auth=" + OPERATOR,
        "CREATE name=f2 tenant=team-a world=1 type=float32 k=16 s=2 joinTimeoutMs=600000 auth=team-a-secret-000000",
        "JOIN job=1 rank=0 token=fuzz-token-1234 ports=40001",
        "ABORTJOB job=1 auth=" + OPERATOR + " reason=fuzz",
        "JOBS auth=" + OPERATOR, "STATS auth=" + OPERATOR, "HEALTH"};
    private static final String ALPHABET = "= \t\u00e9,-_.0123456789azAZ\r";
    private static final LineMutator MUTATOR = new LineMutator(ALPHABET, 0, 3,
        (text, at, random) -> text.insert(at, " s=" + (random.nextBoolean() ? Long.MAX_VALUE : random.nextInt())),
        (text, at, random) -> text.append(" name=n").append(random.nextInt(1000)));

    @TempDir
    Path tempDir;

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
    void mutatedControlLinesGetOneAnswerAndRefusedOnesChangeNothing() throws Exception
    {
        final Path credentials = tempDir.resolve("credentials");
        Files.writeString(credentials, "operator ops " + OPERATOR + "\ntenant team-a team-a-secret-000000\n");
        Files.setPosixFilePermissions(credentials, PosixFilePermissions.fromString("rw-------"));
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.resolve("state").toString()).controlCredentialsFile(credentials.toString()).joinTimeoutMs(600_000)
            .controlLimits(64, 64, 2_000));
        final long seed = TestSeed.seed();
        final String where = TestSeed.describe(seed);
        final Random random = new Random(seed);
        final JobRegistry registry = appliance.registry();
        Socket socket = null;
        BufferedReader reader = null;
        int refused = 0;
        try
        {
            for (int i = 0; i < ITERATIONS; i++)
            {
                if (socket == null)
                {
                    socket = new Socket("127.0.0.1", appliance.controlPort());
                    socket.setSoTimeout(5_000);
                    reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
                }
                String line = MUTATOR.mutate(LINES[random.nextInt(LINES.length)], random);
                if (line.startsWith("JOIN"))
                {
                    // a JOIN that is taken holds the connection as a membership: send it alone, then drop the connection
                    line = line.replace("JOIN", "JOIN-ish");
                }
                final int jobsBefore = registry.jobCount();
                final long memoryBefore = registry.memoryUsedBytes();
                final OutputStream out = socket.getOutputStream();
                out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
                String reply = reader.readLine();
                while (reply != null && reply.startsWith("JOB "))
                {
                    reply = reader.readLine();
                }
                if (reply == null)
                {
                    socket.close();
                    socket = null;
                    continue;
                }
                if (reply.startsWith("ERR"))
                {
                    refused++;
                    assertEquals(jobsBefore, registry.jobCount(), "a refused line created or ended a job: " + line + "; " + where);
                    assertEquals(memoryBefore, registry.memoryUsedBytes(), "a refused line moved memory: " + line + "; " + where);
                }
                else
                {
                    assertTrue(reply.startsWith("OK") || reply.startsWith("STATS") || reply.startsWith("END"),
                        "reply to " + line + ": " + reply + "; " + where);
                }
            }
        }
        finally
        {
            if (socket != null)
            {
                socket.close();
            }
        }
        assertTrue(refused > ITERATIONS / 4, "most mutations are refused: " + refused + "; " + where);
        try (Socket health = new Socket("127.0.0.1", appliance.controlPort()))
        {
            health.getOutputStream().write("HEALTH\n".getBytes(StandardCharsets.UTF_8));
            final String reply = new BufferedReader(new InputStreamReader(health.getInputStream(), StandardCharsets.UTF_8)).readLine();
            assertNotNull(reply);
            assertTrue(reply.startsWith("OK status=up"), reply);
        }
    }
}
