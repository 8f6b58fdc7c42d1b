package io.switchml.worker;

import io.switchml.protocol.logging.LogLevelOption;
import io.switchml.protocol.logging.Logging;
import io.switchml.protocol.ElementType;
import org.HdrHistogram.Histogram;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * {@code switchml worker run}: join a job as one rank and all-reduce known tensors, checking every
 * result. Exit code 0 when every result is right, 1 when one is wrong, 2 for bad arguments, 3 when
 * the job failed.
 */
@Command(name = "run", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = "Join a job as one rank and all-reduce tensors whose sum is known, checking every result.")
public final class WorkerRunCommand implements Callable<Integer>
{
    private static final Logger LOG = LoggerFactory.getLogger(WorkerRunCommand.class);

    @Mixin
    private LogLevelOption logLevel;

    @Mixin
    private TransportOptions transport;

    @Mixin
    private JobMemberOptions member;

    @Option(names = "--type", description = "float32, int32, float16 or bfloat16 (default ${DEFAULT-VALUE}).", defaultValue = "float32")
    private String type;

    @Option(names = "--elements", description = "Tensor length (default ${DEFAULT-VALUE}).", defaultValue = "1000000")
    private int elements;

    @Option(names = "--iterations", description = "Timed all-reduces (default ${DEFAULT-VALUE}).", defaultValue = "10")
    private int iterations;

    @Option(names = "--warmups", description = "Untimed all-reduces first (default ${DEFAULT-VALUE}).", defaultValue = "2")
    private int warmups;

    @Option(names = "--average", description = "Average instead of sum (float32 only).")
    private boolean average;

    @Option(names = "--loss-rate", description = "Drop this fraction of packets each way, for tests (default ${DEFAULT-VALUE}).",
        defaultValue = "0")
    private double lossRate;

    @Option(names = "--loss-seed", description = "Seed of the loss generator (default ${DEFAULT-VALUE}).", defaultValue = "1")
    private long lossSeed;

    @Override
    public Integer call()
    {
        Logging.logUncaughtExceptions();
        final byte elementType;
        final WorkerContext context;
        try
        {
            elementType = ElementType.parse(type);
            context = member.applyTo(transport.applyTo(new WorkerContext()))
                .elementType(elementType).lossRate(lossRate).lossSeed(lossSeed)
                .conclude();
            if (elements < 1)
            {
                throw new IllegalArgumentException("--elements must be positive: " + elements);
            }
        }
        catch (final IllegalArgumentException ex)
        {
            LOG.error("{}", ex.getMessage());
            return 2;
        }

        final ReduceOp op = average ? ReduceOp.AVERAGE : ReduceOp.SUM;
        final Histogram tatNs = new Histogram(3);
        try (WorkerClient client = WorkerClient.connect(context))
        {
            LOG.info("rank {} transport {}", member.rank(), client.transportDescription());
            LOG.info("rank {} backend {}", member.rank(), client.placementDescription());
            final float[] floats = ElementType.isFloat(elementType) ? new float[elements] : null;
            final int[] ints = elementType == ElementType.INT32 ? new int[elements] : null;
            for (int round = 0; round < warmups + iterations; round++)
            {
                final long startNs;
                final long endNs;
                final String error;
                if (floats != null)
                {
                    KnownTensors.fill(floats, member.rank(), round);
                    startNs = System.nanoTime();
                    client.allReduce(floats, floats, op);
                    endNs = System.nanoTime();
                    error = KnownTensors.verifyFloat(floats, member.worldSize(), round, context.lanes(), op, elementType);
                }
                else
                {
                    KnownTensors.fill(ints, member.rank(), round);
                    startNs = System.nanoTime();
                    client.allReduce(ints, ints);
                    endNs = System.nanoTime();
                    error = KnownTensors.verifyIntSum(ints, member.worldSize(), round);
                }
                if (error != null)
                {
                    System.out.println("RESULT rank=" + member.rank() + " ok=false round=" + round + " error=" + error);
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
                member.rank(), iterations, elements, tatNs.getValueAtPercentile(50) / 1e6, tatNs.getValueAtPercentile(99) / 1e6,
                counters.retransmissions(), counters.staleResults(), counters.packetsSent(), counters.packetsReceived()));
            return 0;
        }
        catch (final AllReduceException ex)
        {
            Logging.failureLine(LOG, "ERROR rank=" + member.rank() + " " + ex.getMessage());
            return 3;
        }
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new WorkerRunCommand()).execute(args));
    }
}
