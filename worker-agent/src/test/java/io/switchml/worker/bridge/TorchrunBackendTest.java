package io.switchml.worker.bridge;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.worker.ChildProcess;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * {@code init_process_group(backend="switchml")} under torchrun, end to end: an embedded appliance with
 * control-plane authorization on, and {@code python3 -m torch.distributed.run --standalone --nproc_per_node=4}
 * running python/tests/torchrun_train.py, a plain DDP script, once with Gloo and once with switchml. Each
 * switchml rank starts its own agent ({@code switchml worker serve}, here through a stand-in launcher that runs
 * {@link WorkerServeCommand} on the test class path) with the job name from torchrun's run id and the tenant
 * credential from {@code $SWITCHML_CREDENTIAL_FILE}, and stops it at {@code destroy_process_group}.
 * <p>
 * torchrun is given {@code --redirects 2 --tee 1}: Debian's torch 1.13 on Python 3.11 cannot parse its default
 * of 0 (its {@code Std} flag enum iterates without NONE under 3.11) and fails before starting any worker.
 */
@Tag("python")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TorchrunBackendTest
{
    private static final String PYTHON = System.getProperty("switchml.python", "/usr/bin/python3");
    private static final int WORLD = 4;
    /**
     * Both runs of the main test: rank 2 overflows (+inf in one gradient element) at epoch 1, step 7, and the script's
     * emulated GradScaler must skip that step on every rank, as it does when Gloo sums an inf.
     */
    private static final List<String> OVERFLOW = List.of("--overflow-epoch", "1", "--overflow-step", "7", "--overflow-rank", "2");
    private static final String TENANT_SECRET = "torchrun-tenant-secret-0123456789";

    @TempDir
    Path tempDir;

    private final List<ChildProcess> children = new ArrayList<>();
    private Appliance appliance;
    private Path launcher;
    private Path credentials;

    @BeforeAll
    static void requireTorch() throws Exception
    {
        final Process probe = new ProcessBuilder(PYTHON, "-c", "import torch, torch.distributed.run")
            .redirectErrorStream(true).start();
        final String output = new String(probe.getInputStream().readAllBytes());
        if (!probe.waitFor(60, TimeUnit.SECONDS) || probe.exitValue() != 0)
        {
            fail(PYTHON + " cannot import torch.distributed.run; this test needs Debian's python3-torch " +
                "(scripts/ensure-test-deps.sh installs it). Python said: " + output.strip());
        }
    }

    @BeforeEach
    void start() throws Exception
    {
        credentials = tempDir.resolve("credentials");
        Files.writeString(credentials, "tenant default " + TENANT_SECRET + "\noperator ops torchrun-operator-secret-0123\n");
        Files.setPosixFilePermissions(credentials, PosixFilePermissions.fromString("rw-------"));
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.resolve("appliance").toString()).joinTimeoutMs(60_000)
            .controlCredentialsFile(credentials.toString()));
        launcher = writeLauncher(tempDir.resolve("bin/switchml"));
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

    /** A stand-in for the installed launcher that runs 'worker serve' and 'worker host' from the test class path. */
    private static Path writeLauncher(final Path path) throws IOException
    {
        Files.createDirectories(path.getParent());
        final String java = ProcessHandle.current().info().command().orElse("java");
        Files.writeString(path, "#!/bin/sh\n" +
            "case \"$1 $2\" in\n" +
            "  'worker serve') main=" + WorkerServeCommand.class.getName() + " ;;\n" +
            "  'worker host') main=" + WorkerHostCommand.class.getName() + " ;;\n" +
            "  *) echo \"test launcher: only 'worker serve' and 'worker host'\" >&2; exit 2 ;;\n" +
            "esac\n" +
            "shift 2\n" +
            "exec '" + java + "' --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow " +
            "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED " +
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED " +
            "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto " +
            "-cp '" + System.getProperty("java.class.path") + "' \"$main\" \"$@\"\n");
        Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rwx------"));
        return path;
    }

    private static Path pythonDir()
    {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir")), "python").toAbsolutePath();
    }

    private Map<String, String> environment()
    {
        final Map<String, String> environment = new HashMap<>();
        // a caller's own settings must not leak in (the package reads an empty variable as unset)
        for (final String name : List.of("SWITCHML_JOB", "SWITCHML_JOB_TOKEN", "SWITCHML_SOCKET", "SWITCHML_TENANT",
            "SWITCHML_CONTROL_PORT", "SWITCHML_SHM_BYTES", "SWITCHML_JOIN_TIMEOUT_S", "SWITCHML_LOCAL_REDUCE"))
        {
            environment.put(name, "");
        }
        environment.put("PYTHONPATH", pythonDir().toString());
        environment.put("PYTHONUNBUFFERED", "1");
        environment.put("PYTHONDONTWRITEBYTECODE", "1");
        environment.put("OMP_NUM_THREADS", "1");
        environment.put("GLOO_SOCKET_IFNAME", "lo");
        environment.put("SWITCHML_LAUNCHER", launcher.toString());
        environment.put("SWITCHML_APPLIANCE", "127.0.0.1:" + appliance.controlPort());
        environment.put("SWITCHML_CREDENTIAL_FILE", credentials.toString());
        environment.put("SWITCHML_AGENT_ARGS", "-k 1024 -s 16");
        // an agent per rank, even on a host where the packaged host agent serves
        environment.put("SWITCHML_HOST_AGENT", "off");
        return environment;
    }

    /**
     * @param monitorSeconds how often torchrun looks at its workers: it notices their exit only then, and kills the
     *                       others once one has failed.
     */
    private ChildProcess torchrun(final String name, final int monitorSeconds, final List<String> scriptArgs) throws IOException
    {
        return torchrun(name, monitorSeconds, scriptArgs, environment());
    }

    private ChildProcess torchrun(
        final String name, final int monitorSeconds, final List<String> scriptArgs, final Map<String, String> environment)
        throws IOException
    {
        final List<String> command = new ArrayList<>(List.of(PYTHON, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node=" + WORLD, "--monitor_interval", Integer.toString(monitorSeconds), "--redirects", "2", "--tee", "1",
            "--log_dir", tempDir.resolve("logs-" + name).toString(), "tests/torchrun_train.py"));
        command.addAll(scriptArgs);
        final ChildProcess child = ChildProcess.start(name, command, pythonDir(), environment);
        children.add(child);
        return child;
    }

    @Test
    void switchmlTrainsLikeGlooUnderTorchrunAndStopsItsAgents() throws Exception
    {
        final long startNs = System.nanoTime();
        final ChildProcess gloo = torchrun("gloo", 1, withOverflow("gloo"));
        assertEquals(0, gloo.awaitExit(120_000), "torchrun with gloo failed:\n" + gloo.output() + logs("gloo"));
        final long glooNs = System.nanoTime();
        final Map<String, String> glooSkipped = skippedOnce("gloo", gloo.output());
        final ChildProcess switchml = torchrun("switchml", 1, withOverflow("switchml"));
        assertEquals(0, switchml.awaitExit(150_000), "torchrun with switchml failed:\n" + switchml.output() + logs("switchml"));
        final long switchmlNs = System.nanoTime();

        final List<Map<String, String>> glooResults = lines(gloo.output(), "RESULT ");
        final List<Map<String, String>> switchmlResults = lines(switchml.output(), "RESULT ");
        assertEquals(WORLD, glooResults.size(), gloo.output());
        assertEquals(WORLD, switchmlResults.size(), switchml.output());
        for (final List<Map<String, String>> results : List.of(glooResults, switchmlResults))
        {
            for (final Map<String, String> result : results)
            {
                assertEquals(results.getFirst().get("digest"), result.get("digest"), "every rank's parameters identical: " + results);
                assertEquals(results.getFirst().get("losses"), result.get("losses"));
            }
        }
        final Map<String, String> switchmlSkipped = skippedOnce("switchml", switchml.output());
        assertEquals(glooSkipped.get("epoch") + ":" + glooSkipped.get("step"),
            switchmlSkipped.get("epoch") + ":" + switchmlSkipped.get("step"),
            "the overflowed step (epoch:step) skipped with gloo vs with switchml: " + glooSkipped + " vs " + switchmlSkipped);
        assertEquals(OVERFLOW.get(1) + ":" + OVERFLOW.get(3), glooSkipped.get("epoch") + ":" + glooSkipped.get("step"),
            "the step skipped is the one overflowed");
        final double glooAccuracy = Double.parseDouble(glooResults.getFirst().get("acc"));
        final double switchmlAccuracy = Double.parseDouble(switchmlResults.getFirst().get("acc"));
        System.out.printf("TORCHRUN gloo acc=%.3f losses=%s step_ms=%s | switchml acc=%.3f losses=%s step_ms=%s%n",
            glooAccuracy, glooResults.getFirst().get("losses"), glooResults.getFirst().get("step_ms"),
            switchmlAccuracy, switchmlResults.getFirst().get("losses"), switchmlResults.getFirst().get("step_ms"));
        assertTrue(glooAccuracy > 80.0, "the model did not learn with gloo: " + glooAccuracy);
        assertTrue(Math.abs(glooAccuracy - switchmlAccuracy) <= 0.5,
            "test accuracy gloo " + glooAccuracy + " vs switchml " + switchmlAccuracy + " differs by more than 0.5 points");
        final String[] glooLosses = glooResults.getFirst().get("losses").split(",");
        final String[] switchmlLosses = switchmlResults.getFirst().get("losses").split(",");
        assertEquals(glooLosses.length, switchmlLosses.length);
        assertTrue(glooLosses.length >= 3, "several epochs");
        for (int epoch = 0; epoch < glooLosses.length; epoch++)
        {
            final double expected = Double.parseDouble(glooLosses[epoch]);
            final double actual = Double.parseDouble(switchmlLosses[epoch]);
            assertEquals(expected, actual, 0.01 + 0.02 * expected, "epoch " + epoch + " loss, gloo vs switchml");
        }

        final List<Map<String, String>> dtypes = lines(switchml.output(), "DTYPES ");
        assertEquals(WORLD, dtypes.size(), "float16/bfloat16/int32 sums and averages, float64 refused: " + switchml.output());
        for (final Map<String, String> profile : lines(switchml.output(), "PROFILE "))
        {
            assertTrue(Integer.parseInt(profile.get("ranges")) >= 1, profile.toString());
            assertTrue(profile.get("example").startsWith("switchml::all_reduce(backend=switchml,bytes="), profile.toString());
        }
        assertEquals(WORLD, lines(switchml.output(), "PROFILE ").size());
        for (final Map<String, String> stats : lines(switchml.output(), "STATS "))
        {
            // 4 epochs of 32 steps, each at least one gradient bucket, plus the loss and dtype checks
            assertTrue(Long.parseLong(stats.get("allReduces")) >= 4 * 32, stats.toString());
            assertTrue(Long.parseLong(stats.get("packetsSent")) > 0, stats.toString());
            assertEquals("software", stats.get("backend"), "switchml.stats() says where the job runs: " + stats);
            assertTrue(Long.parseLong(stats.getOrDefault("int32.allReduces", "0")) >= 3, "int32 went through the int32 job: " + stats);
        }
        final List<Map<String, String>> after = lines(switchml.output(), "AGENT_AFTER_DESTROY ");
        assertEquals(WORLD, after.size(), switchml.output());
        for (final Map<String, String> agent : after)
        {
            assertEquals("False", agent.get("alive"), "destroy_process_group stops the agent: " + agent);
        }
        System.out.printf("TORCHRUN TIMING gloo_s=%.1f switchml_s=%.1f%n", (glooNs - startNs) / 1e9, (switchmlNs - glooNs) / 1e9);
    }

    private static List<String> withOverflow(final String backend)
    {
        final List<String> args = new ArrayList<>(List.of("--backend", backend));
        args.addAll(OVERFLOW);
        return args;
    }

    /**
     * The run's SKIPPED lines (its emulated GradScaler found a non-finite gradient): exactly one per rank, all at the
     * same epoch and step, every rank with the same number of parameters whose gradients stayed finite.
     *
     * @return rank 0's line.
     */
    private static Map<String, String> skippedOnce(final String run, final String output)
    {
        final List<Map<String, String>> skipped = lines(output, "SKIPPED ");
        assertEquals(WORLD, skipped.size(), run + ": one SKIPPED line per rank (the injected overflow, all-reduced to " +
            "every rank, and no other step): " + skipped + "\n" + output);
        final Map<String, String> first = skipped.stream().filter(line -> line.get("rank").equals("0")).findFirst()
            .orElseThrow(() -> new AssertionError(run + ": rank 0 skipped no step: " + skipped));
        for (int rank = 0; rank < WORLD; rank++)
        {
            final String name = Integer.toString(rank);
            assertEquals(1, skipped.stream().filter(line -> line.get("rank").equals(name)).count(),
                run + ": rank " + rank + " skips exactly one step: " + skipped);
        }
        for (final Map<String, String> line : skipped)
        {
            assertEquals(first.get("epoch") + ":" + first.get("step") + " finite_params=" + first.get("finite_params"),
                line.get("epoch") + ":" + line.get("step") + " finite_params=" + line.get("finite_params"),
                run + ": every rank skips the same step (epoch:step) with the same parameters' gradients finite: " + skipped);
        }
        assertTrue(Integer.parseInt(first.get("finite_params")) >= 1,
            run + ": the other parameters' gradients (the rest of the bucket) were summed normally, finite: " + skipped);
        System.out.println("TORCHRUN SKIPPED " + run + " " + skipped);
        return first;
    }

    /**
     * The ranks of two torchrun jobs, one after the other, open their sessions in one host agent
     * ({@code switchml worker host}, a child JVM) instead of starting agents: the launcher named is missing, so a rank
     * that tried to start one would fail. The host agent holds the tenant credential, which the ranks do not have.
     */
    @Test
    void ranksOfSuccessiveJobsShareOneHostAgentAndStartNoAgent() throws Exception
    {
        final Path socket = tempDir.resolve("host.sock");
        final ChildProcess host = ChildProcess.startJvm("host-agent", WorkerHostCommand.class, List.of(
            "--socket", socket.toString(), "--shm-dir", tempDir.toString(), "--control-port",
            Integer.toString(appliance.controlPort()), "--credential-file", credentials.toString(), "--warm-up-ms", "500",
            "-k", "1024", "-s", "16"));
        children.add(host);
        host.awaitLine(line -> line.startsWith("switchml worker host ready: socket=" + socket), 60_000);
        final Map<String, String> environment = environment();
        environment.put("SWITCHML_HOST_AGENT", socket.toString());
        environment.put("SWITCHML_CREDENTIAL_FILE", "");
        environment.put("SWITCHML_AGENT_ARGS", "");
        environment.put("SWITCHML_LAUNCHER", tempDir.resolve("no-such-launcher").toString());
        // the first job's ranks are one worker each (local reduction off); the second's, under torchrun's
        // LOCAL_WORLD_SIZE=4, are summed in the agent and sent to the appliance as one worker (the default)
        for (final String run : List.of("host-flat", "host-local"))
        {
            environment.put("SWITCHML_LOCAL_REDUCE", run.equals("host-flat") ? "off" : "auto");
            final int linesBefore = host.lines().size();
            // with the main test's overflow: one rank's infinity, through the host agent's sessions and, in the second
            // job, through its sum of the node's ranks, is carried as NaN to every rank, which skips that step
            final List<String> args = new ArrayList<>(List.of("--backend", "switchml"));
            args.addAll(OVERFLOW);
            final ChildProcess job = torchrun(run, 1, args, environment);
            assertEquals(0, job.awaitExit(150_000), "torchrun through the host agent failed:\n" + job.output() + logs(run) +
                "\nthe host agent:\n" + host.output());
            skippedOnce(run, job.output());
            final List<Map<String, String>> results = lines(job.output(), "RESULT ");
            assertEquals(WORLD, results.size(), job.output());
            for (final Map<String, String> result : results)
            {
                assertEquals(results.getFirst().get("digest"), result.get("digest"), "every rank's parameters identical");
                assertEquals("None", result.get("agent_pid"), "no rank started an agent: " + result);
            }
            assertTrue(Double.parseDouble(results.getFirst().get("acc")) > 80.0, "the model learned: " + results.getFirst());
            for (final Map<String, String> stats : lines(job.output(), "STATS "))
            {
                assertTrue(Long.parseLong(stats.get("allReduces")) >= 4 * 32, stats.toString());
                assertTrue(Long.parseLong(stats.getOrDefault("int32.allReduces", "0")) >= 3, stats.toString());
            }
            final List<String> hostLines = host.lines();
            final List<String> served = hostLines.subList(linesBefore, hostLines.size()).stream()
                .filter(line -> line.contains("HostAgent: serving rank ")).toList();
            assertEquals(WORLD, served.size(), host.output());
            for (final String line : served)
            {
                assertEquals(run.equals("host-local"), line.contains("ranks 0..3 summed on this host and sent as one " +
                    "worker (node 0 of 1)"), line);
            }
        }
        final long ended = host.lines().stream().filter(line -> line.contains("HostAgent: session of rank ") &&
            line.contains(" ended after ")).count();
        assertEquals(2 * WORLD, ended, "one session per rank and job, each ended by its process group: " + host.output());
        host.terminate();
        // Process.destroy() closes the pipe, so what the agent prints on the way out is not seen here; what it does is
        assertEquals(143, host.awaitExit(15_000), "SIGTERM's status after an orderly stop: " + host.output());
        assertFalse(Files.exists(socket), "the host agent removes its socket");
        try (var left = Files.list(tempDir))
        {
            assertTrue(left.noneMatch(path -> path.getFileName().toString().endsWith(".shm")), "no shared memory left");
        }
    }

    /**
     * The default under torchrun where no packaged host agent serves: local rank 0 starts one agent for the job's 4
     * ranks on this host ({@code worker host}), which sums them and sends the sum to the appliance as one worker, and
     * exits after the last of their sessions; no other rank starts an agent.
     */
    @Test
    void localRankZeroStartsOneAgentForTheJobsRanksOnThisHost() throws Exception
    {
        final Map<String, String> environment = jobAgentEnvironment();
        final ChildProcess run = torchrun("job-agent", 1, List.of("--backend", "switchml"), environment);
        assertEquals(0, run.awaitExit(150_000), "torchrun with a job agent failed:\n" + run.output() + logs("job-agent"));
        final String output = run.output();
        final List<Map<String, String>> results = lines(output, "RESULT ");
        assertEquals(WORLD, results.size(), output);
        for (final Map<String, String> result : results)
        {
            assertEquals(results.getFirst().get("digest"), result.get("digest"), "every rank's parameters identical");
            assertEquals(result.get("rank").equals("0"), !result.get("agent_pid").equals("None"),
                "only local rank 0 started an agent: " + result);
        }
        assertTrue(Double.parseDouble(results.getFirst().get("acc")) > 80.0, "the model learned: " + results.getFirst());
        for (final Map<String, String> stats : lines(output, "STATS "))
        {
            assertTrue(Long.parseLong(stats.get("allReduces")) >= 4 * 32, stats.toString());
            assertTrue(Long.parseLong(stats.getOrDefault("int32.allReduces", "0")) >= 3, stats.toString());
        }
        final long summed = output.lines().filter(line -> line.contains("HostAgent: serving rank ") &&
            line.contains("ranks 0..3 summed on this host and sent as one worker (node 0 of 1)")).count();
        assertEquals(WORLD, summed, "the agent sums the host's 4 ranks: " + output);
        for (final Map<String, String> stats : lines(output, "STATS "))
        {
            // switchml.stats(): where the job runs; an appliance of software alone passed nothing over
            assertEquals("software", stats.get("backend"), stats.toString());
            assertEquals("", stats.get("passedOver"), stats.toString());
        }
        assertTrue(output.contains("the last of 4 sessions ended: closing (--exit-after-sessions)"), output);
        assertPrivateAgentDirectory(output);
        final List<Map<String, String>> after = lines(output, "AGENT_AFTER_DESTROY ");
        assertEquals(1, after.size(), output);
        assertEquals("False", after.getFirst().get("alive"), "the job's agent is gone after destroy_process_group");
        assertNoAgentDirectoryLeft(output);
    }

    /**
     * Local rank 0, whose process started the job's agent, killed mid-epoch: every other rank raises within seconds
     * naming rank 0, and the agent, its parent gone, leaves the job and exits.
     */
    @Test
    void killingTheRankThatStartedTheJobsAgentIsNamedByTheOthersAndTheAgentExits() throws Exception
    {
        final String output = runKillingRank("job-agent-kill", 0, jobAgentEnvironment());
        for (final Map<String, String> rank : linesWithMessage(output, "FAILED "))
        {
            // the agent usually sees rank 0's session drop first ("rank 0's training process disconnected ..."); if it
            // sees its parent's exit first, the ranks lose the agent ("the job's host agent ..., started by rank 0")
            assertTrue(rank.get("error").contains("rank 0's training process disconnected") ||
                rank.get("error").contains("started by rank 0"), "the error names rank 0: " + rank);
            assertTrue(Double.parseDouble(rank.get("after_s")) < 5.0, "raised within seconds: " + rank);
            System.out.println("TORCHRUN JOB AGENT KILL rank " + rank.get("rank") + " raised after " + rank.get("after_s") +
                " s: " + rank.get("error"));
        }
        final long pid = Long.parseLong(lines(output, "AGENT ").stream().filter(agent -> agent.get("rank").equals("0"))
            .findFirst().orElseThrow().get("pid"));
        final long deadline = System.currentTimeMillis() + 15_000;
        while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && System.currentTimeMillis() < deadline)
        {
            Thread.sleep(100);
        }
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "the job's agent " + pid + " still runs");
        assertNoAgentDirectoryLeft(output);
    }

    /**
     * Two torchrun "nodes" of 2 ranks each on this machine (static rendezvous, --node_rank 0 and 1): each node's local
     * rank 0 starts an agent for its 2 ranks (the store key is per node), each agent joins the job as one worker of 2,
     * and the sums are the 4 ranks'.
     */
    @Test
    void eachNodesLocalRankZeroStartsTheAgentOfItsNode() throws Exception
    {
        final int masterPort = freePort();
        final Map<String, String> environment = jobAgentEnvironment();
        final List<ChildProcess> nodes = new ArrayList<>();
        for (int node = 0; node < 2; node++)
        {
            final List<String> command = List.of(PYTHON, "-m", "torch.distributed.run", "--nnodes=2",
                "--nproc_per_node=2", "--node_rank=" + node, "--master_addr=127.0.0.1", "--master_port=" + masterPort,
                "--monitor_interval", "1", "--redirects", "2", "--tee", "1", "--log_dir",
                tempDir.resolve("logs-nodes-" + node).toString(), "tests/torchrun_train.py", "--backend", "switchml",
                "--epochs", "2");
            final ChildProcess child = ChildProcess.start("node" + node, command, pythonDir(), environment);
            children.add(child);
            nodes.add(child);
        }
        final List<Map<String, String>> results = new ArrayList<>();
        final StringBuilder outputs = new StringBuilder();
        for (int node = 0; node < 2; node++)
        {
            final ChildProcess child = nodes.get(node);
            assertEquals(0, child.awaitExit(150_000), "node " + node + " failed:\n" + child.output() + logs("nodes-" + node));
            outputs.append(child.output());
            results.addAll(lines(child.output(), "RESULT "));
            final String sums = "ranks " + 2 * node + ".." + (2 * node + 1) + " summed on this host and sent as one " +
                "worker (node " + node + " of 2)";
            final long summed = child.output().lines().filter(line -> line.contains("HostAgent: serving rank ") &&
                line.contains(sums)).count();
            assertEquals(2, summed, "node " + node + "'s agent sums its 2 ranks: " + child.output());
        }
        assertEquals(WORLD, results.size(), outputs.toString());
        for (final Map<String, String> result : results)
        {
            assertEquals(results.getFirst().get("digest"), result.get("digest"), "every rank's parameters identical");
            final boolean starter = result.get("rank").equals("0") || result.get("rank").equals("2");
            assertEquals(starter, !result.get("agent_pid").equals("None"), "each node's local rank 0 starts: " + result);
        }
        assertEquals(2, outputs.toString().lines().filter(line ->
            line.contains("the last of 2 sessions ended: closing (--exit-after-sessions)")).count(), outputs.toString());
        assertNoAgentDirectoryLeft(outputs.toString());
    }

    /**
     * torchrun's elastic restart ({@code --max_restarts 1}) of a job whose rank 2 is killed in each attempt: the second
     * attempt's local rank 0 starts a new agent, its ranks join the same job name again (the first attempt's job was
     * aborted and left) and train until the kill, and every other rank of both attempts names rank 2. torchrun looks
     * at its workers every 10 s, as in {@link #runKillingRank}: once it sees rank 2 dead it SIGTERMs the others, and
     * with 1 s it did so once in CI (stop 56) before a rank had printed the error it raised ~40 ms after the kill.
     */
    @Test
    void anElasticRestartStartsANewAgentForTheSameJobName() throws Exception
    {
        final List<String> command = List.of(PYTHON, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node=" + WORLD, "--max_restarts", "1", "--monitor_interval", "10", "--redirects", "2", "--tee",
            "1", "--log_dir", tempDir.resolve("logs-restart").toString(), "tests/torchrun_train.py", "--backend",
            "switchml", "--epochs", "2", "--kill-rank", "2", "--kill-step", "5");
        final ChildProcess run = ChildProcess.start("restart", command, pythonDir(), jobAgentEnvironment());
        children.add(run);
        final int exit = run.awaitExit(200_000);
        final String output = run.output();
        assertNotEquals(0, exit, output);
        assertEquals(2, output.lines().filter(line -> line.contains("KILLING rank=2")).count(),
            "rank 2 killed in both attempts: " + output + logs("restart"));
        final List<String> agents = lines(output, "AGENT ").stream().filter(agent -> agent.get("rank").equals("0"))
            .map(agent -> agent.get("pid")).toList();
        assertEquals(2, agents.size(), output);
        assertNotEquals(agents.get(0), agents.get(1), "the second attempt's rank 0 started an agent of its own");
        final List<Map<String, String>> failed = linesWithMessage(output, "FAILED ");
        assertEquals(2 * (WORLD - 1), failed.size(), "the other ranks of both attempts raise: " + output);
        for (final Map<String, String> rank : failed)
        {
            assertTrue(rank.get("error").contains("rank 2"), "the error names rank 2: " + rank);
        }
        assertNoAgentDirectoryLeft(output);
    }

    /** torchrun's default (SWITCHML_HOST_AGENT=auto) with no packaged agent, its output in the ranks' output. */
    private Map<String, String> jobAgentEnvironment()
    {
        assertFalse(Files.exists(Path.of("/run/switchml/host/agent.sock")), "a packaged host agent serves this machine " +
            "(switchml-worker-host.service): SWITCHML_HOST_AGENT=auto would use it; stop it to run this test");
        final Map<String, String> environment = environment();
        environment.put("SWITCHML_HOST_AGENT", "");
        environment.put("SWITCHML_AGENT_LOG", "1");
        return environment;
    }

    /**
     * Whoever ends the agents, their directories go with them (waits for an agent still on its way out): the
     * directories their ready lines in {@code output} name.
     */
    private static void assertNoAgentDirectoryLeft(final String output) throws Exception
    {
        final java.util.regex.Matcher ready = java.util.regex.Pattern
            .compile("switchml worker host ready: socket=(\\S+)/agent\\.sock ").matcher(output);
        final List<Path> directories = new ArrayList<>();
        while (ready.find())
        {
            directories.add(Path.of(ready.group(1)));
        }
        assertFalse(directories.isEmpty(), "no job agent's ready line: " + output);
        final long deadline = System.currentTimeMillis() + 15_000;
        while (directories.stream().anyMatch(Files::exists) && System.currentTimeMillis() < deadline)
        {
            Thread.sleep(100);
        }
        assertTrue(directories.stream().noneMatch(Files::exists), "left: " + directories);
    }

    /** The job agent's socket and shared memory are in one directory of mode 0700 (its ready line says where). */
    private static void assertPrivateAgentDirectory(final String output)
    {
        final java.util.regex.Matcher ready = java.util.regex.Pattern
            .compile("switchml worker host ready: socket=(\\S+)/agent\\.sock shmDir=(\\S+) ").matcher(output);
        assertTrue(ready.find(), "the job agent's ready line: " + output);
        assertEquals(ready.group(1), ready.group(2), "socket and shared memory share the agent's directory");
        assertTrue(ready.group(1).startsWith("/dev/shm/switchml-torch-"), ready.group(1));
    }

    /**
     * torchrun of the training script that SIGKILLs {@code killRank} mid-epoch; checks that it failed, the rank was
     * killed and every other rank raised.
     *
     * @return torchrun's output.
     */
    private String runKillingRank(final String name, final int killRank, final Map<String, String> environment)
        throws Exception
    {
        final ChildProcess run = torchrun(name, 10, List.of("--backend", "switchml", "--kill-rank",
            Integer.toString(killRank), "--kill-step", "5"), environment);
        final int exit = run.awaitExit(150_000);
        final String output = run.output();
        assertNotEquals(0, exit, output);
        assertTrue(output.contains("KILLING rank=" + killRank), output + logs(name));
        assertEquals(WORLD - 1, linesWithMessage(output, "FAILED ").size(), "every other rank raises: " + output + logs(name));
        return output;
    }

    @Test
    void aKilledRankIsNamedByTheOthersWithinSecondsAndTheAgentsExit() throws Exception
    {
        final String output = runKillingRank("kill", 2, environment());
        for (final Map<String, String> rank : linesWithMessage(output, "FAILED "))
        {
            assertTrue(rank.get("error").contains("missing ranks [2]") || rank.get("error").contains("rank 2"),
                "the error names rank 2: " + rank);
            assertTrue(Double.parseDouble(rank.get("after_s")) < 5.0, "raised within seconds: " + rank);
            System.out.println("TORCHRUN KILL rank " + rank.get("rank") + " raised after " + rank.get("after_s") + " s: " +
                rank.get("error"));
        }
        final long deadline = System.currentTimeMillis() + 15_000;
        for (final Map<String, String> agent : lines(output, "AGENT "))
        {
            final long pid = Long.parseLong(agent.get("pid"));
            while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && System.currentTimeMillis() < deadline)
            {
                Thread.sleep(100);
            }
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "agent of " + agent + " still running");
        }
        assertEquals(WORLD, lines(output, "AGENT ").size(), output);
    }

    @Test
    void aRankThatStallsBeyondTheDefaultTimeoutsIsWaitedForAsGlooWould() throws Exception
    {
        // a rank busy for 11 s between steps (a checkpoint written by one rank): longer than the appliance's default
        // slot timeout (2 s) and the agent's default progress timeout (10 s), well within torch's process-group
        // timeout (30 min), which the group gives its agents and job, as Gloo waits that long. With an agent per rank
        // the appliance's slots wait for it; with the job's agent (the default) the host's sum waits for it
        for (final boolean jobAgent : new boolean[] {false, true})
        {
            final String name = jobAgent ? "stall-job-agent" : "stall";
            final ChildProcess run = torchrun(name, 5, List.of("--backend", "switchml", "--epochs", "2", "--stall-rank", "1",
                "--stall-s", "11"), jobAgent ? jobAgentEnvironment() : environment());
            final int exit = run.awaitExit(300_000);
            final String output = run.output();
            assertTrue(output.contains("STALLING rank=1"), output + logs(name));
            assertEquals(0, exit, output + logs(name));
            assertEquals(WORLD, lines(output, "RESULT ").size(), output + logs(name));
        }
    }

    @Test
    void aJobNameTakenOnTheApplianceAndAMissingLauncherAreClearErrors() throws Exception
    {
        // an earlier run's job, still waiting for its second rank
        final CompletableFuture<WorkerClient> earlier = CompletableFuture.supplyAsync(() -> WorkerClient.connect(
            new WorkerContext().controlPort(appliance.controlPort()).jobName("torch-taken").token("earlier-run-token")
                .credential(TENANT_SECRET).worldSize(2).rank(0).joinTimeoutMs(30_000)));
        Thread.sleep(1_000);
        final String init = "import sys, torch.distributed as dist, switchml\n" +
            "try:\n" +
            "    dist.init_process_group('switchml', init_method='tcp://127.0.0.1:%d', rank=0, world_size=1)\n" +
            "except Exception as ex:\n" +
            "    print('INIT_ERROR ' + ' '.join(str(ex).split())); sys.exit(3)\n" +
            "print('INIT_OK')\n";
        final long startNs = System.nanoTime();
        final Map<String, String> taken = environment();
        taken.put("SWITCHML_JOB", "torch-taken");
        final ChildProcess collision = ChildProcess.start("collision", List.of(PYTHON, "-c", init.formatted(freePort())),
            pythonDir(), taken);
        children.add(collision);
        assertEquals(3, collision.awaitExit(60_000), collision.output());
        final double seconds = (System.nanoTime() - startNs) / 1e9;
        assertTrue(collision.output().contains("job name 'torch-taken' is taken on the appliance"), collision.output());
        assertTrue(collision.output().contains("SWITCHML_JOB"), collision.output());
        assertTrue(seconds < 30, "a clear error, not a hang: " + seconds + " s");
        // the same through an agent started for the job (SWITCHML_HOST_AGENT=job): its OPEN is refused, same hint
        taken.put("SWITCHML_HOST_AGENT", "job");
        final ChildProcess throughJobAgent = ChildProcess.start("collision-job-agent",
            List.of(PYTHON, "-c", init.formatted(freePort())), pythonDir(), taken);
        children.add(throughJobAgent);
        assertEquals(3, throughJobAgent.awaitExit(60_000), throughJobAgent.output());
        assertTrue(throughJobAgent.output().contains("refused rank 0 of job torch-taken") &&
            throughJobAgent.output().contains("job name 'torch-taken' is taken on the appliance"), throughJobAgent.output());

        final Map<String, String> noLauncher = environment();
        noLauncher.remove("SWITCHML_LAUNCHER");
        noLauncher.put("PATH", "/usr/bin:/bin");
        final ChildProcess missing = ChildProcess.start("missing", List.of(PYTHON, "-c", init.formatted(freePort())),
            pythonDir(), noLauncher);
        children.add(missing);
        assertEquals(3, missing.awaitExit(60_000), missing.output());
        assertTrue(missing.output().contains("no 'switchml' launcher on PATH") &&
            missing.output().contains("install the switchml package"), missing.output());
        earlier.cancel(true);
        try
        {
            earlier.get(1, TimeUnit.MILLISECONDS).close();
        }
        catch (final Exception ignore)
        {
            // the earlier run never completes; the appliance ends its job at close
        }
    }

    private static int freePort() throws IOException
    {
        try (ServerSocket socket = new ServerSocket(0))
        {
            return socket.getLocalPort();
        }
    }

    private String logs(final String name)
    {
        final StringBuilder text = new StringBuilder("\nworker logs:\n");
        try (var files = Files.walk(tempDir.resolve("logs-" + name)))
        {
            for (final Path file : files.filter(Files::isRegularFile).sorted().toList())
            {
                text.append("== ").append(file).append('\n').append(Files.readString(file));
            }
        }
        catch (final IOException ex)
        {
            text.append(ex);
        }
        return text.toString();
    }

    /** The key=value fields of every line (torchrun prefixes them with [defaultN]:) that starts with prefix. */
    private static List<Map<String, String>> lines(final String output, final String prefix)
    {
        final List<Map<String, String>> found = new ArrayList<>();
        for (final String raw : output.split("\n"))
        {
            final String line = raw.replaceFirst("^\\[default\\d+\\]:", "");
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
                found.add(fields);
            }
        }
        return found;
    }

    /** As {@link #lines}, with everything after "error=" kept as the error message. */
    private static List<Map<String, String>> linesWithMessage(final String output, final String prefix)
    {
        final List<Map<String, String>> found = lines(output, prefix);
        int index = 0;
        for (final String raw : output.split("\n"))
        {
            final String line = raw.replaceFirst("^\\[default\\d+\\]:", "");
            if (line.startsWith(prefix))
            {
                final int at = line.indexOf("error=");
                found.get(index++).put("error", at < 0 ? "" : line.substring(at + "error=".length()));
            }
        }
        return found;
    }
}
