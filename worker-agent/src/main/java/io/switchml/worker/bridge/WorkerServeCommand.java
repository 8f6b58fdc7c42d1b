package io.switchml.worker.bridge;

import io.switchml.protocol.logging.LogLevelOption;
import io.switchml.protocol.logging.Logging;
import io.switchml.service.SystemdNotifier;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.JobMemberOptions;
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
 * {@code switchml worker serve}: run the worker agent as a local service for one training process
 * (one rank). It joins the job at start-up (every rank's bridge must be started; the join waits for
 * all of them), then prints {@code switchml worker serve ready: socket=... shm=...} and serves
 * {@link BridgeProtocol} requests on a Unix-domain socket, with tensor data in a shared-memory file.
 * The socket and the file are deleted on exit, including on SIGTERM. Under a {@code Type=notify} unit
 * ({@code NOTIFY_SOCKET} set) it sends {@code READY=1} once the job is joined, so that the unit is active only then,
 * and {@code STOPPING=1} on SIGTERM. Exit code 0 after an orderly
 * stop, 2 for bad arguments, 3 when the job cannot be joined or the socket or shared memory cannot
 * be set up.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = {"Serve one training process (one rank) as a local bridge for PyTorch.",
        "All-reduces float32 (and int32) tensors that the process places in shared memory, on request over a Unix-domain " +
            "socket (Python package 'switchml', worker-agent/python). Joins the job at start-up: start every rank's " +
            "bridge; each prints 'switchml worker serve ready: socket=... shm=...' once all have joined."})
public final class WorkerServeCommand implements Callable<Integer>
{
    private static final Logger LOG = LoggerFactory.getLogger(WorkerServeCommand.class);

    @Mixin
    private LogLevelOption logLevel;

    @Mixin
    private TransportOptions transport;

    @Mixin
    private JobMemberOptions member;

    @Option(names = "--join-timeout-ms", description = "How long to wait for every rank to join (default ${DEFAULT-VALUE}).",
        defaultValue = "60000")
    private long joinTimeoutMs;

    @Option(names = "--socket", description = "Unix-domain control socket (default: $TMPDIR/switchml-TENANT-JOB-rankR.sock).")
    private Path socketPath;

    @Option(names = "--shm", description = "Shared-memory file (default: /dev/shm/switchml-TENANT-JOB-rankR.shm).")
    private Path shmPath;

    @Option(names = "--shm-bytes", description = "Size of the shared-memory file, a multiple of 4; larger tensors go in pieces (default ${DEFAULT-VALUE}).",
        defaultValue = "268435456")
    private long shmBytes;

    @Option(names = "--int32", description = "on: also serve int32 all-reduces exactly, through a second job JOB-int32 " +
        "that every rank joins on its first int32 request; off: refuse them (default ${DEFAULT-VALUE}).", defaultValue = "on")
    private String int32;

    @Option(names = "--pipeline-depth", description = "Requests a client may have outstanding at once (default ${DEFAULT-VALUE}).",
        defaultValue = "" + BridgeContext.PIPELINE_DEPTH_DEFAULT)
    private int pipelineDepth;

    @Option(names = "--once", description = "Exit after the first client session ends (default: serve sessions until terminated).")
    private boolean once;

    @Mixin
    private AgentLifetimeOptions lifetime;

    @Override
    public Integer call()
    {
        Logging.logUncaughtExceptions();
        final BridgeContext context;
        try
        {
            // ready as soon as the job is joined: the training process has its own start-up to do before its first call
            final WorkerContext worker = member.applyTo(transport.applyTo(new WorkerContext())).joinTimeoutMs(joinTimeoutMs)
                .warmUpUntilFirstCall(true);
            final WorkerContext int32Worker = switch (int32)
            {
                case "on" -> BridgeContext.int32JobOf(worker, transport.applyTo(new WorkerContext()));
                case "off" -> null;
                default -> throw new IllegalArgumentException("--int32 must be on or off: " + int32);
            };
            lifetime.validate();
            context = new BridgeContext().worker(worker).int32Worker(int32Worker).pipelineDepth(pipelineDepth).socketPath(socketPath).shmPath(shmPath).shmBytes(shmBytes).once(once)
                .conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            LOG.error("{}", ex.getMessage());
            return 2;
        }

        final SystemdNotifier notifier = SystemdNotifier.fromEnvironment();
        if (notifier.isEnabled())
        {
            System.out.println("switchml worker serve: " + notifier);
        }
        System.out.println("switchml worker serve: joining job " + member.jobName() + " (tenant " + context.worker().tenant() +
            ") as rank " + member.rank() + " of " + member.worldSize() + " at " + context.worker().applianceHost() + ":" +
            context.worker().controlPort() + " ...");
        System.out.flush();
        final BridgeServer server;
        try
        {
            server = BridgeServer.open(context);
        }
        catch (final IOException ex)
        {
            Logging.failureLine(LOG, "ERROR rank=" + member.rank() + " " + ex.getMessage());
            notifier.close();
            return 3;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            notifier.stopping("stopping after " + server.requests() + " all-reduce requests");
            server.close();
            lifetime.deleteSocketDir(context.socketPath());
            notifier.close();
        }, "switchml-bridge-shutdown"));
        lifetime.watch(pid -> onOwnerExited(server, pid));
        notifier.status("joining job " + member.jobName() + " as rank " + member.rank() + " of " + member.worldSize());
        try
        {
            server.join();
        }
        catch (final AllReduceException ex)
        {
            server.close();
            Logging.failureLine(LOG, "ERROR rank=" + member.rank() + " " + ex.getMessage());
            return 3;
        }
        System.out.println("switchml worker serve: transport " + server.transportDescription());
        System.out.println("switchml worker serve: backend " + server.placementDescription());
        final String pages = SharedMemoryPages.describe(context.shmPath().getParent());
        System.out.println("switchml worker serve: shared memory " + context.shmPath() + ": " + pages);
        System.out.println("switchml worker serve ready: socket=" + context.socketPath() + " shm=" + context.shmPath() +
            " shmPages=" + SharedMemoryPages.kind(pages) +
            " shmBytes=" + context.shmBytes() + " rank=" + member.rank() + " world=" + member.worldSize() + " job=" + member.jobName());
        System.out.flush();
        final String notifyError = notifier.ready("joined job " + member.jobName() + " as rank " + member.rank() + " of " + member.worldSize() +
            "; serving " + context.socketPath());
        if (notifyError != null)
        {
            System.err.println("switchml worker serve: sd_notify READY=1 not sent: " + notifyError);
        }
        try
        {
            server.serve();
        }
        finally
        {
            server.close();
        }
        System.out.println("switchml worker serve: stopped after " + server.requests() + " all-reduce requests");
        return 0;
    }

    /**
     * The training process of {@code --exit-with-pid} is gone: before or during its session (after a clean one the
     * bridge is closed already), so the job is aborted naming this rank, and the agent exits, also from a join that
     * still waits for the other ranks (the shutdown hook deletes the socket and the shared memory).
     */
    private void onOwnerExited(final BridgeServer server, final long pid)
    {
        if (server.isClosed())
        {
            return;
        }
        final String reason = "rank " + member.rank() + "'s training process (pid " + pid + ") exited";
        System.out.println("switchml worker serve: " + reason + " (--exit-with-pid): stopping");
        System.out.flush();
        server.abortJob(reason);
        System.exit(0);
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new WorkerServeCommand()).execute(args));
    }
}
