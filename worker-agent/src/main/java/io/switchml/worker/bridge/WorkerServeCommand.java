package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerContext;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code switchml worker serve}: run the worker agent as a local service for one training process
 * (one rank). It joins the job at start-up (every rank's bridge must be started; the join waits for
 * all of them), then prints {@code switchml worker serve ready: socket=... shm=...} and serves
 * {@link BridgeProtocol} requests on a Unix-domain socket, with tensor data in a shared-memory file.
 * The socket and the file are deleted on exit, including on SIGTERM. Exit code 0 after an orderly
 * stop, 2 for bad arguments, 3 when the job cannot be joined or the socket or shared memory cannot
 * be set up.
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
    description = {"Serve one training process (one rank) as a local bridge for PyTorch.",
        "All-reduces float32 tensors that the process places in shared memory, on request over a Unix-domain " +
            "socket (Python package 'switchml', worker-agent/python). Joins the job at start-up: start every rank's " +
            "bridge; each prints 'switchml worker serve ready: socket=... shm=...' once all have joined."})
public final class WorkerServeCommand implements Callable<Integer>
{
    @Option(names = "--appliance", description = "Appliance host (default ${DEFAULT-VALUE}).", defaultValue = "127.0.0.1")
    private String applianceHost;

    @Option(names = "--control-port", description = "Appliance control port (default ${DEFAULT-VALUE}).", defaultValue = "7470")
    private int controlPort;

    @Option(names = "--job", description = "Job name, the same on every rank (default ${DEFAULT-VALUE}).", defaultValue = "job")
    private String jobName;

    @Option(names = "--tenant", description = "Tenant the job belongs to (default ${DEFAULT-VALUE}).", defaultValue = "default")
    private String tenant;

    @Option(names = "--token", description = "The job's shared secret, the same on every rank (default: $SWITCHML_JOB_TOKEN).",
        defaultValue = "${env:SWITCHML_JOB_TOKEN}")
    private String token;

    @Option(names = "--mac", description = "on: data packets carry a SipHash-2-4 MAC; off: trusted rack (default ${DEFAULT-VALUE}).",
        defaultValue = "on")
    private String mac;

    @Option(names = "--slot-timeout-ms", description = "Abort the job when a slot stays partly filled this long (default: the appliance's).",
        defaultValue = "0")
    private long slotTimeoutMs;

    @Option(names = "--world", required = true, description = "Number of ranks in the job.")
    private int worldSize;

    @Option(names = "--rank", required = true, description = "This worker's rank, 0 .. world-1.")
    private int rank;

    @Option(names = {"-k", "--lanes"}, description = "Elements per packet (default ${DEFAULT-VALUE}).", defaultValue = "8192")
    private int lanes;

    @Option(names = {"-s", "--slots"}, description = "Pool size, packets in flight (default ${DEFAULT-VALUE}).", defaultValue = "32")
    private int slots;

    @Option(names = "--rto-ms", description = "Initial retransmission timeout (default ${DEFAULT-VALUE}).", defaultValue = "20")
    private long rtoMs;

    @Option(names = "--progress-timeout-ms", description = "Fail an all-reduce when no result arrives for this long (default ${DEFAULT-VALUE}).",
        defaultValue = "10000")
    private long progressTimeoutMs;

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

    @Option(names = "--once", description = "Exit after the first client session ends (default: serve sessions until terminated).")
    private boolean once;

    @Override
    public Integer call()
    {
        final BridgeContext context;
        try
        {
            if (!mac.equals("on") && !mac.equals("off"))
            {
                throw new IllegalArgumentException("--mac must be on or off: " + mac);
            }
            final WorkerContext worker = new WorkerContext().applianceHost(applianceHost).controlPort(controlPort)
                .jobName(jobName).tenant(tenant).token(token).macEnabled(mac.equals("on")).slotTimeoutMs(slotTimeoutMs)
                .worldSize(worldSize).rank(rank).lanes(lanes).slots(slots).retransmitTimeoutMs(rtoMs)
                .progressTimeoutMs(progressTimeoutMs).joinTimeoutMs(joinTimeoutMs);
            context = new BridgeContext().worker(worker).socketPath(socketPath).shmPath(shmPath).shmBytes(shmBytes).once(once)
                .conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("switchml worker serve: " + ex.getMessage());
            return 2;
        }

        System.out.println("switchml worker serve: joining job " + jobName + " (tenant " + tenant + ") as rank " + rank + " of " +
            worldSize + " at " + applianceHost + ":" + controlPort + " ...");
        System.out.flush();
        final BridgeServer server;
        try
        {
            server = BridgeServer.open(context);
        }
        catch (final IOException ex)
        {
            System.out.println("ERROR rank=" + rank + " " + ex.getMessage());
            return 3;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(server::close, "switchml-bridge-shutdown"));
        try
        {
            server.join();
        }
        catch (final AllReduceException ex)
        {
            server.close();
            System.out.println("ERROR rank=" + rank + " " + ex.getMessage());
            return 3;
        }
        System.out.println("switchml worker serve ready: socket=" + context.socketPath() + " shm=" + context.shmPath() +
            " shmBytes=" + context.shmBytes() + " rank=" + rank + " world=" + worldSize + " job=" + jobName);
        System.out.flush();
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

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new WorkerServeCommand()).execute(args));
    }
}
