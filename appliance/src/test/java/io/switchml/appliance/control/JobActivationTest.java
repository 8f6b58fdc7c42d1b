package io.switchml.appliance.control;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendCapabilities;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A backend's installation and removal of a job (a switch's: thousands of RPCs, seconds each when it does not answer)
 * run outside the registry's lock: while one job's installation hangs, another tenant creates, lists and ends jobs;
 * a job aborted during its installation stays ended, its ranks refused naming why, and its backend job released
 * once; a backend that throws ends the job instead of leaving its ranks waiting.
 */
@Timeout(60)
class JobActivationTest
{
    @TempDir
    Path directory;

    @Test
    void aHangingInstallationHoldsUpNobodyAndAnAbortDuringItEndsTheJob() throws Exception
    {
        final SlowBackend slow = new SlowBackend();
        try (Telemetry telemetry = new Telemetry(directory, 1))
        {
            final JobRegistry registry = new JobRegistry(1L << 30, 1L << 30, 16, 1, telemetry);
            registry.placement(List.of(slow), false, (backend, reason) -> { });
            final Job job = registry.create(spec("a", "slow", 2), "token-of-slow", false);
            // a thread each: the common pool has one thread on two cores, and a rank's join waits for the others
            final java.util.concurrent.ExecutorService ranks = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor();
            final CompletableFuture<Job> rank0 = CompletableFuture.supplyAsync(() -> join(registry, job, 0), ranks);
            final CompletableFuture<Job> rank1 = CompletableFuture.supplyAsync(() -> join(registry, job, 1), ranks);
            assertTrue(slow.activating.await(10, TimeUnit.SECONDS), "the last rank installs the job");

            // the slow job's release waits for its installation: the abort goes on after RELEASE_WAIT_MS
            assertTimeoutPreemptively(Duration.ofMillis(JobRegistry.RELEASE_WAIT_MS + 1_500), () ->
            {
                assertTrue(registry.describeJobs().getFirst().contains(" state=activating "), registry.describeJobs().toString());
                final Job other = registry.create(spec("b", "other", 1), null, false);
                assertEquals(2, registry.jobCount());
                registry.abort(other, "done with it");
                registry.abort(job, "stopped by an operator");
            });

            slow.release.countDown();
            for (final CompletableFuture<Job> rank : List.of(rank0, rank1))
            {
                final Throwable refused = assertThrows(ExecutionException.class, () -> rank.get(10, TimeUnit.SECONDS)).getCause();
                assertTrue(refused.getMessage().contains("did not start: stopped by an operator"), refused.toString());
            }
            assertEquals(0, registry.jobCount());
            final long deadline = System.nanoTime() + 5_000_000_000L;
            while (slow.released() < 2 && System.nanoTime() < deadline)
            {
                Thread.sleep(10);
            }
            assertEquals(2, slow.released(), "each backend job released once, the slow one after its installation");
            ranks.close();
        }
    }

    @Test
    void aBackendThatThrowsWhileInstallingEndsTheJob() throws Exception
    {
        final SlowBackend failing = new SlowBackend();
        failing.release.countDown();
        failing.failWith = new IllegalStateException("a bug in the backend");
        try (Telemetry telemetry = new Telemetry(directory, 1))
        {
            final JobRegistry registry = new JobRegistry(1L << 30, 1L << 30, 16, 1, telemetry);
            registry.placement(List.of(failing), false, (backend, reason) -> { });
            final Job job = registry.create(spec("a", "buggy", 1), "token-of-buggy", false);

            final Throwable refused = assertThrows(RuntimeException.class, () -> join(registry, job, 0)).getCause();
            assertTrue(refused.getMessage().contains("backend slow failed to install the job: " +
                "java.lang.IllegalStateException: a bug in the backend"), refused.toString());
            assertEquals(0, registry.jobCount());
            assertEquals(1, failing.released());
        }
    }

    private static Job join(final JobRegistry registry, final Job job, final int rank)
    {
        try
        {
            return registry.join(job.jobId, rank, job.token,
                new InetSocketAddress[] {new InetSocketAddress(InetAddress.getLoopbackAddress(), 9000 + rank)}, null);
        }
        catch (final JobRegistry.RefusedException | InterruptedException ex)
        {
            throw new RuntimeException(ex);
        }
    }

    private static JobSpec spec(final String tenant, final String name, final int world)
    {
        return new JobSpec(tenant, name, world, ElementType.INT32, 64, 8, false, 1_000, 30_000);
    }

    /**
     * A backend whose installation waits for the test, or throws.
     */
    private static final class SlowBackend implements Backend
    {
        final CountDownLatch activating = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        volatile RuntimeException failWith;
        private int released;

        synchronized int released()
        {
            return released;
        }

        public String name()
        {
            return "slow";
        }

        public BackendCapabilities capabilities()
        {
            return new BackendCapabilities(BackendCapabilities.typeSet(ElementType.INT32), 1, 1024, 64, 1 << 20, 0, true, true);
        }

        public String refusal(final JobSpec spec)
        {
            return null;
        }

        public boolean slotsInShards()
        {
            return true;
        }

        public BackendJob reserve(final JobSpec spec, final int jobId)
        {
            return new BackendJob()
            {
                public synchronized void activate(final Job job)
                {
                    activating.countDown();
                    try
                    {
                        release.await();
                    }
                    catch (final InterruptedException ex)
                    {
                        Thread.currentThread().interrupt();
                    }
                    if (failWith != null)
                    {
                        throw failWith;
                    }
                }

                public String poll(final long nowNs)
                {
                    return null;
                }

                public synchronized void release()
                {
                    synchronized (SlowBackend.this)
                    {
                        released++;
                    }
                }
            };
        }

        public String health()
        {
            return null;
        }

        public String describe()
        {
            return "slow";
        }

        public void close()
        {
        }
    }
}
