package io.switchml.worker.bench;

import io.switchml.protocol.ElementType;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.KnownTensors;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import io.switchml.worker.WorkerCounters;
import org.HdrHistogram.Histogram;

import java.util.concurrent.TimeUnit;

/**
 * One rank of the SwitchML microbenchmark (paper section 6.1): warm-up all-reduces, then timed ones, every result
 * checked against {@link KnownTensors}. Each all-reduce is timed on this rank from the call to its return, the
 * paper's tensor aggregation time (TAT).
 * <p>
 * Before each all-reduce the ranks meet at a one-element all-reduce used as a barrier, so that a rank which
 * finished checking the previous result early does not count the wait for slower ranks in its TAT.
 */
final class RankBenchmark
{
    /** Largest TAT the histogram tracks; longer ones are recorded as this. */
    static final long HIGHEST_TRACKABLE_NS = TimeUnit.MINUTES.toNanos(10);

    /** What a rank measured, or why it stopped. */
    static final class Result
    {
        final int rank;
        final Histogram tatNs = new Histogram(1, HIGHEST_TRACKABLE_NS, 3);
        long retransmissionsTimed;
        long retransmissionsTotal;
        long fastRetransmissionsTotal;
        long tailProbesTotal;
        long probesTotal;
        long nacksTotal;
        long packetsSent;
        long packetsReceived;
        long staleResults;
        long smoothedRttNs;
        int roundsChecked;
        /** Non-null when a result was wrong: the round and the first bad element. */
        String wrongResult;
        /** Non-null when the job failed (refused join, abort, no progress, unreachable appliance). */
        String jobFailure;

        Result(final int rank)
        {
            this.rank = rank;
        }

        boolean ok()
        {
            return wrongResult == null && jobFailure == null;
        }
    }

    private RankBenchmark()
    {
    }

    /**
     * Join the job, run warm-ups then timed all-reduces, check every result, leave.
     *
     * @param context    the rank's configuration, concluded.
     * @param elements   tensor length.
     * @param warmups    untimed all-reduces first.
     * @param iterations timed all-reduces.
     * @param barrier    whether to meet the other ranks before each all-reduce.
     * @return what was measured; {@link Result#ok()} is false when a result was wrong or the job failed.
     */
    static Result run(
        final WorkerContext context, final int elements, final int warmups, final int iterations, final boolean barrier)
    {
        final Result result = new Result(context.rank());
        final int rank = context.rank();
        final int worldSize = context.worldSize();
        final int lanes = context.lanes();
        final boolean isFloat = context.elementType() == ElementType.FLOAT32;
        try (WorkerClient client = WorkerClient.connect(context))
        {
            final WorkerCounters counters = client.counters();
            final float[] floats = isFloat ? new float[elements] : null;
            final int[] ints = isFloat ? null : new int[elements];
            final float[] barrierFloat = new float[1];
            final int[] barrierInt = new int[1];
            for (int round = 0; round < warmups + iterations; round++)
            {
                if (isFloat)
                {
                    KnownTensors.fill(floats, rank, round);
                }
                else
                {
                    KnownTensors.fill(ints, rank, round);
                }
                if (barrier)
                {
                    if (isFloat)
                    {
                        client.allReduce(barrierFloat, barrierFloat, ReduceOp.SUM);
                    }
                    else
                    {
                        client.allReduce(barrierInt, barrierInt);
                    }
                }

                final long retransmissionsBefore = counters.retransmissions();
                final long startNs = System.nanoTime();
                if (isFloat)
                {
                    client.allReduce(floats, floats, ReduceOp.SUM);
                }
                else
                {
                    client.allReduce(ints, ints);
                }
                final long tatNs = System.nanoTime() - startNs;
                final long retransmitted = counters.retransmissions() - retransmissionsBefore;

                final String error = isFloat ?
                    KnownTensors.verifyFloat(floats, worldSize, round, lanes, ReduceOp.SUM) :
                    KnownTensors.verifyIntSum(ints, worldSize, round);
                if (error != null)
                {
                    result.wrongResult = "rank " + rank + " round " + round + ": " + error;
                    break;
                }
                result.roundsChecked++;
                if (round >= warmups)
                {
                    result.tatNs.recordValue(Math.min(tatNs, HIGHEST_TRACKABLE_NS));
                    result.retransmissionsTimed += retransmitted;
                }
            }
            result.retransmissionsTotal = counters.retransmissions();
            result.fastRetransmissionsTotal = counters.fastRetransmissions();
            result.tailProbesTotal = counters.tailProbes();
            result.probesTotal = counters.probesSent();
            result.nacksTotal = counters.nacksReceived();
            result.packetsSent = counters.packetsSent();
            result.packetsReceived = counters.packetsReceived();
            result.staleResults = counters.staleResults();
            result.smoothedRttNs = client.smoothedRttNs();
        }
        catch (final AllReduceException | IllegalArgumentException ex)
        {
            result.jobFailure = "rank " + rank + ": " + ex.getMessage();
        }
        return result;
    }
}
