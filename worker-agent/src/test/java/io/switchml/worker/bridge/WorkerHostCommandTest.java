package io.switchml.worker.bridge;

import io.switchml.worker.ChildProcess;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code switchml worker host} as the Python package starts it for one job's ranks ({@code --exit-with-pid},
 * {@code --delete-socket-dir}), in a child JVM: it ends, and takes its private directory with it, when the process
 * that started it exits; and its lifetime options fail at start naming themselves.
 */
@Tag("process")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WorkerHostCommandTest
{
    @TempDir
    Path tempDir;

    @Test
    void anAgentStartedForAJobEndsWithTheProcessThatStartedItAndDeletesItsDirectory() throws Exception
    {
        // the "training process": not the agent's parent here, as it is not in a container's PID namespace either
        final Process starter = new ProcessBuilder("sleep", "60").start();
        final Path directory = Files.createDirectory(tempDir.resolve("job-agent"));
        final Path socket = directory.resolve("agent.sock");
        try (ChildProcess agent = ChildProcess.startJvm("job-agent", WorkerHostCommand.class, List.of(
            "--socket", socket.toString(), "--shm-dir", directory.toString(), "--warm-up-ms", "0",
            "--exit-after-sessions", "4", "--exit-with-pid", Long.toString(starter.pid()), "--delete-socket-dir")))
        {
            agent.awaitLine(line -> line.startsWith("switchml worker host ready: socket=" + socket), 60_000);
            assertTrue(Files.exists(socket));
            starter.destroyForcibly().waitFor();
            assertEquals(0, agent.awaitExit(15_000), "the agent ends with status 0 when its starter exits: " +
                agent.output());
            assertTrue(agent.output().contains("(--exit-with-pid): stopping"), agent.output());
            assertFalse(Files.exists(directory), "its socket and directory are gone: " + agent.output());
        }
        finally
        {
            starter.destroyForcibly();
        }
    }

    @Test
    void theReadyLineSaysWhichPagesTheSharedMemoryHasAndFourKiBPagesAreAWarning() throws Exception
    {
        // the package's mount options (root mounts them, as CI runs), then a directory on the disk's file system
        try (SmallTmpfs huge = new SmallTmpfs(tempDir.resolve("huge"), SmallTmpfs.packagedOptions());
            ChildProcess agent = startHost("huge-shm", huge.dir()))
        {
            final String ready = agent.awaitLine(line -> line.startsWith("switchml worker host ready: "), 60_000);
            assertFalse(agent.output().contains("has 4 KiB pages"), agent.output());
            assertTrue(ready.contains(" shmPages=huge "), ready);
        }
        final Path plain = Files.createDirectory(tempDir.resolve("plain"));
        try (ChildProcess agent = startHost("plain-shm", plain))
        {
            final String ready = agent.awaitLine(line -> line.startsWith("switchml worker host ready: "), 60_000);
            final String expected = SharedMemoryPages.kind(SharedMemoryPages.describe(plain));
            assertEquals("4k", expected, "a directory under " + tempDir + " has 4 KiB pages");
            assertTrue(ready.contains(" shmPages=4k "), ready);
            assertTrue(agent.output().contains("--shm-dir " + plain + " has 4 KiB pages"), agent.output());
        }
    }

    /** A host agent with its socket and shared memory in {@code dir}, no warm-up, gone after one session. */
    private static ChildProcess startHost(final String name, final Path dir) throws Exception
    {
        return ChildProcess.startJvm(name, WorkerHostCommand.class, List.of("--socket", dir.resolve("agent.sock").toString(),
            "--shm-dir", dir.toString(), "--warm-up-ms", "0", "--exit-after-sessions", "1"));
    }

    @Test
    void badLifetimeOptionsFailAtStartNamingThemselves() throws Exception
    {
        // above any pid_max Linux allows (2^22): no such process, now or later
        for (final List<String> args : List.of(
            List.of("--exit-with-pid", Long.toString(Integer.MAX_VALUE)),
            List.of("--exit-after-sessions", "-1")))
        {
            try (ChildProcess agent = ChildProcess.startJvm("bad-host-args", WorkerHostCommand.class, args))
            {
                assertEquals(2, agent.awaitExit(30_000), agent.output());
                assertTrue(agent.output().contains(args.getFirst()), "the error names " + args.getFirst() + ": " +
                    agent.output());
            }
        }
    }
}
