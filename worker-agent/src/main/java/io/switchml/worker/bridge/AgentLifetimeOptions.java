package io.switchml.worker.bridge;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The options that tie an agent's life to the training process that started it ({@code worker serve} for one rank,
 * {@code worker host} for a job's ranks on a host): stop when that process exits, whether or not it ever connected,
 * and delete the private directory made for the agent's socket when the agent exits.
 */
final class AgentLifetimeOptions
{
    private static final Logger LOG = LoggerFactory.getLogger(AgentLifetimeOptions.class);

    @Option(names = "--exit-with-pid", description = "Stop when process PID exits: the training process that started " +
        "this agent (default: none). Its sessions' jobs are aborted or left so that their peers learn of it.")
    private Long exitWithPid;

    @Option(names = "--delete-socket-dir", description = "On exit, also delete the socket's directory if it is then " +
        "empty: a private directory made for this agent alone (the Python package's agents).")
    private boolean deleteSocketDir;

    /**
     * @throws IllegalArgumentException when the process to follow is already gone.
     */
    void validate()
    {
        if (exitWithPid != null && ProcessHandle.of(exitWithPid).filter(ProcessHandle::isAlive).isEmpty())
        {
            throw new IllegalArgumentException("--exit-with-pid " + exitWithPid + ": no such process (it exited " +
                "before this agent started)");
        }
    }

    /**
     * Run an action once the process of {@code --exit-with-pid} has exited (at once when it already has); nothing
     * without the option.
     *
     * @param onExit told the pid.
     */
    void watch(final java.util.function.LongConsumer onExit)
    {
        if (exitWithPid != null)
        {
            final long pid = exitWithPid;
            ProcessHandle.of(pid).ifPresentOrElse(process -> process.onExit().thenRun(() -> onExit.accept(pid)),
                () -> onExit.accept(pid));
        }
    }

    /**
     * With {@code --delete-socket-dir}, delete the socket's directory if it is empty (the agent deleted its files).
     */
    void deleteSocketDir(final Path socketPath)
    {
        if (!deleteSocketDir || socketPath.getParent() == null)
        {
            return;
        }
        final Path directory = socketPath.getParent();
        try
        {
            Files.deleteIfExists(directory);
        }
        catch (final DirectoryNotEmptyException ex)
        {
            LOG.warn("--delete-socket-dir: {} is not empty, left as it is", directory);
        }
        catch (final IOException ex)
        {
            LOG.warn("--delete-socket-dir: cannot delete {}: {}", directory, ex.toString());
        }
    }
}
