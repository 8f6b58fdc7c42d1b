package io.switchml.dist;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.ElementType;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import io.switchml.worker.bridge.BridgeContext;
import io.switchml.worker.bridge.BridgeServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a worker is told of its job's placement, against an appliance whose first backend is the Tofino pipeline
 * model (an offload that needs no root): the backend the job runs on, what was passed over and why, and a named
 * backend that cannot take the job refused with the appliance's reason; and a training process (the PyTorch backend's
 * client) reads the same from its agent's STATS. Real TCP and UDP on loopback, the agent's real Unix socket.
 */
final class WorkerPlacementTest
{
    @TempDir
    Path dir;

    private Appliance appliance;

    @BeforeEach
    void start() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("tofino-model,software").macEnabled(false));
    }

    @AfterEach
    void stop()
    {
        appliance.close();
    }

    private WorkerContext worker(final String job, final int lanes)
    {
        return new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token("token-" + job).worldSize(1).rank(0)
            .elementType(ElementType.INT32).lanes(lanes).slots(4).macEnabled(false).retransmitTimeoutMs(20);
    }

    @Test
    void theWorkerSaysWhereItsJobRunsAndWhatWasPassedOver() throws Exception
    {
        try (WorkerClient offloaded = WorkerClient.connect(worker("fits", 64)))
        {
            assertEquals("tofino-model", offloaded.placementDescription());
            final int[] tensor = {1, -2, 3, 1 << 20};
            final int[] sum = tensor.clone();
            offloaded.allReduce(sum, sum);
            assertArrayEquals(tensor, sum, "one rank's sum through the switch model is its own tensor");
            assertEquals(0, appliance.counter("slots_completed"), "no software shard aggregated it");
        }
        try (WorkerClient software = WorkerClient.connect(worker("wide", 1024)))
        {
            assertEquals("software (passed over: tofino-model: k=1024 exceeds 256)", software.placementDescription());
            assertEquals("software", software.backend());
            final int[] tensor = {5, 6};
            software.allReduce(tensor, tensor);
            assertTrue(appliance.counter("slots_completed") > 0, "the shards count what they aggregate");
        }
        final AllReduceException refused = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("named", 1024).backend("tofino-model")));
        assertTrue(refused.getMessage().contains("backend tofino-model cannot take job 'named': k=1024 exceeds 256"),
            refused.getMessage());
    }

    /**
     * What {@code switchml.stats()} reads: the agent's ({@code worker serve}'s) STATS reply carries the job's backend and
     * what passed it over, with the reasons' spaces form-encoded (the protocol ends a value at a space).
     */
    @Test
    void theAgentsStatsSayWhereTheJobRunsAndWhatPassedItOver() throws Exception
    {
        assertEquals(Map.of("backend", "software", "passedOver", "tofino-model: k=1024 exceeds 256"),
            placementInStats("wide", 1024));
        assertEquals(Map.of("backend", "tofino-model", "passedOver", ""), placementInStats("fits", 64));
    }

    /**
     * The same through the PyTorch package's own client ({@code switchml.Client}, Debian's python3 with torch, as
     * {@code ./switchml test} installs it): {@code stats()} decodes the reasons.
     */
    @Test
    void thePythonClientsStatsSayWhatPassedTheJobOver() throws Exception
    {
        final String output = withAgent("python", 1024, socket ->
        {
            final Path python = Path.of(System.getProperty("basedir", System.getProperty("user.dir")))
                .resolve("../worker-agent/python").normalize();
            final ProcessBuilder builder = new ProcessBuilder(System.getProperty("switchml.python", "/usr/bin/python3"), "-c",
                "import sys, switchml\n" +
                "with switchml.Client(sys.argv[1]) as client:\n" +
                "    stats = client.stats()\n" +
                "print('PLACEMENT backend=%s passedOver=%s' % (stats['backend'], stats['passedOver']), flush=True)\n",
                socket.toString()).redirectErrorStream(true);
            builder.environment().put("PYTHONPATH", python.toString());
            builder.environment().put("PYTHONDONTWRITEBYTECODE", "1");
            final Process process = builder.start();
            final String printed = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(process.waitFor(60, java.util.concurrent.TimeUnit.SECONDS), printed);
            assertEquals(0, process.exitValue(), "python3 with torch and the switchml package (" + python + "): " + printed);
            return printed;
        });
        assertTrue(output.lines().anyMatch(line ->
            line.equals("PLACEMENT backend=software passedOver=tofino-model: k=1024 exceeds 256")), output);
    }

    /** @return backend and passedOver (decoded) from the STATS reply of a one-rank agent of the job. */
    private Map<String, String> placementInStats(final String job, final int lanes) throws Exception
    {
        return withAgent(job, lanes, socket ->
        {
            try (SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX))
            {
                channel.connect(UnixDomainSocketAddress.of(socket));
                channel.write(ByteBuffer.wrap("STATS\n".getBytes(StandardCharsets.UTF_8)));
                final String line = new BufferedReader(new InputStreamReader(Channels.newInputStream(channel),
                    StandardCharsets.UTF_8)).readLine();
                final Map<String, String> stats = ControlProtocol.parse(line);
                assertEquals("OK", stats.get(""), line);
                assertTrue(line.contains(" passedOver=") && !stats.get("passedOver").contains(" "), line);
                return Map.of("backend", stats.get("backend"),
                    "passedOver", java.net.URLDecoder.decode(stats.get("passedOver"), StandardCharsets.UTF_8));
            }
        });
    }

    /** What a test does with a one-rank agent's socket. */
    @FunctionalInterface
    private interface AgentUse<T>
    {
        T apply(Path socket) throws Exception;
    }

    /** @return what {@code use} made of the socket of a one-rank {@code worker serve} bridge of the job, serving. */
    private <T> T withAgent(final String job, final int lanes, final AgentUse<T> use) throws Exception
    {
        final BridgeContext context = new BridgeContext().worker(worker(job, lanes).elementType(ElementType.FLOAT32))
            .socketPath(dir.resolve(job + ".sock")).shmPath(dir.resolve(job + ".shm")).shmBytes(64 * 1024);
        final ExecutorService executor = Executors.newSingleThreadExecutor();
        try (BridgeServer server = BridgeServer.launch(context))
        {
            executor.submit(() ->
            {
                server.serve();
                return null;
            });
            return use.apply(context.socketPath());
        }
        finally
        {
            executor.shutdownNow();
        }
    }
}
