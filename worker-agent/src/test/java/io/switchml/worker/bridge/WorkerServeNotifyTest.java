package io.switchml.worker.bridge;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.service.NotifySocketListener;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code switchml worker serve} under a {@code Type=notify} unit: a real JVM started with {@code NOTIFY_SOCKET}
 * naming a Unix datagram socket this test binds sends {@code READY=1} only once the job is joined, which needs
 * the other rank, and {@code STOPPING=1} on SIGTERM.
 */
class WorkerServeNotifyTest
{
    private static final String TOKEN = "notify-test-token";
    private static final int LANES = 64;
    /** How long rank 0 is watched for a premature READY=1 while rank 1 has not joined. */
    private static final long NOT_READY_WINDOW_MS = 2_000;

    @TempDir
    Path tempDir;

    private Appliance appliance;
    private Process rank0;
    private BridgeServer rank1;

    @BeforeEach
    void startAppliance() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.resolve("appliance").toString()).joinTimeoutMs(60_000));
    }

    @AfterEach
    void stop()
    {
        if (rank0 != null)
        {
            rank0.destroyForcibly();
        }
        if (rank1 != null)
        {
            rank1.close();
        }
        appliance.close();
    }

    @Test
    @Timeout(90)
    void readyArrivesOnlyAfterEveryRankHasJoinedAndStoppingOnSigterm() throws Exception
    {
        final String job = "notify";
        try (NotifySocketListener listener = new NotifySocketListener(tempDir.resolve("notify.sock")))
        {
            final List<String> command = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElseThrow(),
                "--enable-native-access=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
                "-Xmx256m", "-cp", System.getProperty("java.class.path"),
                WorkerServeCommand.class.getName(),
                "--control-port", Integer.toString(appliance.controlPort()), "--job", job, "--token", TOKEN,
                "--world", "2", "--rank", "0", "--lanes", Integer.toString(LANES), "--slots", "8",
                "--socket", tempDir.resolve("rank0.sock").toString(), "--shm", tempDir.resolve("rank0.shm").toString(),
                "--shm-bytes", "65536"));
            final ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
            builder.environment().put("NOTIFY_SOCKET", listener.address());
            builder.environment().remove("SWITCHML_JOB_TOKEN");
            rank0 = builder.start();
            final LinkedBlockingQueue<String> output = new LinkedBlockingQueue<>();
            final CompletableFuture<Void> reader = CompletableFuture.runAsync(() -> readLines(rank0, output));

            awaitLine(output, "switchml worker serve: joining job " + job, 30_000);
            final String beforeJoin = receiveUntil(listener, "READY=1", NOT_READY_WINDOW_MS);
            assertNull(beforeJoin, "READY=1 before rank 1 joined: " + beforeJoin);

            rank1 = BridgeServer.launch(new BridgeContext()
                .worker(new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token(TOKEN)
                    .worldSize(2).rank(1).lanes(LANES).slots(8))
                .socketPath(tempDir.resolve("rank1.sock")).shmPath(tempDir.resolve("rank1.shm")).shmBytes(64 * 1024));
            final String ready = receiveUntil(listener, "READY=1", 30_000);
            assertNotNull(ready, "READY=1 once both ranks joined; rank 0 printed: " + output);
            assertTrue(ready.contains("STATUS=joined job notify as rank 0 of 2"), ready);
            awaitLine(output, "switchml worker serve ready: socket=" + tempDir.resolve("rank0.sock"), 5_000);

            rank0.destroy();
            final String stopping = receiveUntil(listener, "STOPPING=1", 30_000);
            assertNotNull(stopping, "STOPPING=1 after SIGTERM; rank 0 printed: " + output);
            assertTrue(rank0.waitFor(30, TimeUnit.SECONDS), "rank 0 exits after SIGTERM");
            assertEquals(143, rank0.exitValue());
            reader.get(5, TimeUnit.SECONDS);
        }
    }

    /** The first datagram holding the line {@code wanted} within the time; null if none came. */
    private static String receiveUntil(final NotifySocketListener listener, final String wanted, final long timeoutMs)
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        long remainingMs;
        while ((remainingMs = TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime())) > 0)
        {
            final String datagram = listener.receive(remainingMs);
            if (datagram != null && List.of(datagram.split("\n")).contains(wanted))
            {
                return datagram;
            }
        }
        return null;
    }

    private static void awaitLine(final LinkedBlockingQueue<String> output, final String prefix, final long timeoutMs)
        throws InterruptedException
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        final List<String> seen = new ArrayList<>();
        while (System.nanoTime() - deadlineNs < 0)
        {
            final String line = output.poll(50, TimeUnit.MILLISECONDS);
            if (line != null)
            {
                seen.add(line);
                if (line.startsWith(prefix))
                {
                    return;
                }
            }
        }
        throw new AssertionError("no line starting with '" + prefix + "' within " + timeoutMs + " ms; saw " + seen);
    }

    private static void readLines(final Process process, final LinkedBlockingQueue<String> output)
    {
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
        {
            String line;
            while ((line = reader.readLine()) != null)
            {
                output.add(line);
            }
        }
        catch (final java.io.IOException ignore)
        {
            // the process was killed
        }
    }
}
