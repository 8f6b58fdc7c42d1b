package io.switchml.worker;

import io.switchml.appliance.ApplianceCommand;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The appliance and each worker as separate JVM processes over real UDP and TCP on loopback.
 */
@Tag("process")
@Timeout(180)
class MultiProcessTest
{
    private static final Pattern READY = Pattern.compile("data udp [^:]+:(\\d+) .*control tcp [^:]+:(\\d+)");
    private static final Pattern RETRANSMISSIONS = Pattern.compile("retransmissions=(\\d+)");

    @org.junit.jupiter.api.io.TempDir
    java.nio.file.Path tempDir;

    private final List<ChildProcess> processes = new ArrayList<>();

    @AfterEach
    void killAll()
    {
        processes.forEach(ChildProcess::close);
    }

    private int startAppliance(final String... extraArgs) throws Exception
    {
        final List<String> args = new ArrayList<>(List.of("--data-port", "0", "--control-port", "0", "--http-port", "0",
            "--dir", tempDir.toString(), "--insecure-control"));
        args.addAll(List.of(extraArgs));
        final ChildProcess appliance = ChildProcess.startJvm("appliance", ApplianceCommand.class, args);
        processes.add(appliance);
        final Matcher matcher = READY.matcher(appliance.awaitLine(line -> line.contains("appliance ready"), 30_000));
        assertTrue(matcher.find());
        return Integer.parseInt(matcher.group(2));
    }

    private List<ChildProcess> startWorkers(final int world, final int controlPort, final String... extraArgs) throws Exception
    {
        final List<ChildProcess> workers = new ArrayList<>();
        for (int rank = 0; rank < world; rank++)
        {
            final List<String> args = new ArrayList<>(List.of("--control-port", Integer.toString(controlPort),
                "--job", "mp", "--token", "multi-process-token",
                "--world", Integer.toString(world), "--rank", Integer.toString(rank)));
            args.addAll(List.of(extraArgs));
            final ChildProcess worker = ChildProcess.startJvm("worker-" + rank, WorkerRunCommand.class, args);
            processes.add(worker);
            workers.add(worker);
        }
        return workers;
    }

    private static long retransmissions(final String resultLine)
    {
        final Matcher matcher = RETRANSMISSIONS.matcher(resultLine);
        assertTrue(matcher.find(), resultLine);
        return Long.parseLong(matcher.group(1));
    }

    @Test
    void int32SumsAreBitExactAtOnePercentLoss() throws Exception
    {
        final int controlPort = startAppliance("--loss-rate", "0.01", "--loss-seed", "5");
        final List<ChildProcess> workers = startWorkers(4, controlPort, "--type", "int32", "--elements", "300000",
            "--iterations", "3", "--warmups", "1", "-k", "1024", "-s", "32", "--rto-ms", "10",
            "--loss-rate", "0.01", "--loss-seed", "11");
        long retransmissions = 0;
        for (final ChildProcess worker : workers)
        {
            final String result = worker.awaitLine(line -> line.startsWith("RESULT") || line.startsWith("ERROR"), 120_000);
            assertTrue(result.contains("ok=true"), worker.output());
            assertEquals(0, worker.awaitExit(10_000), worker.output());
            retransmissions += retransmissions(result);
        }
        assertTrue(retransmissions > 0, "1% loss each way must cause retransmissions");
    }

    @Test
    void float32SumsAreWithinBoundAtOnePercentLoss() throws Exception
    {
        final int controlPort = startAppliance("--loss-rate", "0.01", "--loss-seed", "6");
        final List<ChildProcess> workers = startWorkers(4, controlPort, "--type", "float32", "--elements", "300000",
            "--iterations", "3", "--warmups", "1", "-k", "1024", "-s", "32", "--rto-ms", "10",
            "--loss-rate", "0.01", "--loss-seed", "12");
        long retransmissions = 0;
        for (final ChildProcess worker : workers)
        {
            final String result = worker.awaitLine(line -> line.startsWith("RESULT") || line.startsWith("ERROR"), 120_000);
            assertTrue(result.contains("ok=true"), worker.output());
            assertEquals(0, worker.awaitExit(10_000), worker.output());
            retransmissions += retransmissions(result);
        }
        assertTrue(retransmissions > 0, "1% loss each way must cause retransmissions");
    }

    @Test
    void killedWorkerFailsTheOthersNamingItsRank() throws Exception
    {
        final int controlPort = startAppliance();
        final List<ChildProcess> workers = startWorkers(3, controlPort, "--type", "int32", "--elements", "2000000",
            "--iterations", "100000", "--warmups", "0", "-k", "1024", "-s", "16");
        // wait until the job runs: the victim must be mid-job, not mid-join
        Thread.sleep(4_000);
        final ChildProcess victim = workers.get(1);
        assertTrue(victim.process().isAlive(), victim.output());
        final long killedNs = System.nanoTime();
        victim.process().destroyForcibly();
        for (final int rank : new int[]{0, 2})
        {
            final ChildProcess survivor = workers.get(rank);
            final String error = survivor.awaitLine(line -> line.startsWith("ERROR") || line.startsWith("RESULT"), 10_000);
            final long elapsedMs = (System.nanoTime() - killedNs) / 1_000_000;
            assertTrue(error.contains("rank 1 ") && error.contains("lost its control connection"), error);
            assertTrue(elapsedMs < 5_000, "failure took " + elapsedMs + " ms");
            assertEquals(3, survivor.awaitExit(10_000), survivor.output());
        }
    }

    @Test
    void applianceDeathFailsWorkersCleanly() throws Exception
    {
        final int controlPort = startAppliance();
        final List<ChildProcess> workers = startWorkers(2, controlPort, "--type", "float32", "--elements", "2000000",
            "--iterations", "100000", "--warmups", "0", "-k", "1024", "-s", "16");
        Thread.sleep(4_000);
        processes.get(0).process().destroyForcibly();
        for (final ChildProcess worker : workers)
        {
            final String error = worker.awaitLine(line -> line.startsWith("ERROR") || line.startsWith("RESULT"), 15_000);
            assertTrue(error.contains("appliance"), error);
            assertNotEquals(0, worker.awaitExit(10_000), worker.output());
        }
    }

    @Test
    void sigtermAbortsRunningJobsWithAClearReason() throws Exception
    {
        final int controlPort = startAppliance();
        final List<ChildProcess> workers = startWorkers(2, controlPort, "--type", "int32", "--elements", "2000000",
            "--iterations", "100000", "--warmups", "0", "-k", "1024", "-s", "16");
        Thread.sleep(4_000);
        processes.get(0).process().destroy();
        for (final ChildProcess worker : workers)
        {
            final String error = worker.awaitLine(line -> line.startsWith("ERROR") || line.startsWith("RESULT"), 15_000);
            assertTrue(error.contains("aborted by the appliance: appliance received a termination signal"), error);
            assertEquals(3, worker.awaitExit(10_000), worker.output());
        }
        assertEquals(143, processes.get(0).awaitExit(10_000), processes.get(0).output());
    }
}
