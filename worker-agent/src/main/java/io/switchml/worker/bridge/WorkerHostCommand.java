package io.switchml.worker.bridge;

import io.switchml.protocol.logging.LogLevelOption;
import io.switchml.protocol.logging.Logging;
import io.switchml.service.SystemdNotifier;
import io.switchml.worker.HostWarmUp;
import io.switchml.worker.TransportOptions;
import io.switchml.worker.WorkerContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code switchml worker host}: one long-lived worker agent for every training process of a host
 * ({@link HostAgent}). It warms its data path up at start ({@link HostWarmUp}), then prints
 * {@code switchml worker host ready: socket=...} (and sends {@code READY=1} under a {@code Type=notify} unit) and
 * opens a session for each {@code OPEN} on its socket until SIGTERM (exit status 143, after leaving every session's job
 * and deleting the socket and shared memory), 2 for bad arguments, 3 when the socket cannot be bound. An agent that a
 * training process starts for its job's ranks on this host (the Python package does, under torchrun, where no packaged
 * agent serves) ends itself with status 0: after {@code --exit-after-sessions} sessions, or, leaving their jobs so that
 * the peers learn of it, when the process named by {@code --exit-with-pid} exits.
 */
@Command(name = "host", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = {"Serve every training process of this host from one long-lived, warmed-up agent.",
        "Each process opens a session for its rank with 'OPEN job=... rank=... world=... token=...' on the socket " +
            "(the Python package does, on /run/switchml/host/agent.sock or SWITCHML_HOST_AGENT); the session then speaks " +
            "the 'worker serve' bridge " +
            "protocol. The agent's own options (appliance, tenant, credentials, TLS, packet I/O, k, s, join timeout) are " +
            "every session's defaults and limits; OPEN may set the job's appliance and control port, backend, k and s " +
            "(up to the agent's), MAC, shared memory (up to --max-shm-bytes), join timeout (up to the agent's) and int32. " +
            "With localRank= and localWorld= (torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE) the job's ranks on this host " +
            "are summed here and sent to the appliance as one worker of the job."})
public final class WorkerHostCommand implements Callable<Integer>
{
    private static final Logger LOG = LoggerFactory.getLogger(WorkerHostCommand.class);

    @Mixin
    private LogLevelOption logLevel;

    @Mixin
    private TransportOptions transport;

    @Option(names = "--socket", description = "The host socket, mode 0660 (default: $TMPDIR/switchml-worker-host.sock).")
    private Path socketPath;

    @Option(names = "--shm-dir", description = "Directory of the sessions' shared-memory files, mode 0660 " +
        "(default: /dev/shm when it exists, else $TMPDIR).")
    private Path shmDir;

    @Option(names = "--max-sessions", description = "Sessions (ranks of jobs) served at once (default ${DEFAULT-VALUE}).",
        defaultValue = "64")
    private int maxSessions;

    @Option(names = "--max-shm-bytes", description = "Most shared memory one session may ask for (default ${DEFAULT-VALUE}).",
        defaultValue = "1073741824")
    private long maxShmBytes;

    @Option(names = "--warm-up-ms", description = "How long to warm the data path up before taking jobs (default " +
        "${DEFAULT-VALUE}; 0: not at all).", defaultValue = "8000")
    private long warmUpMs;

    @Option(names = "--join-timeout-ms", description = "How long a session's join waits for the job's other ranks, and " +
        "the most an OPEN may ask for (default ${DEFAULT-VALUE}).", defaultValue = "60000")
    private long joinTimeoutMs;

    @Option(names = "--pipeline-depth", description = "Requests a client may have outstanding at once (default ${DEFAULT-VALUE}).",
        defaultValue = "" + BridgeContext.PIPELINE_DEPTH_DEFAULT)
    private int pipelineDepth;

    @Option(names = "--exit-after-sessions", description = "Exit (status 0) once this many sessions have been " +
        "opened and all have ended: an agent started for one job's ranks on this host (default ${DEFAULT-VALUE}: serve " +
        "until SIGTERM).", defaultValue = "0")
    private long exitAfterSessions;

    @Mixin
    private AgentLifetimeOptions lifetime;

