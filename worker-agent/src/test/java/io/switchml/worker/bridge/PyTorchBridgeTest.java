package io.switchml.worker.bridge;

import io.switchml.worker.ChildProcess;
import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The PyTorch bridge end to end: an embedded appliance, four {@code switchml worker serve} agents as
 * child JVMs (ranks 0..3), and four Python training processes ({@code /usr/bin/python3} with torch
 * 1.13 and Gloo) that check the switchml all-reduce and DDP hook against Gloo's all-reduce, train the
 * same MLP with both, and time their steps (python/tests/ddp_bridge_check.py). Also runs the Python
 * package's unit tests.
 * <p>
 * Needs torch for /usr/bin/python3: {@code ./switchml test} installs it first with
 * {@code scripts/ensure-test-deps.sh}; without it this test fails (it does not skip).
 */
@Tag("python")
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class PyTorchBridgeTest
{
    /** The interpreter with torch; Debian's python3-torch installs for /usr/bin/python3 (a pyenv python3 on PATH lacks it). */
    private static final String PYTHON = System.getProperty("switchml.python", "/usr/bin/python3");
    private static final int WORLD = 4;
    private static final String TOKEN = "pytorch-bridge-token";

    @TempDir
    Path tempDir;

    private final List<ChildProcess> children = new ArrayList<>();
    private Appliance appliance;

    @BeforeAll
    static void requireTorch() throws Exception
    {
        final Process probe;
        try
        {
            probe = new ProcessBuilder(PYTHON, "-c", "import torch, torch.distributed as d; assert d.is_gloo_available()")
                .redirectErrorStream(true).start();
        }
        catch (final IOException ex)
        {
            fail(PYTHON + " cannot be run (" + ex.getMessage() + "); the PyTorch bridge test needs Python 3 with torch. " +
                "Run scripts/ensure-test-deps.sh as root (./switchml test does) or apt-get install -y python3-torch");
            return;
        }
        final String output = new String(probe.getInputStream().readAllBytes());
        if (!probe.waitFor(60, TimeUnit.SECONDS) || probe.exitValue() != 0)
        {
            fail(PYTHON + " cannot import torch with Gloo; the PyTorch bridge test needs it. Run scripts/ensure-test-deps.sh " +
                "as root (./switchml test does) or apt-get install -y python3-torch. Python said: " + output.strip());
        }
    }

    @AfterEach
    void stop()
    {
        children.forEach(ChildProcess::close);
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private static Path pythonDir()
    {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir")), "python").toAbsolutePath();
    }

    private ChildProcess python(final String name, final List<String> args) throws IOException
    {
        final List<String> command = new ArrayList<>();
        command.add(PYTHON);
        command.addAll(args);
        final Map<String, String> environment = new HashMap<>();
        environment.put("PYTHONPATH", pythonDir().toString());
        environment.put("PYTHONUNBUFFERED", "1");
        environment.put("PYTHONDONTWRITEBYTECODE", "1");
        environment.put("OMP_NUM_THREADS", "1");
        environment.put("GLOO_SOCKET_IFNAME", "lo");
        final ChildProcess child = ChildProcess.start(name, command, pythonDir(), environment);
        children.add(child);
        return child;
    }

    @Test
    void pythonUnitTestsPass() throws Exception
    {
        final ChildProcess tests = python("python-unittest", List.of("-m", "unittest", "discover", "-s", "tests", "-v"));
        final int exit = tests.awaitExit(120_000);
        System.out.println(tests.output());
        assertEquals(0, exit, "python unit tests failed:\n" + tests.output());
    }

    @Test
    void switchmlMatchesGlooAndTrainsTheSameModel() throws Exception
    {
        final long startNs = System.nanoTime();
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.resolve("appliance").toString()).joinTimeoutMs(60_000));

        final List<ChildProcess> agents = new ArrayList<>();
        final List<Path> sockets = new ArrayList<>();
        final List<Path> shms = new ArrayList<>();
        for (int rank = 0; rank < WORLD; rank++)
        {
            final Path socket = tempDir.resolve("agent" + rank + ".sock");
            final Path shm = tempDir.resolve("agent" + rank + ".shm");
            sockets.add(socket);
            shms.add(shm);
            final ChildProcess agent = ChildProcess.startJvm("agent-" + rank, WorkerServeCommand.class, List.of(
                "--control-port", Integer.toString(appliance.controlPort()), "--job", "pytorch-bridge", "--token", TOKEN,
                "--world", Integer.toString(WORLD), "--rank", Integer.toString(rank),
                "--socket", socket.toString(), "--shm", shm.toString(), "--shm-bytes", Integer.toString(1 << 20),
                "--slot-timeout-ms", "30000", "--progress-timeout-ms", "30000"));
            children.add(agent);
            agents.add(agent);
        }
        for (final ChildProcess agent : agents)
        {
            agent.awaitLine(line -> line.startsWith("switchml worker serve ready: socket="), 60_000);
        }
        final long agentsReadyNs = System.nanoTime();

        final String init = tempDir.resolve("gloo-init").toUri().toString();
        final List<ChildProcess> ranks = new ArrayList<>();
        for (int rank = 0; rank < WORLD; rank++)
        {
            ranks.add(python("python-rank-" + rank, List.of("tests/ddp_bridge_check.py", "--rank", Integer.toString(rank),
                "--world", Integer.toString(WORLD), "--socket", sockets.get(rank).toString(), "--init", init)));
        }
        final List<Integer> exits = new ArrayList<>();
        for (final ChildProcess rank : ranks)
        {
            exits.add(rank.awaitExit(200_000));
        }
        final long pythonDoneNs = System.nanoTime();
        final String rank0 = ranks.getFirst().output();
        System.out.println(rank0);
        for (int rank = 0; rank < WORLD; rank++)
        {
            assertEquals(0, exits.get(rank), "python rank " + rank + " failed:\n" + ranks.get(rank).output() +
                "\nits agent:\n" + agents.get(rank).output());
        }

        final Map<String, String> result = fields(rank0, "BRIDGE RESULT ");
        final Map<String, String> check = fields(rank0, "BRIDGE CHECK allreduce ");
        assertEquals("true", check.get("ok"), rank0);
        assertTrue(Double.parseDouble(check.get("worst_error_over_tolerance")) <= 1.0, rank0);
        assertEquals("true", result.get("allreduce_ok"), rank0);
        assertEquals("true", result.get("params_in_sync"), rank0);
        final double glooAccuracy = Double.parseDouble(result.get("gloo_acc"));
        final double switchmlAccuracy = Double.parseDouble(result.get("switchml_acc"));
        assertTrue(Math.abs(glooAccuracy - switchmlAccuracy) <= 0.5,
            "test accuracy gloo " + glooAccuracy + " vs switchml " + switchmlAccuracy + " differs by more than 0.5 points");
        assertTrue(switchmlAccuracy > 80.0, "the model did not learn: " + switchmlAccuracy);
        for (final String key : new String[]{"gloo_step_ms", "switchml_step_ms"})
        {
            assertTrue(Double.parseDouble(result.get(key)) > 0, key + " missing: " + rank0);
        }

        for (final ChildProcess agent : agents)
        {
            agent.terminate();
        }
        for (int rank = 0; rank < WORLD; rank++)
        {
            agents.get(rank).awaitExit(15_000);
            assertFalse(Files.exists(sockets.get(rank)), "agent " + rank + " left its socket behind");
            assertFalse(Files.exists(shms.get(rank)), "agent " + rank + " left its shared memory behind");
        }
        System.out.printf("BRIDGE TIMING agents_ready_s=%.1f python_s=%.1f total_s=%.1f%n",
            (agentsReadyNs - startNs) / 1e9, (pythonDoneNs - agentsReadyNs) / 1e9, (System.nanoTime() - startNs) / 1e9);
    }

    private static Map<String, String> fields(final String output, final String prefix)
    {
        for (final String line : output.split("\n"))
        {
            if (line.startsWith(prefix))
            {
                final Map<String, String> fields = new HashMap<>();
                for (final String token : line.substring(prefix.length()).trim().split(" +"))
                {
                    final int equals = token.indexOf('=');
                    if (equals > 0)
                    {
                        fields.put(token.substring(0, equals), token.substring(equals + 1));
                    }
                }
                return fields;
            }
        }
        throw new AssertionError("no line starting with '" + prefix + "' in:\n" + output);
    }
}
