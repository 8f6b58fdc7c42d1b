package io.switchml.worker;

import io.switchml.protocol.ElementType;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * {@code switchml worker run}: join a job as one rank and all-reduce known tensors, checking every
 * result. Exit code 0 when every result is right, 1 when one is wrong, 2 for bad arguments, 3 when
 * the job failed.
 */
@Command(name = "run", mixinStandardHelpOptions = true,
    description = "Join a job as one rank and all-reduce tensors whose sum is known, checking every result.")
public final class WorkerRunCommand implements Callable<Integer>
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

    @Option(names = "--type", description = "float32, int32, float16 or bfloat16 (default ${DEFAULT-VALUE}).", defaultValue = "float32")
    private String type;

    @Option(names = "--elements", description = "Tensor length (default ${DEFAULT-VALUE}).", defaultValue = "1000000")
    private int elements;

    @Option(names = "--iterations", description = "Timed all-reduces (default ${DEFAULT-VALUE}).", defaultValue = "10")
    private int iterations;

    @Option(names = "--warmups", description = "Untimed all-reduces first (default ${DEFAULT-VALUE}).", defaultValue = "2")
    private int warmups;

    @Option(names = {"-k", "--lanes"}, description = "Elements per packet (default ${DEFAULT-VALUE}).", defaultValue = "8192")
    private int lanes;

    @Option(names = {"-s", "--slots"}, description = "Pool size, packets in flight (default ${DEFAULT-VALUE}).", defaultValue = "32")
    private int slots;

    @Option(names = "--average", description = "Average instead of sum (float32 only).")
    private boolean average;

    @Option(names = "--rto-ms", description = "Initial retransmission timeout (default ${DEFAULT-VALUE}).", defaultValue = "20")
    private long rtoMs;

    @Option(names = "--progress-timeout-ms", description = "Fail when no result arrives for this long (default ${DEFAULT-VALUE}).",
        defaultValue = "10000")
    private long progressTimeoutMs;

    @Option(names = "--loss-rate", description = "Drop this fraction of packets each way, for tests (default ${DEFAULT-VALUE}).",
        defaultValue = "0")
    private double lossRate;

    @Option(names = "--loss-seed", description = "Seed of the loss generator (default ${DEFAULT-VALUE}).", defaultValue = "1")
    private long lossSeed;

    @Override
    public Integer call()
    {
        final byte elementType;
        final WorkerContext context;
        try
        {
            elementType = ElementType.parse(type);
            if (!mac.equals("on") && !mac.equals("off"))
            {
                throw new IllegalArgumentException("--mac must be on or off: " + mac);
            }
            context = new WorkerContext().applianceHost(applianceHost).controlPort(controlPort).jobName(jobName)
                .tenant(tenant).token(token).macEnabled(mac.equals("on")).slotTimeoutMs(slotTimeoutMs)
                .worldSize(worldSize).rank(rank).elementType(elementType).lanes(lanes).slots(slots)
                .retransmitTimeoutMs(rtoMs).progressTimeoutMs(progressTimeoutMs).lossRate(lossRate).lossSeed(lossSeed)
                .conclude();
            if (elements < 1)
            {
                throw new IllegalArgumentException("--elements must be positive: " + elements);
            }
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("switchml worker: " + ex.getMessage());
            return 2;
        }

        final ReduceOp op = average ? ReduceOp.AVERAGE : ReduceOp.SUM;
        final Histogram tatNs = new Histogram(3);
        try (WorkerClient client = WorkerClient.connect(context))
        {
            final float[] floats = ElementType.isFloat(elementType) ? new float[elements] : null;
            final int[] ints = elementType == ElementType.INT32 ? new int[elements] : null;
            for (int round = 0; round < warmups + iterations; round++)
            {
                final long startNs;
                final long endNs;
                final String error;
                if (floats != null)
                {
                    KnownTensors.fill(floats, rank, round);
                    startNs = System.nanoTime();
                    client.allReduce(floats, floats, op);
                    endNs = System.nanoTime();
                    error = KnownTensors.verifyFloat(floats, worldSize, round, lanes, op, elementType);
                }
                else
                {
                    KnownTensors.fill(ints, rank, round);
                    startNs = System.nanoTime();
                    client.allReduce(ints, ints);
                    endNs = System.nanoTime();
                    error = KnownTensors.verifyIntSum(ints, worldSize, round);
                }
                if (error != null)
                {
                    System.out.println("RESULT rank=" + rank + " ok=false round=" + round + " error=" + error);
                    return 1;
                }
                if (round >= warmups)
                {
                    tatNs.recordValue(endNs - startNs);
                }
            }
            final WorkerCounters counters = client.counters();
            System.out.println(String.format(Locale.ROOT,
                "RESULT rank=%d ok=true iterations=%d elements=%d p50Ms=%.3f p99Ms=%.3f retransmissions=%d staleResults=%d sent=%d received=%d",
                rank, iterations, elements, tatNs.getValueAtPercentile(50) / 1e6, tatNs.getValueAtPercentile(99) / 1e6,
                counters.retransmissions(), counters.staleResults(), counters.packetsSent(), counters.packetsReceived()));
            return 0;
        }
        catch (final AllReduceException ex)
        {
            System.out.println("ERROR rank=" + rank + " " + ex.getMessage());
            return 3;
        }
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new WorkerRunCommand()).execute(args));
    }
}
