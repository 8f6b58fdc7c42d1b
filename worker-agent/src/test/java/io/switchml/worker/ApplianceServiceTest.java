package io.switchml.worker;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The appliance as a service, in one JVM with its workers over real sockets: slot deadlines,
 * admission control, shards, and the HTTP endpoint.
 */
@Timeout(120)
class ApplianceServiceTest
{
    @TempDir
    Path tempDir;

    private final ExecutorService executor = Executors.newCachedThreadPool();
    private Appliance appliance;

    @AfterEach
    void stop()
    {
        executor.shutdownNow();
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private Appliance start(final ApplianceContext context) throws Exception
    {
        appliance = Appliance.launch(context.dataPort(0).controlPort(0).httpPort(0).dir(tempDir.toString()));
        return appliance;
    }

    private WorkerContext worker(final String job, final int world, final int rank)
    {
        return new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token("token-" + job)
            .worldSize(world).rank(rank).elementType(ElementType.INT32).lanes(512).slots(8).retransmitTimeoutMs(10);
    }

    @Test
    void stalledRankAbortsTheJobNamingItWithinTheSlotDeadline() throws Exception
    {
        start(new ApplianceContext().slotTimeoutMs(500));
        final List<Future<WorkerClient>> joins = new ArrayList<>();
        for (int rank = 0; rank < 3; rank++)
        {
            final int r = rank;
            joins.add(executor.submit(() -> WorkerClient.connect(worker("stall", 3, r))));
        }
        final WorkerClient stalled = joins.get(2).get();
        final List<Future<String>> failures = new ArrayList<>();
        final long startNs = System.nanoTime();
        for (int rank = 0; rank < 2; rank++)
        {
            final WorkerClient client = joins.get(rank).get();
            failures.add(executor.submit(() ->
            {
                final int[] tensor = new int[10_000];
                return assertThrows(AllReduceException.class, () -> client.allReduce(tensor, tensor)).getMessage();
            }));
        }
        for (final Future<String> failure : failures)
        {
            final String message = failure.get();
            assertTrue(message.contains("missing ranks [2]"), message);
            assertTrue(message.contains("incomplete for more than 500 ms"), message);
        }
        final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;
        assertTrue(elapsedMs < 2_500, "abort took " + elapsedMs + " ms");
        assertEquals(0, appliance.registry().jobCount(), "the aborted job's slots are freed");
        assertEquals(0, appliance.registry().memoryUsedBytes());
        stalled.close();

        appliance.close();
        try (JournalReader reader = JournalReader.open(tempDir.resolve("journal")))
        {
            final List<JournalRecord> records = new ArrayList<>();
            reader.toStart().readAvailable(records::add);
            assertTrue(records.stream().anyMatch(r -> r.type() == JournalEvent.JOB_STARTED && "stall".equals(r.jobName())),
                records.toString());
            assertTrue(records.stream().anyMatch(r -> r.type() == JournalEvent.JOB_ABORTED && r.message().contains("missing ranks [2]")),
                records.toString());
            assertTrue(records.stream().anyMatch(r -> r.type() == JournalEvent.HISTOGRAM_SNAPSHOT), records.toString());
            assertTrue(records.stream().anyMatch(r -> r.type() == JournalEvent.APPLIANCE_STOPPING), records.toString());
        }
    }

    @Test
    void admissionRefusesOverBudgetAndOverQuotaWithClearErrors() throws Exception
    {
        final long jobBytes = io.switchml.appliance.engine.SlotPool.memoryBytes(8, 512);
        start(new ApplianceContext().memoryBudgetBytes(3 * jobBytes).tenantMemoryQuotaBytes(2 * jobBytes).tenantMaxJobs(5));
        final List<Future<WorkerClient>> pending = new ArrayList<>();
        pending.add(executor.submit(() -> WorkerClient.connect(worker("a1", 2, 0).tenant("acme"))));
        pending.add(executor.submit(() -> WorkerClient.connect(worker("a2", 2, 0).tenant("acme"))));
        final long deadline = System.currentTimeMillis() + 10_000;
        while (appliance.registry().jobCount() < 2)
        {
            assertTrue(System.currentTimeMillis() < deadline);
            Thread.onSpinWait();
        }
        final AllReduceException quota = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("a3", 2, 0).tenant("acme")));
        assertTrue(quota.getMessage().contains("tenant 'acme'") && quota.getMessage().contains("quota"), quota.getMessage());

