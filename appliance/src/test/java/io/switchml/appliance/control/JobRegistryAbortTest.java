package io.switchml.appliance.control;

import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

/**
 * An abort tells the job's members outside the registry's lock: a member that reads nothing (its socket's buffers
 * full) holds up only that send, never another tenant's CREATE or JOBS, nor the control thread's slot timeouts.
 */
@Timeout(60)
class JobRegistryAbortTest
{
    @TempDir
    Path directory;

    @Test
    void aMemberThatReadsNothingDoesNotHoldTheRegistry() throws Exception
    {
        try (Telemetry telemetry = new Telemetry(directory, 1);
            ServerSocket listening = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
            Socket member = new Socket(InetAddress.getLoopbackAddress(), listening.getLocalPort());
            ControlConnection connection = new ControlConnection(listening.accept()))
        {
            final JobRegistry registry = new JobRegistry(1L << 30, 1L << 30, 16, 1, telemetry);
            final Job job = registry.create(spec("a", "deaf"), "token-of-a-job", false);
            registry.join(job.jobId, 0, "token-of-a-job",
                new InetSocketAddress[] {new InetSocketAddress(InetAddress.getLoopbackAddress(), 9)}, connection);

            // a reason far larger than the socket buffers: the send blocks until the member reads, which it never does;
            // the abort returns at once all the same (the control thread that runs slot timeouts calls it)
            assertTimeoutPreemptively(Duration.ofSeconds(2), () -> registry.abort(job, "x".repeat(64 << 20)));
            Thread.sleep(300);
            assertTimeoutPreemptively(Duration.ofSeconds(2), () ->
            {
                assertEquals(0, registry.describeJobs().size(), "the job ended before its members were told");
                registry.create(spec("b", "other"), null, false);
                assertEquals(1, registry.jobCount());
            });
            member.close();
            connection.close();
        }
    }

    /**
     * At shutdown the registry aborts every job and creates none after it: a CREATE that arrived between the aborts and
     * the control server's close would reserve what the closing backends hold (a switch's entries, an XDP range), and
     * nobody would release it.
     */
    @Test
    void noJobIsCreatedOnceEveryJobWasAbortedForShutdown() throws Exception
    {
        try (Telemetry telemetry = new Telemetry(directory, 1))
        {
            final JobRegistry registry = new JobRegistry(1L << 30, 1L << 30, 16, 1, telemetry);
            registry.create(spec("a", "running"), null, false);
            registry.abortAll("appliance shutting down");

            final JobRegistry.RefusedException refused = org.junit.jupiter.api.Assertions.assertThrows(
                JobRegistry.RefusedException.class, () -> registry.create(spec("a", "late"), null, false));
            assertEquals("job 'late' is not created: appliance shutting down", refused.getMessage());
            assertEquals(0, registry.jobCount());
        }
    }

    private static JobSpec spec(final String tenant, final String name)
    {
        return new JobSpec(tenant, name, 1, ElementType.INT32, 64, 8, false, 1_000, 5_000);
    }
}
