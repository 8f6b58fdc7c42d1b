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
import static org.junit.jupiter.api.Assertions.assertThrows;
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
    /** Another node's agent, for the tests of ranks summed per node. */
    private HostAgent node1;
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
        if (node1 != null)
        {
            node1.close();
        }
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
    void anAgentForOneJobClosesWhenTheLastOfItsSessionsEnds() throws Exception
    {
        agent.closeAfterSessions(2);
        final List<BridgeTestClient> ranks = openJob("once", 2, "");
        allReduceAndCheck(ranks, 500);
        assertEquals("OK", ranks.get(0).request("CLOSE"));
        assertNull(ranks.get(0).readLine());
        Thread.sleep(200);
        assertTrue(Files.exists(agent.socketPath()), "one session still open: the agent serves on");
        assertEquals(1, agent.sessions());
        assertTrue(ControlProtocol.parse(ranks.get(1).request("INFO")).containsKey("shm"), "the other session still answers");
        assertEquals("OK", ranks.get(1).request("CLOSE"));
        assertNull(ranks.get(1).readLine());
        for (int i = 0; i < 100 && Files.exists(agent.socketPath()); i++)
        {
            Thread.sleep(20);
        }
        assertFalse(Files.exists(agent.socketPath()), "the last session ended: the agent closed and deleted its socket");
        assertEquals(2, agent.opened());
        assertThrows(IllegalArgumentException.class, () -> agent.closeAfterSessions(-1));
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
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " slotTimeoutMs=3600001",
            "slotTimeoutMs must be 10..3600000: 3600001");
        assertRefused("OPEN job=j rank=0 world=1 token=" + TOKEN + " progressTimeoutMs=0", "progressTimeoutMs must be 1..7200000: 0");
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

    /**
     * Ranks 0..3 of a job of two nodes of 2 ranks: this agent's, and a second agent's on the same appliance (another
     * node's); opened at once, their shared memory mapped.
     *
     * @param chunkBytes the groups' chunk, small to make several of a small request.
     */
    private List<BridgeTestClient> openTwoNodes(final String job, final long chunkBytes) throws Exception
    {
        final int controlPort = appliance.controlPort();
        node1 = HostAgent.bind(() -> new WorkerContext().controlPort(controlPort).lanes(64).slots(8)
            .joinTimeoutMs(20_000), tempDir.resolve("node1.sock"), tempDir, 8, 1 << 20, 16);
        executor.submit(node1::serve);
        agent.localChunkBytes(chunkBytes);
        node1.localChunkBytes(chunkBytes);
        final List<Future<String>> replies = new ArrayList<>();
        final List<BridgeTestClient> ranks = new ArrayList<>(openNode(agent, job, 4, 0, 2, "", replies));
        ranks.addAll(openNode(node1, job, 4, 2, 2, "", replies));
        requireOpened(ranks, replies);
        return ranks;
    }

    /** OPEN ranks first..first+n-1 of a job of nodes of n ranks on one agent, at once; the clients with shm mapped. */
    private List<BridgeTestClient> openNode(final HostAgent on, final String job, final int world, final int first,
        final int localWorld, final String extra, final List<Future<String>> replies) throws IOException
    {
        final List<BridgeTestClient> ranks = new ArrayList<>();
        for (int local = 0; local < localWorld; local++)
        {
            final BridgeTestClient client = new BridgeTestClient(on.socketPath());
            clients.add(client);
            ranks.add(client);
            final String open = "OPEN job=" + job + " rank=" + (first + local) + " world=" + world + " token=" + TOKEN +
                " localRank=" + local + " localWorld=" + localWorld + extra;
            replies.add(executor.submit(() -> client.request(open)));
        }
        return ranks;
    }

    private static void requireOpened(final List<BridgeTestClient> ranks, final List<Future<String>> replies)
        throws Exception
    {
        for (int i = 0; i < ranks.size(); i++)
        {
            final String reply = replies.get(i).get(30, TimeUnit.SECONDS);
            assertTrue(reply.startsWith("OK "), reply);
            ranks.get(i).mapShm();
        }
    }

    private static List<String> requestAll(final List<BridgeTestClient> ranks, final java.util.function.IntFunction<String> line)
        throws Exception
    {
        final List<Future<String>> replies = new ArrayList<>();
        try (ExecutorService requests = Executors.newCachedThreadPool())
        {
            for (int i = 0; i < ranks.size(); i++)
            {
                final BridgeTestClient client = ranks.get(i);
                final String request = line.apply(i);
                replies.add(requests.submit(() -> client.request(request)));
            }
            final List<String> answers = new ArrayList<>();
            for (final Future<String> reply : replies)
            {
                answers.add(reply.get(30, TimeUnit.SECONDS));
            }
            return answers;
        }
    }

    @Test
    void theRanksOfANodeAreSummedInTheAgentAndSentAsOneWorker() throws Exception
    {
        // 4 ranks, 2 per node; chunks of 1 KiB make several per request, so the sum, the submission and the copy
        // back overlap as they do for a large tensor
        final List<BridgeTestClient> ranks = openTwoNodes("grouped", 1024);
        final io.switchml.appliance.control.Job job = appliance.registry().activeJobs().values().stream()
            .filter(candidate -> candidate.name().equals("grouped")).findFirst().orElseThrow();
        assertEquals(2, job.worldSize(), "the appliance sees one worker per node");

        final int count = 1000; // 4000 bytes: 4 chunks, the last one short
        for (int round = 0; round < 3; round++)
        {
            for (int rank = 0; rank < 4; rank++)
            {
                final FloatBuffer shm = ranks.get(rank).shm();
                for (int i = 0; i < count; i++)
                {
                    shm.put(i, (rank + 1) * (1 + (i + round) % 8));
                }
            }
            final boolean average = round == 2;
            for (final String reply : requestAll(ranks, rank -> "ALLREDUCE offset=0 count=" + count + " op=" +
                (average ? "average" : "sum")))
            {
                assertTrue(reply.startsWith("OK us="), reply);
            }
            for (int rank = 0; rank < 4; rank++)
            {
                for (int i = 0; i < count; i++)
                {
                    final float sum = 10 * (1 + (i + round) % 8);
                    assertEquals(average ? sum / 4 : sum, ranks.get(rank).shm().get(i), "rank " + rank + " element " + i);
                }
            }
        }
        // int32 goes through the node's int32 job, summed here as well (wrapping)
        for (int rank = 0; rank < 4; rank++)
        {
            for (int i = 0; i < 600; i++)
            {
                ranks.get(rank).shm().put(i, Float.intBitsToFloat(i == 0 ? Integer.MAX_VALUE : rank * 1000 + i));
            }
        }
        for (final String reply : requestAll(ranks, rank -> "ALLREDUCE offset=0 count=600 dtype=int32"))
        {
            assertTrue(reply.startsWith("OK us="), reply);
        }
        for (int rank = 0; rank < 4; rank++)
        {
            assertEquals(4 * Integer.MAX_VALUE, Float.floatToRawIntBits(ranks.get(rank).shm().get(0)),
                "a wrapping int32 sum");
            for (int i = 1; i < 600; i++)
            {
                assertEquals(6000 + 4 * i, Float.floatToRawIntBits(ranks.get(rank).shm().get(i)), "element " + i);
            }
        }
        final Map<String, String> stats = ControlProtocol.parse(ranks.get(1).request("STATS"));
        assertEquals("4", stats.get("requests"), "this rank's requests");
        assertEquals("12", stats.get("allReduces"), "the node's job: 3 float requests of 4 chunks each");
        assertEquals(stats.get("packetsSent"), ControlProtocol.parse(ranks.get(0).request("STATS")).get("packetsSent"),
            "the node's ranks share one worker");
        for (final BridgeTestClient rank : ranks)
        {
            assertEquals("OK", rank.request("CLOSE"));
        }
    }

    @Test
    void aLocalRankThatDoesNotAskIsNamedAfterTheProgressTimeoutInsteadOfAHang() throws Exception
    {
        // one node of 2 ranks, the job's only node: nothing reaches the appliance while a round waits, so only the
        // group can notice that rank 1 never asks
        final int controlPort = appliance.controlPort();
        final HostAgent strict = HostAgent.bind(() -> new WorkerContext().controlPort(controlPort).lanes(64).slots(8)
            .joinTimeoutMs(20_000).progressTimeoutMs(1_000), tempDir.resolve("strict.sock"), tempDir, 8, 1 << 20, 16);
        try
        {
            executor.submit(strict::serve);
            final List<Future<String>> replies = new ArrayList<>();
            final List<BridgeTestClient> ranks = openNode(strict, "stalled", 2, 0, 2, "", replies);
            requireOpened(ranks, replies);
            final long startNs = System.nanoTime();
            final String reply = ranks.get(0).request("ALLREDUCE offset=0 count=10");
            final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;
            assertTrue(reply.startsWith("ERR") && reply.contains("ranks [1] of job stalled on this host did not ask for " +
                "their next all-reduce within 1000 ms of rank 0"), reply);
            assertTrue(elapsedMs >= 900 && elapsedMs < 5_000, "failed after " + elapsedMs + " ms");
            final String late = ranks.get(1).request("ALLREDUCE offset=0 count=10");
            assertTrue(late.startsWith("ERR") && late.contains("did not ask"), "the late rank is told too: " + late);
        }
        finally
        {
            strict.close();
        }
    }

    @Test
    void aNodeWhoseRanksDisagreeFailsTheJobNamingThem() throws Exception
    {
        final List<BridgeTestClient> ranks = openTwoNodes("split", LocalRounds.CHUNK_BYTES);
        final List<String> answers = requestAll(ranks, rank -> "ALLREDUCE offset=0 count=" + (rank == 1 ? 20 : 10));
        assertTrue(answers.get(0).contains("different all-reduces") && answers.get(0).contains("rank 1: 20 float32"),
            answers.get(0));
        assertTrue(answers.get(1).contains("different all-reduces"), answers.get(1));
        // the other node's ranks are told, not left waiting for chunks that will not come
        assertTrue(answers.get(2).startsWith("ERR") && answers.get(2).contains("different all-reduces"), answers.get(2));
    }

    @Test
    void aLostRankAbortsTheJobOnEveryNodeAndPipelinedRequestsOverlap() throws Exception
    {
        final List<BridgeTestClient> ranks = openTwoNodes("piped", 256);
        // three requests on disjoint ranges, sent without waiting (protocol v2): the group's rounds overlap
        for (int rank = 0; rank < 4; rank++)
        {
            for (int i = 0; i < 300; i++)
            {
                ranks.get(rank).shm().put(i, (rank + 1) * (i + 1));
            }
        }
        for (final BridgeTestClient rank : ranks)
        {
            for (int request = 0; request < 3; request++)
            {
                rank.send("ALLREDUCE offset=" + request * 400 + " count=100 id=" + request);
            }
        }
        for (final BridgeTestClient rank : ranks)
        {
            for (int request = 0; request < 3; request++)
            {
                final String reply = rank.readLine();
                assertTrue(reply.startsWith("OK us=") && reply.endsWith(" id=" + request), reply);
            }
            for (int i = 0; i < 300; i++)
            {
                assertEquals(10 * (i + 1), rank.shm().get(i), "element " + i);
            }
        }
        // rank 1's process dies: rank 0 beside it and ranks 2 and 3 on the other node are told, naming it
        ranks.get(1).close();
        final String beside = ranks.get(0).request("ALLREDUCE offset=0 count=64 op=sum");
        assertTrue(beside.startsWith("ERR") && beside.contains("rank 1's training process disconnected"), beside);
        for (final String reply : requestAll(ranks.subList(2, 4), rank -> "ALLREDUCE offset=0 count=64 op=sum"))
        {
            assertTrue(reply.startsWith("ERR") && reply.contains("rank 1's training process disconnected"), reply);
        }
    }

    @Test
    void aNodesRanksMustAllOpenAndFitTheirPlaces() throws Exception
    {
        final BridgeTestClient only = connect();
        final String reply = only.request("OPEN job=half rank=0 world=2 token=" + TOKEN +
            " localRank=0 localWorld=2 joinTimeoutMs=1500");
        assertTrue(reply.startsWith("ERR") && reply.contains("rank(s) 1 of job half opened no session"), reply);
        assertRefused("OPEN job=x rank=1 world=4 token=" + TOKEN + " localRank=0 localWorld=2", "localRank 0 does not fit rank 1");
        assertRefused("OPEN job=x rank=1 world=3 token=" + TOKEN + " localRank=1 localWorld=2", "divide the world size 3");
        assertRefused("OPEN job=x rank=1 world=4 token=" + TOKEN + " localRank=1", "localRank and localWorld together");
        assertRefused("OPEN job=x rank=1 world=64 token=" + TOKEN + " localRank=1 localWorld=16", "localWorld must be 1..8");

        // while a group forms: its taken place and a disagreeing rank are refused; a rank with another token (one that
        // does not know the job's) forms a group of its own and takes no place in the job's
        final BridgeTestClient first = connect();
        final Future<String> firstReply = executor.submit(() -> first.request("OPEN job=taken rank=0 world=2 token=" +
            TOKEN + " localRank=0 localWorld=2"));
        for (int i = 0; i < 500 && agent.groupsForming() == 0; i++)
        {
            Thread.sleep(10);
        }
        assertEquals(1, agent.groupsForming());
        assertRefused("OPEN job=taken rank=0 world=2 token=" + TOKEN + " localRank=0 localWorld=2",
            "local rank 0 (rank 0) of job taken has a session on this host agent already");
        assertRefused("OPEN job=taken rank=1 world=2 token=" + TOKEN + " localRank=1 localWorld=2 k=32",
            "the ranks already on this host agent for");
        final BridgeTestClient squatter = connect();
        final Future<String> squatterReply = executor.submit(() -> squatter.request("OPEN job=taken rank=0 world=2 " +
            "token=not-the-token localRank=0 localWorld=2 joinTimeoutMs=1000"));
        final BridgeTestClient second = connect();
        final Future<String> secondReply = executor.submit(() -> second.request("OPEN job=taken rank=1 world=2 token=" +
            TOKEN + " localRank=1 localWorld=2"));
        assertTrue(firstReply.get(30, TimeUnit.SECONDS).startsWith("OK "), "the job's group formed");
        assertTrue(secondReply.get(30, TimeUnit.SECONDS).startsWith("OK "));
        assertTrue(squatterReply.get(30, TimeUnit.SECONDS).contains("rank(s) 1 of job taken opened no session"));
        first.mapShm();
        second.mapShm();
        allReduceAndCheck(List.of(first, second), 50);

        // an int32 request where the job serves none is refused for that request alone, as for a rank of its own
        final List<Future<String>> replies = new ArrayList<>();
        final List<BridgeTestClient> floats = openNode(agent, "floats", 2, 0, 2, " int32=off", replies);
        requireOpened(floats, replies);
        assertTrue(floats.getFirst().request("ALLREDUCE offset=0 count=4 dtype=int32").contains("serves no int32 job"));
        allReduceAndCheck(floats, 10);

        // the agent stopping while a group forms: the waiting rank is let go, and no shared memory is left
        final BridgeTestClient waiting = connect();
        final Future<String> waitingReply = executor.submit(() -> waiting.request("OPEN job=late rank=0 world=2 token=" +
            TOKEN + " localRank=0 localWorld=2"));
        for (int i = 0; i < 500 && agent.groupsForming() == 0; i++)
        {
            Thread.sleep(10);
        }
        agent.close();
        // well inside the group's 20 s join timeout: the close lets it go, not the timeout
        final String late = waitingReply.get(10, TimeUnit.SECONDS);
        assertTrue(late == null || late.startsWith("ERR"), String.valueOf(late));
        awaitNoSharedMemory();
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