    @Override
    public Integer call()
    {
        Logging.logUncaughtExceptions();
        final WorkerContext options;
        try
        {
            if (warmUpMs < 0 || warmUpMs > 600_000)
            {
                throw new IllegalArgumentException("--warm-up-ms must be 0..600000: " + warmUpMs);
            }
            BridgeContext.requirePipelineDepth(pipelineDepth);
            if (exitAfterSessions < 0 || exitAfterSessions > 4096)
            {
                throw new IllegalArgumentException("--exit-after-sessions must be 0..4096: " + exitAfterSessions);
            }
            lifetime.validate();
            BridgeContext.requireJoinTimeoutMs(joinTimeoutMs, "--join-timeout-ms");
            options = hostOptions();
            // the options every session starts from must be valid on their own (a job's fields aside)
            hostOptions().jobName("check").token("checkcheck").worldSize(1).rank(0).conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            LOG.error("{}", ex.getMessage());
            return 2;
        }
        final Path socket = socketPath != null ? socketPath :
            Path.of(System.getProperty("java.io.tmpdir"), "switchml-worker-host.sock");
        final Path shm = shmDir != null ? shmDir : BridgeContext.defaultShmDir();
        final SystemdNotifier notifier = SystemdNotifier.fromEnvironment();
        final HostAgent agent;
        try
        {
            agent = HostAgent.bind(this::hostOptions, socket, shm, maxSessions, maxShmBytes, pipelineDepth);
        }
        catch (final IllegalArgumentException ex)
        {
            LOG.error("{}", ex.getMessage());
            notifier.close();
            return 2;
        }
        catch (final IOException ex)
        {
            Logging.failureLine(LOG, "ERROR " + ex.getMessage());
            notifier.close();
            return 3;
        }
        agent.closeAfterSessions(exitAfterSessions);
        lifetime.watch(pid ->
        {
            LOG.warn("process {} exited (--exit-with-pid): stopping, leaving {} sessions' jobs", pid, agent.sessions());
            agent.close();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            notifier.stopping("stopping with " + agent.sessions() + " sessions open, " + agent.opened() + " opened");
            agent.close();
            lifetime.deleteSocketDir(agent.socketPath());
            notifier.close();
            System.out.println("switchml worker host: stopped after " + agent.opened() + " sessions (" + agent.refused() +
                " refused)");
            System.out.flush();
        }, "switchml-host-shutdown"));
        System.out.println("switchml worker host: warming the data path up for " + warmUpMs + " ms (transport " +
            options.transport() + ", k=" + options.lanes() + ") ...");
        System.out.flush();
        notifier.status("warming up");
        final HostWarmUp.Result warm = HostWarmUp.run(options, warmUpMs);
        final String pages = SharedMemoryPages.describe(shm);
        if (pages.startsWith("4k"))
        {
            LOG.warn("--shm-dir {} has 4 KiB pages, {}: a job's first all-reduce pays a page fault per 4 KiB of its " +
                "tensors on each side; a tmpfs mounted with huge=within_size (the package's run-switchml-shm.mount, " +
                "used by default when mounted) has 512 times fewer", shm, pages.substring(3));
        }
        System.out.println("switchml worker host: shared memory in " + shm + ": " + pages);
        System.out.println("switchml worker host ready: socket=" + agent.socketPath() + " shmDir=" + shm +
            " shmPages=" + SharedMemoryPages.kind(pages) + " maxSessions=" + maxSessions + " warmUp=" + warm.rehearsals() + " rehearsals, " + warm.allReduces() +
            " all-reduces, " + warm.kernelRounds() + " kernel rounds in " + warm.elapsedMs() + " ms; appliance " +
            options.applianceHost() + ":" + options.controlPort() + ", tenant " + options.tenant());
        System.out.flush();
        final String notifyError = notifier.ready("serving " + agent.socketPath());
        if (notifyError != null)
        {
            System.err.println("switchml worker host: sd_notify READY=1 not sent: " + notifyError);
        }
        // until SIGTERM: the shutdown hook closes the agent and reports (exit status 143); a failed socket is an error
        // (exit 3), which Restart=on-failure restarts
        if (agent.serve())
        {
            return 0;
        }
        agent.close();
        return 3;
    }

    /**
     * @return a fresh context with this agent's options, which every session starts from.
     */
    private WorkerContext hostOptions()
    {
        return transport.applyTo(new WorkerContext()).joinTimeoutMs(joinTimeoutMs);
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new WorkerHostCommand()).execute(args));
    }
}