        pending.add(executor.submit(() -> WorkerClient.connect(worker("b1", 2, 0).tenant("globex"))));
        while (appliance.registry().jobCount() < 3)
        {
            assertTrue(System.currentTimeMillis() < deadline);
            Thread.onSpinWait();
        }
        final AllReduceException budget = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("b2", 2, 0).tenant("globex")));
        assertTrue(budget.getMessage().contains("aggregator memory") && budget.getMessage().contains("are free"),
            budget.getMessage());
        assertTrue(appliance.counter("admission_refusals") >= 2);
        pending.forEach(future -> future.cancel(true));
    }

    @Test
    void wrongTokenIsRefused() throws Exception
    {
        start(new ApplianceContext());
        final Future<WorkerClient> first = executor.submit(() -> WorkerClient.connect(worker("secret", 2, 0)));
        final long deadline = System.currentTimeMillis() + 10_000;
        while (appliance.registry().jobCount() < 1)
        {
            assertTrue(System.currentTimeMillis() < deadline);
            Thread.onSpinWait();
        }
        final AllReduceException refused = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("secret", 2, 1).token("not-the-token")));
        assertTrue(refused.getMessage().contains("token does not match"), refused.getMessage());
        first.cancel(true);
    }

    @Test
    void twoShardsTwoTenantsConcurrentlyWithExactSumsAndMetrics() throws Exception
    {
        start(new ApplianceContext().shards(2));
        final int length = 60_001;
        final List<Future<int[]>> results = new ArrayList<>();
        for (final String job : new String[]{"tenant-a-job", "tenant-b-job"})
        {
            for (int rank = 0; rank < 3; rank++)
            {
                final int r = rank;
                results.add(executor.submit(() ->
                {
                    try (WorkerClient client = WorkerClient.connect(worker(job, 3, r).tenant(job.substring(0, 8))))
                    {
                        final int[] tensor = new int[length];
                        for (int round = 0; round < 3; round++)
                        {
                            KnownTensors.fill(tensor, r, round + job.length());
                            client.allReduce(tensor, tensor);
                            final String error = KnownTensors.verifyIntSum(tensor, 3, round + job.length());
                            assertEquals(null, error, job + " rank " + r + " round " + round);
                        }
                        return tensor;
                    }
                }));
            }
        }
        for (final Future<int[]> result : results)
        {
            assertEquals(length, result.get().length);
        }
        assertArrayEquals(results.get(0).get(), results.get(2).get());

        final HttpResponse<String> metrics = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + appliance.httpPort() + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, metrics.statusCode());
        assertTrue(metrics.body().contains("switchml_shard_slots_completed_total{shard=\"1\"}"), metrics.body());
        assertTrue(metrics.body().contains("switchml_jobs_created_total 2.0"), metrics.body());
        final HttpResponse<String> health = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + appliance.httpPort() + "/health")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, health.statusCode());
        assertTrue(health.body().contains("\"status\": \"up\""), health.body());
    }

    @Test
    void resultsMulticastToTheJobsGroupAreReceivedByEveryRank() throws Exception
    {
        // data ports chosen below the ephemeral range with their derived multicast ports (+1000) free: with ephemeral
        // data ports, a derived port may be one another socket holds, and a rank could not join the group
        appliance = Appliance.launch(new ApplianceContext().shards(2).multicastBase("239.192.0.0")
            .dataPort(freeDataPortsWithMulticast(2)).controlPort(0).httpPort(0).dir(tempDir.toString()));
        final int length = 50_003;
        final List<Future<String>> results = new ArrayList<>();
        for (int rank = 0; rank < 3; rank++)
        {
            final int r = rank;
            results.add(executor.submit(() ->
            {
                try (WorkerClient client = WorkerClient.connect(worker("mcast", 3, r)))
                {
                    final int[] tensor = new int[length];
                    for (int round = 0; round < 3; round++)
                    {
                        KnownTensors.fill(tensor, r, round);
                        client.allReduce(tensor, tensor);
                        final String error = KnownTensors.verifyIntSum(tensor, 3, round);
                        if (error != null)
                        {
                            return error;
                        }
                    }
                    return null;
                }
            }));
        }
        for (final Future<String> result : results)
        {
            assertEquals(null, result.get());
        }
        final long completed = appliance.counter("slots_completed");
        // the answers to one rank's probes and resends go to that rank alone
        final long sent = appliance.counter("packets_out") - appliance.counter("retransmissions_served") -
            appliance.counter("nacks_sent") - appliance.counter("pendings_sent");
        assertTrue(completed > 0);
        assertEquals(completed, sent, "one multicast datagram per completed slot, not one per rank");
    }

    /**
     * @return a base port P below the usual ephemeral range such that P .. P + shards - 1 and the same ports + 1000
     * are free on UDP now (a race with another process remains, far less likely than with ephemeral data ports).
     */
    private static int freeDataPortsWithMulticast(final int shards) throws java.io.IOException
    {
        final java.util.SplittableRandom random = new java.util.SplittableRandom();
        for (int attempt = 0; attempt < 200; attempt++)
        {
            final int base = 20_000 + random.nextInt(10_000);
            final List<java.net.DatagramSocket> held = new ArrayList<>();
            try
            {
                for (int shard = 0; shard < shards; shard++)
                {
                    held.add(new java.net.DatagramSocket(base + shard));
                    held.add(new java.net.DatagramSocket(base + shard + ApplianceContext.MULTICAST_PORT_OFFSET));
                }
                return base;
            }
            catch (final java.net.SocketException taken)
            {
                // try another base
            }
            finally
            {
                held.forEach(java.net.DatagramSocket::close);
            }
        }
        throw new java.io.IOException("no free UDP ports for " + shards + " data shards and their multicast ports");
    }
}
