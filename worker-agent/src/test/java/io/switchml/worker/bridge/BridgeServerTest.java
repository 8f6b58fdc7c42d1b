package io.switchml.worker.bridge;

import io.switchml.worker.ChildProcess;
import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.FloatBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.switchml.protocol.ControlProtocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The bridge ({@code switchml worker serve}) with an embedded appliance, driven over its Unix socket
 * and shared memory by a Java test client; one test runs a rank as a child JVM to kill it.
 */
@Timeout(120)
class BridgeServerTest
{
    private static final String TOKEN = "bridge-test-token";
    private static final int LANES = 64;

    @TempDir
    Path tempDir;

    private Appliance appliance;
    private final ExecutorService executor = Executors.newCachedThreadPool();
    private final List<BridgeServer> servers = new ArrayList<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();

    @BeforeEach
    void startAppliance() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.resolve("appliance").toString()).joinTimeoutMs(30_000));
    }

    @AfterEach
    void stop() throws Exception
    {
        for (final AutoCloseable closeable : closeables)
        {
            closeable.close();
        }
        servers.forEach(BridgeServer::close);
        executor.shutdownNow();
        appliance.close();
    }

    private BridgeContext context(final String job, final int world, final int rank)
    {
        return context(job, world, rank, io.switchml.protocol.ElementType.FLOAT32);
    }

    private BridgeContext context(final String job, final int world, final int rank, final byte wireType)
    {
        return new BridgeContext()
            .worker(new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token(TOKEN)
                .worldSize(world).rank(rank).lanes(LANES).slots(8).elementType(wireType))
            .int32Worker(new WorkerContext().controlPort(appliance.controlPort()).jobName(job + "-int32").token(TOKEN)
                .worldSize(world).rank(rank).lanes(LANES).slots(8).elementType(io.switchml.protocol.ElementType.INT32))
            .socketPath(tempDir.resolve(job + "-" + rank + ".sock"))
            .shmPath(tempDir.resolve(job + "-" + rank + ".shm"))
            .shmBytes(64 * 1024);
    }

    /** Launch every rank's bridge (each launch waits for all joins) and serve each on its own thread. */
    private List<BridgeServer> serveAll(final String job, final int world) throws Exception
    {
        return serveAll(job, world, io.switchml.protocol.ElementType.FLOAT32);
    }

    private List<BridgeServer> serveAll(final String job, final int world, final byte wireType) throws Exception
    {
        final List<Future<BridgeServer>> launches = new ArrayList<>();
        for (int rank = 0; rank < world; rank++)
        {
            final BridgeContext context = context(job, world, rank, wireType);
            launches.add(executor.submit(() -> BridgeServer.launch(context)));
        }
        final List<BridgeServer> launched = new ArrayList<>();
        for (final Future<BridgeServer> launch : launches)
        {
            final BridgeServer server = launch.get(30, TimeUnit.SECONDS);
            servers.add(server);
            launched.add(server);
            executor.submit(server::serve);
        }
        return launched;
    }

    private BridgeTestClient connect(final BridgeServer server) throws IOException
    {
        final BridgeTestClient client = new BridgeTestClient(server.context().socketPath());
        closeables.add(client);
        return client;
    }

    @Test
    void infoDescribesTheBridge() throws Exception
    {
        final BridgeServer server = serveAll("info", 1).getFirst();
        final BridgeTestClient client = connect(server);
        final Map<String, String> info = client.mapShm();
        assertEquals("OK", info.get(""));
        assertEquals("2", info.get("version"));
        assertEquals(server.context().shmPath().toString(), info.get("shm"));
        assertEquals("65536", info.get("shmBytes"));
        assertEquals("0", info.get("rank"));
        assertEquals("1", info.get("world"));
        assertEquals(Integer.toString(LANES), info.get("k"));
        assertEquals("float32", info.get("dtype"));
        assertEquals(java.nio.ByteOrder.nativeOrder().toString(), info.get("byteOrder"));
        assertEquals("OK", client.request("CLOSE"));
        assertNull(client.readLine(), "the bridge closes the connection after CLOSE");
    }

    @Test
    void sumsAndAveragesRangesOfSharedMemoryAcrossRanks() throws Exception
    {
        final List<BridgeServer> bridges = serveAll("sum", 2);
        final int offsetElements = 32;
        final int count = 1_000;
        final List<BridgeTestClient> clients = new ArrayList<>();
        for (final BridgeServer bridge : bridges)
        {
            final BridgeTestClient client = connect(bridge);
            client.mapShm();
            clients.add(client);
        }
        for (final String op : new String[]{"sum", "average"})
        {
            for (int rank = 0; rank < 2; rank++)
            {
                final FloatBuffer shm = clients.get(rank).shm();
                shm.put(offsetElements - 1, -7.0f);
                shm.put(offsetElements + count, -9.0f);
                for (int i = 0; i < count; i++)
                {
                    shm.put(offsetElements + i, i + 0.5f * rank);
                }
            }
            final List<Future<String>> replies = new ArrayList<>();
            for (final BridgeTestClient client : clients)
            {
                replies.add(executor.submit(() ->
                    client.request("ALLREDUCE offset=" + offsetElements * Float.BYTES + " count=" + count + " op=" + op)));
            }
            for (final Future<String> reply : replies)
            {
                assertTrue(reply.get(30, TimeUnit.SECONDS).startsWith("OK us="), reply.get());
            }
            final double divisor = op.equals("sum") ? 1 : 2;
            for (final BridgeTestClient client : clients)
            {
                final FloatBuffer shm = client.shm();
                assertEquals(-7.0f, shm.get(offsetElements - 1), "element before the range untouched");
                assertEquals(-9.0f, shm.get(offsetElements + count), "element after the range untouched");
                for (int i = 0; i < count; i++)
                {
                    final double expected = (2.0 * i + 0.5) / divisor;
                    // chunk of 64 below 2^10: n^2 * 2^10 / (2^31 - 1) plus a float32 half ulp
                    final double bound = 4.0 * 1024 / Integer.MAX_VALUE + Math.ulp((float)expected);
                    assertEquals(expected, shm.get(offsetElements + i), bound, op + " element " + i);
                }
            }
        }
    }

    @Test
    void pipelinedRequestsAreAnsweredInOrderWithInt32AndStats() throws Exception
    {
        final List<BridgeServer> bridges = serveAll("pipe", 2);
        final int requests = 12;
        final int count = 700;
        final List<BridgeTestClient> clients = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final BridgeTestClient client = connect(bridges.get(rank));
            assertEquals("float32,int32", client.mapShm().get("dtypes"));
            final FloatBuffer shm = client.shm();
            for (int r = 0; r < requests; r++)
            {
                for (int i = 0; i < count; i++)
                {
                    shm.put(r * count + i, r * 1000 + i + 0.25f * rank);
                }
            }
            final int intBase = requests * count;
            for (int i = 0; i < count; i++)
            {
                // int32 values written through the float view bit for bit (none of them is a NaN pattern)
                shm.put(intBase + i, Float.intBitsToFloat(2_000_000_000 + i * (rank + 1)));
            }
            clients.add(client);
        }
        // every rank sends all its requests before reading any reply
        for (final BridgeTestClient client : clients)
        {
            for (int r = 0; r < requests; r++)
            {
                client.send("ALLREDUCE offset=" + (long)r * count * Float.BYTES + " count=" + count + " op=sum id=" + r);
            }
            client.send("ALLREDUCE offset=" + (long)requests * count * Float.BYTES + " count=" + count + " op=sum dtype=int32 id=int");
            client.send("STATS");
        }
        for (final BridgeTestClient client : clients)
        {
            for (int r = 0; r < requests; r++)
            {
                final String reply = client.readLine();
                assertTrue(reply.startsWith("OK us=") && reply.endsWith(" id=" + r), "reply " + r + " in order: " + reply);
            }
            final String intReply = client.readLine();
            assertTrue(intReply.startsWith("OK us=") && intReply.endsWith(" id=int"), intReply);
            final Map<String, String> stats = io.switchml.protocol.ControlProtocol.parse(client.readLine());
            assertEquals("OK", stats.get(""));
            assertEquals(Integer.toString(requests + 1), stats.get("requests"));
            assertTrue(Long.parseLong(stats.get("packetsSent")) >= requests, stats.toString());
            for (final String counter : new String[] {"spuriousRetransmissions", "probes", "spuriousProbes", "nacks", "pendings",
                "staleResults", "pausesNs", "int32.probes"})
            {
                final String value = stats.get(counter);
                assertNotNull(value, counter + " missing from " + stats);
                assertTrue(Long.parseLong(value) >= 0, counter + " in " + stats);
            }
            assertEquals(Integer.toString(1), stats.get("int32.allReduces"), stats.toString());
            // an appliance of software alone passes nothing over; the fields after the float job's still parse
            assertEquals("software", stats.get("backend"), stats.toString());
            assertEquals("", stats.get("passedOver"), stats.toString());
            assertEquals("", stats.get("int32.passedOver"), stats.toString());
            final FloatBuffer shm = client.shm();
            for (int r = 0; r < requests; r++)
            {
                for (int i = 0; i < count; i += 37)
                {
                    final double expected = 2.0 * (r * 1000 + i) + 0.25;
                    assertEquals(expected, shm.get(r * count + i), 4.0 * 16384 / Integer.MAX_VALUE + Math.ulp((float)expected),
                        "request " + r + " element " + i);
                }
            }
            for (int i = 0; i < count; i++)
            {
                // exact int32 sums that wrap like Java ints
                assertEquals(2_000_000_000 + i + 2_000_000_000 + 2 * i, Float.floatToRawIntBits(shm.get(requests * count + i)),
                    "int32 element " + i);
            }
        }
    }

    @Test
    void badRequestsGetErrorsAndTheSessionGoesOn() throws Exception
    {
        final BridgeServer server = serveAll("bad", 1).getFirst();
        final BridgeTestClient client = connect(server);
        client.mapShm();
        assertError(client.request("FROB"), "unknown request 'FROB'");
        assertError(client.request("ALLREDUCE offset=2 count=1"), "multiple of 4");
        assertError(client.request("ALLREDUCE offset=0 count=16385"), "exceeds the shared memory of 65536 bytes");
        assertError(client.request("ALLREDUCE offset=65532 count=2"), "exceeds the shared memory");
        assertError(client.request("ALLREDUCE offset=0 count=-1"), "must not be negative");
        assertError(client.request("ALLREDUCE offset=0 count=" + (1L << 62)), "exceeds the shared memory of 65536 bytes");
        assertError(client.request("ALLREDUCE offset=0"), "needs count=");
        assertError(client.request("ALLREDUCE offset=0 count=x"), "count is not an integer");
        assertError(client.request("ALLREDUCE offset=0 count=4 op=max"), "op must be sum or average");
        // a NaN is carried, as Gloo carries it: its chunk (here the whole tensor) comes back NaN
        client.shm().put(3, Float.NaN);
        assertTrue(client.request("ALLREDUCE offset=0 count=4 op=sum").startsWith("OK"));
        assertTrue(Float.isNaN(client.shm().get(0)) && Float.isNaN(client.shm().get(3)), "NaN came back");
        client.shm().put(0, 0f).put(1, 0f).put(2, 0f).put(3, 1.5f);
        assertTrue(client.request("ALLREDUCE offset=0 count=4 op=sum").startsWith("OK"));
        assertEquals(1.5f, client.shm().get(3), 1e-6f);
        assertTrue(client.request("ALLREDUCE offset=0 count=0 op=average").startsWith("OK"));
    }

    /**
     * In a job of several ranks a refused all-reduce (here a value out of the float16 wire format's range among the
     * elements checked before anything is sent)
     * would leave this rank one call behind the others: the job is aborted naming the rank and why, and the other
     * rank's call fails with that reason instead of waiting for the slot timeout or summing the wrong tensors.
     */
    @Test
    void anAllReduceRefusedOnOneRankOfSeveralAbortsTheJobNamingIt() throws Exception
    {
        final List<BridgeServer> pair = serveAll("refused", 2, io.switchml.protocol.ElementType.FLOAT16);
        final BridgeTestClient rank0 = connect(pair.get(0));
        final BridgeTestClient rank1 = connect(pair.get(1));
        rank0.mapShm();
        rank1.mapShm();
        rank1.send("ALLREDUCE offset=0 count=4 op=sum");
        rank0.shm().put(2, 70_000f);

        final String refused = rank0.request("ALLREDUCE offset=0 count=4 op=sum");
        assertError(refused, "rank 0's all-reduce was refused: ");
        assertError(refused, "element at offset 2 (70000.0) is outside the float16 range");
        assertError(refused, "; the job is aborted");
        final String other = rank1.readLine();
        assertError(other, "rank 0's all-reduce was refused: ");
    }

    private static void assertError(final String reply, final String fragment)
    {
        final Map<String, String> fields = ControlProtocol.parse(reply);
        assertEquals("ERR", fields.get(""), reply);
        assertTrue(fields.get("message").contains(fragment), reply);
    }

    @Test
    void aSecondClientIsToldTheBridgeIsBusy() throws Exception
    {
        final BridgeServer server = serveAll("busy", 1).getFirst();
        final BridgeTestClient first = connect(server);
        first.mapShm();
        final BridgeTestClient second = connect(server);
        assertError(second.readLine(), "busy");
        assertNull(second.readLine());
        assertEquals("OK", first.request("CLOSE"));
        assertNull(first.readLine());

        // the next session is served once the first ended (the bridge frees the session after replying)
        final long deadline = System.currentTimeMillis() + 10_000;
        String reply;
        do
        {
            final BridgeTestClient third = connect(server);
            try
            {
                reply = third.request("INFO");
            }
            catch (final IOException turnedAway)
            {
                // told "busy" and closed before the request was written (a broken pipe): still the first session's
                reply = "ERR message=" + turnedAway.getMessage();
            }
        }
        while (!reply.startsWith("OK") && System.currentTimeMillis() < deadline);
        assertTrue(reply.startsWith("OK version=2"), reply);
    }

    @Test
    void closeDeletesTheSocketAndTheSharedMemory() throws Exception
    {
        final BridgeServer server = serveAll("close", 1).getFirst();
        final Path socket = server.context().socketPath();
        final Path shm = server.context().shmPath();
        assertTrue(Files.exists(socket));
        assertTrue(Files.exists(shm));
        assertEquals(65536, Files.size(shm));
        assertEquals("rw-------", java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(shm)));
        server.close();
        assertFalse(Files.exists(socket));
        assertFalse(Files.exists(shm));
    }

    @Test
    void aLiveSocketIsNotReplacedButAStaleOneIs() throws Exception
    {
        serveAll("live", 1);
        final IOException live = assertThrows(IOException.class, () -> BridgeServer.launch(context("live", 1, 0)));
        assertTrue(live.getMessage().contains("another bridge already serves"), live.getMessage());

        final BridgeContext staleContext = context("stale", 1, 0);
        try (ServerSocketChannel dead = ServerSocketChannel.open(StandardProtocolFamily.UNIX))
        {
            dead.bind(UnixDomainSocketAddress.of(staleContext.socketPath()));
        }
        assertTrue(Files.exists(staleContext.socketPath()), "a closed Unix socket leaves its file behind");
        Files.write(staleContext.shmPath(), new byte[10]);
        final BridgeServer server = BridgeServer.launch(staleContext);
        servers.add(server);
        assertEquals(65536, Files.size(staleContext.shmPath()));

        final BridgeContext fileContext = context("file", 1, 0);
        Files.writeString(fileContext.socketPath(), "not a socket");
        final IOException file = assertThrows(IOException.class, () -> BridgeServer.launch(fileContext));
        assertTrue(file.getMessage().contains("is not a socket"), file.getMessage());
    }

    @Test
    void onceStopsServingAfterTheFirstSession() throws Exception
    {
        final BridgeServer server = BridgeServer.launch(context("once", 1, 0).once(true));
        servers.add(server);
        final Future<?> serving = executor.submit(server::serve);
        final BridgeTestClient client = connect(server);
        assertTrue(client.request("INFO").startsWith("OK"));
        assertEquals("OK", client.request("CLOSE"));
        serving.get(10, TimeUnit.SECONDS);
        assertFalse(Files.exists(server.context().socketPath()), "the socket goes when serving stops");
    }

    @Test
    void aClientThatStopsReadingRepliesAndGoesAwayEndsItsSessionAndAbortsTheJob() throws Exception
    {
        final Future<BridgeServer> flooded = executor.submit(() -> BridgeServer.launch(context("flood", 2, 0).once(true)));
        final BridgeServer peer = BridgeServer.launch(context("flood", 2, 1));
        servers.add(peer);
        final BridgeServer server = flooded.get(30, TimeUnit.SECONDS);
        servers.add(server);
        final Future<?> serving = executor.submit(server::serve);
        executor.submit(peer::serve);
        final BridgeTestClient peerClient = connect(peer);
        peerClient.mapShm();

        // far more requests than the pipeline holds, and replies enough to fill the socket, none of them read: the
        // agent's writer blocks on the socket and its reader on the full queue of replies
        try (SocketChannel flood = SocketChannel.open(java.net.UnixDomainSocketAddress.of(server.context().socketPath())))
        {
            final java.nio.ByteBuffer requests = java.nio.ByteBuffer.wrap("INFO\n".repeat(20_000).getBytes(StandardCharsets.US_ASCII));
            while (requests.hasRemaining())
            {
                flood.write(requests);
            }
            Thread.sleep(200);
        }

        serving.get(20, TimeUnit.SECONDS);
        assertFalse(Files.exists(server.context().socketPath()), "the session ended and the agent stopped serving");
        final String reply = peerClient.request("ALLREDUCE offset=0 count=10 op=sum");
        assertError(reply, "rank 0's training process disconnected from its agent");
    }

    /**
     * Other sessions fill the tmpfs after this bridge's sparse shared memory was created, and a client asks for a range
     * it never wrote (so never reserved): the bridge reserves it before its shard reads it, and answers ERR naming the
     * file and the bytes, instead of a SIGBUS in the shard thread (an InternalError there) that left the request
     * unanswered. The range it could back is all-reduced as before. Needs root to mount the tmpfs.
     */
    @Test
    @Timeout(30)
    void aRangeTheFullTmpfsCannotBackIsRefusedNamingTheFileNotASigbus() throws Exception
    {
        final long mib = 1L << 20;
        try (SmallTmpfs tmpfs = new SmallTmpfs(tempDir.resolve("small-shm"), 8 * mib))
        {
            final BridgeContext context = context("full", 1, 0).shmPath(tmpfs.dir().resolve("full-0.shm")).shmBytes(6 * mib);
            final BridgeServer server = BridgeServer.launch(context);
            executor.submit(server::serve);
            try (server; BridgeTestClient client = new BridgeTestClient(context.socketPath()))
            {
                client.mapShm();
                tmpfs.fill("other-session.shm", 6 * mib);
                assertTrue(client.request("ALLREDUCE offset=0 count=1024 op=sum").startsWith("OK us="));
                final String refused = client.request("ALLREDUCE offset=" + 2 * mib + " count=" + 3 * mib / 4 + " op=sum");
                assertError(refused, "cannot reserve " + 4 * mib + " bytes at offset " + 2 * mib +
                    " of the shared memory " + context.shmPath());
                assertTrue(refused.contains("bytes free in " + tmpfs.dir()) && refused.contains("--shm-bytes"), refused);
                assertTrue(client.request("ALLREDUCE offset=4096 count=1024 op=sum").startsWith("OK us="),
                    "the session goes on");
                assertEquals("OK", client.request("CLOSE"));
            }
        }
    }

    @Test
    void aMissingShmDirectoryIsNamed()
    {
        final IOException missing = assertThrows(IOException.class, () -> BridgeServer.launch(
            context("noshm", 1, 0).shmPath(tempDir.resolve("no-such-dir").resolve("x.shm"))));
        assertTrue(missing.getMessage().contains("--shm") && missing.getMessage().contains("does not exist"), missing.getMessage());
        assertFalse(Files.exists(tempDir.resolve("noshm-0.sock")), "the socket is removed when the shared memory fails");
    }

    @Test
    void defaultPathsNameTenantJobAndRank()
    {
        final BridgeContext context = new BridgeContext()
            .worker(new WorkerContext().jobName("resnet").tenant("acme").token(TOKEN).worldSize(4).rank(2)).conclude();
        assertEquals("switchml-acme-resnet-rank2.sock", context.socketPath().getFileName().toString());
        assertEquals("switchml-acme-resnet-rank2.shm", context.shmPath().getFileName().toString());
        assertEquals(BridgeContext.SHM_BYTES_DEFAULT, context.shmBytes());
        final IllegalArgumentException odd = assertThrows(IllegalArgumentException.class, () -> new BridgeContext()
            .worker(new WorkerContext().jobName("j").token(TOKEN).worldSize(1).rank(0)).shmBytes(10).conclude());
        assertTrue(odd.getMessage().contains("--shm-bytes"), odd.getMessage());
        final IllegalArgumentException longPath = assertThrows(IllegalArgumentException.class, () -> new BridgeContext()
            .worker(new WorkerContext().jobName("j").token(TOKEN).worldSize(1).rank(0))
            .socketPath(Path.of("/tmp/" + "x".repeat(120))).conclude());
        assertTrue(longPath.getMessage().contains("--socket"), longPath.getMessage());
    }

    @Test
    void badCommandLineExitsWithTwo()
    {
        final CommandLine command = new CommandLine(new WorkerServeCommand());
        assertEquals(2, command.execute("--world", "2", "--rank", "0", "--token", TOKEN, "--mac", "maybe"));
        assertEquals(2, command.execute("--world", "2", "--rank", "5", "--token", TOKEN));
        assertEquals(2, new CommandLine(new WorkerServeCommand()).execute("--world", "1", "--rank", "0", "--token", TOKEN,
            "--shm-bytes", "7"));
    }

    /**
     * worker serve says ready without waiting for the data path's warm-up, which its first call stops (the agent logs
     * that wait at debug level); the Java API's joins keep the wait (WorkerContext's default).
     */
    @Test
    void serveIsReadyBeforeItsWarmUpEndsAndItsFirstCallStopsIt() throws Exception
    {
        assertFalse(new WorkerContext().warmUpUntilFirstCall());
        final ChildProcess bridge = startChildBridge("early", 1, 0, "--log-level", "debug");
        bridge.awaitLine(line -> line.startsWith("switchml worker serve ready: socket="), 60_000);
        try (BridgeTestClient client = new BridgeTestClient(context("early", 1, 0).socketPath()))
        {
            assertTrue(client.request("ALLREDUCE offset=0 count=10 op=sum").startsWith("OK"));
        }
        // how long that wait was is the machine's business (200 ms at most, then the call goes on beside it)
        bridge.awaitLine(line -> line.contains("data path warm-up: the first call waited"), 30_000);
        bridge.terminate();
        bridge.awaitExit(15_000);
    }

    private ChildProcess startChildBridge(final String job, final int world, final int rank, final String... extra)
        throws IOException
    {
        final BridgeContext context = context(job, world, rank);
        final List<String> args = new ArrayList<>(List.of(
            "--control-port", Integer.toString(appliance.controlPort()), "--job", job, "--token", TOKEN,
            "--world", Integer.toString(world), "--rank", Integer.toString(rank), "-k", Integer.toString(LANES), "-s", "8",
            "--socket", context.socketPath().toString(), "--shm", context.shmPath().toString(), "--shm-bytes", "65536"));
        args.addAll(List.of(extra));
        final ChildProcess child = ChildProcess.startJvm("bridge-" + job + "-" + rank, WorkerServeCommand.class, args);
        closeables.add(child);
        return child;
    }

    /**
     * Rank 0 of a job of 2 in this JVM, beside rank 1's agent in a child: launched together (each launch waits for
     * both joins), served, and a client of rank 0 with its shared memory mapped.
     */
    private BridgeTestClient serveRankZeroBeside(final ChildProcess rankOne, final String job) throws Exception
    {
        final Future<BridgeServer> launch = executor.submit(() -> BridgeServer.launch(context(job, 2, 0)));
        rankOne.awaitLine(line -> line.startsWith("switchml worker serve ready: socket="), 60_000);
        final BridgeServer server = launch.get(30, TimeUnit.SECONDS);
        servers.add(server);
        executor.submit(server::serve);
        final BridgeTestClient client = connect(server);
        client.mapShm();
        return client;
    }

    @Test
    @Tag("process")
    void aRanksAgentWhoseTrainingProcessExitsBeforeConnectingAbortsTheJobNamingTheRankAndCleansUp() throws Exception
    {
        // the training process that started rank 1's agent and died before it connected (torchrun stopped it)
        final Process trainer = new ProcessBuilder("sleep", "60").start();
        try
        {
            final ChildProcess agent = startChildBridge("orphan", 2, 1, "--once", "--exit-with-pid", Long.toString(trainer.pid()));
            final BridgeTestClient client = serveRankZeroBeside(agent, "orphan");

            trainer.destroyForcibly().waitFor();
            assertEquals(0, agent.awaitExit(15_000), "the agent stops when its training process is gone: " + agent.output());
            assertTrue(agent.output().contains("rank 1's training process (pid " + trainer.pid() + ") exited (--exit-with-pid): stopping"),
                agent.output());
            assertFalse(Files.exists(context("orphan", 2, 1).socketPath()), "its socket is deleted");
            assertFalse(Files.exists(context("orphan", 2, 1).shmPath()), "its shared memory is deleted");
            assertError(client.request("ALLREDUCE offset=0 count=10 op=sum"), "rank 1's training process (pid " + trainer.pid() + ") exited");
        }
        finally
        {
            trainer.destroyForcibly();
        }
    }

    @Test
    @Tag("process")
    void aKilledRanksBridgeIsNamedInTheOthersError() throws Exception
    {
        final ChildProcess victim = startChildBridge("dead", 2, 1);
        final BridgeTestClient client = serveRankZeroBeside(victim, "dead");

        victim.kill();
        victim.awaitExit(10_000);
        final long killedNs = System.nanoTime();
        final String reply = client.request("ALLREDUCE offset=0 count=1000 op=sum");
        final long elapsedMs = (System.nanoTime() - killedNs) / 1_000_000;
        assertError(reply, "rank 1 ");
        assertTrue(reply.contains("lost its control connection"), reply);
        assertTrue(elapsedMs < 5_000, "failure took " + elapsedMs + " ms");
        assertError(client.request("ALLREDUCE offset=0 count=10 op=sum"), "rank 1 ");
    }

    @Test
    @Tag("process")
    void sigtermDeletesTheSocketAndTheSharedMemory() throws Exception
    {
        final ChildProcess bridge = startChildBridge("term", 1, 0);
        final String ready = bridge.awaitLine(line -> line.startsWith("switchml worker serve ready: socket="), 60_000);
        final BridgeContext context = context("term", 1, 0);
        assertTrue(ready.contains("socket=" + context.socketPath()) && ready.contains("shm=" + context.shmPath()), ready);
        assertTrue(Files.exists(context.socketPath()));
        assertTrue(Files.exists(context.shmPath()));
        bridge.terminate();
        bridge.awaitExit(15_000);
        assertFalse(Files.exists(context.socketPath()), bridge.output());
        assertFalse(Files.exists(context.shmPath()), bridge.output());
    }
}
