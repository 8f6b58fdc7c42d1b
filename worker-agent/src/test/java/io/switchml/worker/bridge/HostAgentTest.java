package io.switchml.worker.bridge;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlProtocol;
import io.switchml.worker.HostWarmUp;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The host agent ({@code switchml worker host}) in this JVM with an embedded appliance, driven over its socket by
 * Java test clients: sessions of several jobs in one agent, one after another and at once, refused OPENs naming the
 * field, a lost client aborting its job, and the files' modes. The Python client's use of it is
 * {@code PyTorchBridgeTest}'s.
 */
@Timeout(120)
class HostAgentTest
{
    private static final String TOKEN = "host-test-token";

    @TempDir
    Path tempDir;

    private Appliance appliance;
    private HostAgent agent;
    private final ExecutorService executor = Executors.newCachedThreadPool();
    private final List<BridgeTestClient> clients = new ArrayList<>();

    @BeforeEach
    void start() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.resolve("appliance").toString()).joinTimeoutMs(30_000));
        startAgent(8);
    }

    private void startAgent(final int maxSessions) throws IOException
    {
        if (agent != null)
        {
            agent.close();
        }
        final int controlPort = appliance.controlPort();
        agent = HostAgent.bind(() -> new WorkerContext().controlPort(controlPort).lanes(64).slots(8).joinTimeoutMs(20_000),
            tempDir.resolve("host.sock"), tempDir, maxSessions, 1 << 20, 16);
        executor.submit(agent::serve);
    }

    @AfterEach
    void stop() throws Exception
    {
        for (final BridgeTestClient client : clients)
        {
            client.close();
        }
        agent.close();
        executor.shutdownNow();
        appliance.close();
    }

    private BridgeTestClient connect() throws IOException
    {
        final BridgeTestClient client = new BridgeTestClient(agent.socketPath());
        clients.add(client);
        return client;
    }

    /** OPEN every rank of a job at once (each OPEN waits for all joins); return the clients with shm mapped. */
    private List<BridgeTestClient> openJob(final String job, final int world, final String extra) throws Exception
    {
        final List<BridgeTestClient> ranks = new ArrayList<>();
        final List<Future<String>> replies = new ArrayList<>();
        for (int rank = 0; rank < world; rank++)
        {
            final BridgeTestClient client = connect();
            ranks.add(client);
            final String open = "OPEN job=" + job + " rank=" + rank + " world=" + world + " token=" + TOKEN + extra;
            replies.add(executor.submit(() -> client.request(open)));
        }
        for (int rank = 0; rank < world; rank++)
        {
            final Map<String, String> opened = ControlProtocol.parse(replies.get(rank).get(30, TimeUnit.SECONDS));
            assertEquals("OK", opened.get(""), opened.toString());
            assertEquals(Integer.toString(rank), opened.get("rank"));
            assertEquals(job, opened.get("job"));
            final Map<String, String> info = ranks.get(rank).mapShm();
            assertEquals(opened.get("shm"), info.get("shm"), "INFO after OPEN names the session's shared memory");
        }
        return ranks;
    }

    private static void allReduceAndCheck(final List<BridgeTestClient> ranks, final int count) throws Exception
    {
        for (int rank = 0; rank < ranks.size(); rank++)
        {
            final FloatBuffer shm = ranks.get(rank).shm();
            for (int i = 0; i < count; i++)
            {
                shm.put(i, (rank + 1) * (1 + i % 8));
            }
        }
        final List<Future<String>> replies = new ArrayList<>();
        try (ExecutorService requests = Executors.newCachedThreadPool())
        {
            for (final BridgeTestClient client : ranks)
            {
                replies.add(requests.submit(() -> client.request("ALLREDUCE offset=0 count=" + count + " op=sum")));
            }
            for (final Future<String> reply : replies)
            {
                assertTrue(reply.get(30, TimeUnit.SECONDS).startsWith("OK us="), reply.get());
            }
        }
        final int n = ranks.size();
        for (final BridgeTestClient client : ranks)
        {
            for (int i = 0; i < count; i++)
            {
                assertEquals(n * (n + 1) / 2 * (1 + i % 8), client.shm().get(i), "element " + i);
            }
        }
    }

    @Test
    void servesJobsOneAfterAnotherAndAtOnceFromOneProcess() throws Exception
    {
        final List<BridgeTestClient> first = openJob("first", 2, "");
        allReduceAndCheck(first, 1_000);
        // a second job at the same time, with its own k and s, while the first is open
        final List<BridgeTestClient> second = openJob("second", 3, " k=32 s=4 int32=off");
        assertEquals(5, agent.sessions());
        allReduceAndCheck(second, 777);
        allReduceAndCheck(first, 1_000);
        for (final BridgeTestClient client : first)
        {
            assertEquals("OK", client.request("CLOSE"));
            assertNull(client.readLine(), "the agent closes the connection after CLOSE");
        }
        for (final BridgeTestClient client : second)
        {
            client.request("CLOSE");
        }
        // the jobs were left: the same names can be joined again, in the same agent
        final List<BridgeTestClient> again = openJob("first", 2, "");
        allReduceAndCheck(again, 100);
        assertEquals(7, agent.opened());
        assertEquals(0, agent.refused());
    }

    @Test
    void socketAndSharedMemoryAreForTheAgentsGroupOnly() throws Exception
    {
        assertEquals("rw-rw----", PosixFilePermissions.toString(
            Files.getPosixFilePermissions(agent.socketPath(), LinkOption.NOFOLLOW_LINKS)));
        final BridgeTestClient client = openJob("modes", 1, "").getFirst();
        final Path shm = Path.of(ControlProtocol.parse(client.request("INFO")).get("shm"));
        assertEquals(tempDir, shm.getParent());
        assertEquals("rw-rw----", PosixFilePermissions.toString(Files.getPosixFilePermissions(shm)));
        assertEquals("OK", client.request("CLOSE"));
        assertNull(client.readLine());
        for (int i = 0; i < 100 && Files.exists(shm); i++)
        {
            Thread.sleep(20);
        }
        assertFalse(Files.exists(shm), "the session's shared memory is deleted when it ends");
    }

    @Test
    void badOpensAreRefusedNamingTheField() throws Exception
    {
        assertRefused("INFO", "expected OPEN");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " transport=nio", "unknown OPEN field 'transport'");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " tenant=other", "serves tenant default, not other");
        assertRefused("OPEN job=j world=1 token=" + TOKEN, "missing field 'rank'");
        assertRefused("OPEN job=j rank=2 world=2 token=" + TOKEN, "rank must be within 0..1");
        assertRefused("OPEN job=j rank=0 world=1", "job token is required");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " shmBytes=" + (2 << 20), "--max-shm-bytes");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " mac=maybe", "mac must be on or off");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " appliance=127.0.0.1:99999", "port must be 1..65535");
        assertRefused("OPEN " + "x".repeat(BridgeProtocol.MAX_LINE_BYTES), "longer than");
        assertEquals(10, agent.refused());
        assertEquals(0, agent.sessions());
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " k=65", "k 65 exceeds this host agent's -k 64");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " joinTimeoutMs=20001",
            "joinTimeoutMs 20001 exceeds this host agent's --join-timeout-ms 20000");
        // a wrong token for an existing job: the appliance's refusal, passed on, and its shared memory gone
        final List<BridgeTestClient> job = openJob("taken", 1, "");
        assertRefused("OPEN job=taken rank=0 world=1 token=another-token-1", "token");
        job.getFirst().request("CLOSE");
        assertNull(job.getFirst().readLine());
        awaitNoSharedMemory();
    }

    private void awaitNoSharedMemory() throws Exception
    {
        List<Path> left = List.of();
        for (int i = 0; i < 100; i++)
        {
            try (var files = Files.list(tempDir))
            {
                left = files.filter(path -> path.getFileName().toString().endsWith(".shm")).toList();
            }
            if (left.isEmpty())
            {
                return;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("shared memory left: " + left);
    }

    @Test
    void connectionsThatSendNoOpenAreBoundedAndTimedOut() throws Exception
    {
        startAgent(1);
        assertEquals(2, agent.maxConnections());
        final BridgeTestClient idle1 = connect();
        final BridgeTestClient idle2 = connect();
        for (int i = 0; i < 100 && agent.refused() == 0; i++)
        {
            final BridgeTestClient extra = connect();
            final String reply = extra.readLine();
            if (reply != null)
            {
                assertTrue(reply.startsWith("ERR message=busy: this host agent has 2 connections open"), reply);
                break;
            }
        }
        assertEquals(1, agent.refused(), "the third connection is refused at once");
        // the idle ones are closed after the OPEN timeout
        final long startNs = System.nanoTime();
        assertNull(idle1.readLine());
        assertNull(idle2.readLine());
        assertTrue(System.nanoTime() - startNs >= TimeUnit.MILLISECONDS.toNanos(HostAgent.OPEN_TIMEOUT_MS / 2),
            "closed by the OPEN timeout, not at once");
    }

    @Test
    void closingTheAgentEndsOpenSessionsAndDeletesTheirSharedMemory() throws Exception
    {
        final List<BridgeTestClient> ranks = openJob("closing", 2, "");
        allReduceAndCheck(ranks, 16);
        agent.close();
        for (final BridgeTestClient client : ranks)
        {
            assertNull(client.readLine(), "the session ends with the agent");
        }
        awaitNoSharedMemory();
        assertFalse(Files.exists(tempDir.resolve("host.sock")));
    }

    @Test
    void aClientCannotSendTheAgentsCredentialToAnApplianceOfItsChoosing() throws Exception
    {
        agent.close();
        final int controlPort = appliance.controlPort();
        agent = HostAgent.bind(() -> new WorkerContext().controlPort(controlPort).lanes(64).slots(8)
                .credential("host-tenant-secret-0123456789"), tempDir.resolve("host.sock"), tempDir, 8, 1 << 20, 16);
        executor.submit(agent::serve);
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " appliance=203.0.113.9", "may not name another appliance");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " controlPort=" + (controlPort + 1),
            "may not name another appliance");
        // naming its own appliance is no change
        allReduceAndCheck(openJob("own", 1, " appliance=127.0.0.1:" + controlPort + " tenant=default"), 10);
    }

    private void assertRefused(final String open, final String naming) throws IOException
    {
        final BridgeTestClient client = connect();
        final String reply = client.request(open);
        assertTrue(reply.startsWith("ERR message=") && reply.contains(naming), open + " -> " + reply);
        assertNull(client.readLine(), "the agent closes a refused connection");
    }

    @Test
    void sessionsBeyondTheLimitAreRefusedUntilOneEnds() throws Exception
    {
        startAgent(1);
        final BridgeTestClient only = openJob("one", 1, "").getFirst();
        assertRefused("OPEN job=two rank=0 world=1 token=" + TOKEN, "busy: this host agent serves 1 sessions");
        assertEquals("OK", only.request("CLOSE"));
        assertNull(only.readLine());
        for (int i = 0; i < 100 && agent.sessions() > 0; i++)
        {
            Thread.sleep(20);
        }
        allReduceAndCheck(openJob("two", 1, ""), 10);
    }

    @Test
    void aClientLostWithoutCloseAbortsItsJobNamingTheRank() throws Exception
    {
        final List<BridgeTestClient> ranks = openJob("lost", 2, "");
        allReduceAndCheck(ranks, 64);
        ranks.get(1).close();
        final String reply = ranks.get(0).request("ALLREDUCE offset=0 count=64 op=sum");
        assertTrue(reply.startsWith("ERR") && reply.contains("rank 1"), reply);
    }

    @Test
    void warmUpRunsTheDataPathForItsBudget()
    {
        final HostWarmUp.Result warm = HostWarmUp.run(new WorkerContext().lanes(64), 400);
        assertTrue(warm.rehearsals() >= 1, warm.toString());
        assertTrue(warm.allReduces() > 0, warm.toString());
        assertTrue(warm.elapsedMs() >= 400, "it goes on for its budget: " + warm);
    }
}
