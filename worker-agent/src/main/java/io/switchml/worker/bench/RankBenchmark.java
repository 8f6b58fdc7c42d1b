package io.switchml.worker.bench;

import io.switchml.protocol.ElementType;
import io.switchml.protocol.quant.BlockFloatingPoint;
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
 * checked against {@link KnownTensors} or, with peer values, against the tensor the Gloo and MPI harnesses of
 * bench/rack use. Each all-reduce is timed on this rank from the call to its return, the
 * paper's tensor aggregation time (TAT).
 * <p>
 * Before each all-reduce the ranks meet at a one-element all-reduce used as a barrier, so that a rank which
 * finished checking the previous result early does not count the wait for slower ranks in its TAT.
 */
final class RankBenchmark
{
    /** Largest TAT the histogram tracks; longer ones are recorded as this. */
    static final long HIGHEST_TRACKABLE_NS = TimeUnit.MINUTES.toNanos(10);
    /** Elements per check pass; a multiple of 8, so that every block starts the pattern afresh. */
    private static final int CHECK_BLOCK = 4096;
    /** 1 + i % 8 for one block. */
    private static final float[] PATTERN = new float[CHECK_BLOCK];

    static
    {
        for (int i = 0; i < CHECK_BLOCK; i++)
        {
            PATTERN[i] = 1 + (i & 7);
        }
    }

    /** What a rank measured, or why it stopped. */
    static final class Result
    {
        final int rank;
        final Histogram tatNs = new Histogram(1, HIGHEST_TRACKABLE_NS, 3);
        /** Every timed all-reduce's TAT in call order, to show warm-up and scheduling effects over the run. */
        long[] tatsInOrderNs = new long[0];
        /** TAT of the very first all-reduce, warm-up or not: the cold start, JIT and first joins included. */
        long firstTatNs = -1;
        int timed;
        long retransmissionsTimed;
        long retransmissionsTotal;
        long fastRetransmissionsTotal;
        long tailProbesTotal;
        long probesTotal;
        long nacksTotal;
        long pendingsTotal;
        long packetsSent;
        long packetsReceived;
        long staleResults;
        long spuriousProbes;
        long macsInLanes;
        long selectorWaits;
        long coalescedSleeps;
        long spuriousRetransmissions;
        long smoothedRttNs;
        /**
         * CPU time of the whole process (every thread: agents, JIT, collector) from the call to the return of each
         * timed all-reduce, summed; -1 when the clock could not be read. The start-up, the warm-ups, and the fill
         * and check between calls are not in it. With several ranks in one process it is the process's CPU in this
         * rank's calls, which overlap the others' ({@code worker bench --json} then reports none).
         */
        long timedCpuNs;
        String transport = "";
        String backend = "";
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
     * @param peerValues float32 only: fill with {@link #fillPeerValues} (the tensor bench/rack's Gloo and MPI
     *                   harnesses use, cheap to check) instead of {@link KnownTensors}.
     * @return what was measured; {@link Result#ok()} is false when a result was wrong or the job failed.
     */
    static Result run(
        final WorkerContext context, final int elements, final int warmups, final int iterations, final boolean barrier,
        final boolean peerValues)
    {
        final Result result = new Result(context.rank());
        final ProcessCpuClock cpuClock = new ProcessCpuClock();
        final int rank = context.rank();
        final int worldSize = context.worldSize();
        final int lanes = context.lanes();
        final boolean isFloat = context.elementType() == ElementType.FLOAT32;
        try (WorkerClient client = WorkerClient.connect(context))
        {
            final WorkerCounters counters = client.counters();
            result.transport = client.transportDescription();
            result.backend = client.placementDescription();
            final float[] floats = isFloat ? new float[elements] : null;
            final int[] ints = isFloat ? null : new int[elements];
            final float[] barrierFloat = new float[1];
            final int[] barrierInt = new int[1];
            result.tatsInOrderNs = new long[iterations];
            for (int round = 0; round < warmups + iterations; round++)
            {
                if (isFloat && peerValues)
                {
                    fillPeerValues(floats, rank);
                }
                else if (isFloat)
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
                final long cpuBeforeNs = cpuClock.nanos();
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
                final long cpuAfterNs = cpuClock.nanos();
                if (round == 0)
                {
                    result.firstTatNs = tatNs;
                }
                final long retransmitted = counters.retransmissions() - retransmissionsBefore;

                final String error = !isFloat ? KnownTensors.verifyIntSum(ints, worldSize, round) : peerValues ?
                    verifyPeerValues(floats, worldSize) : KnownTensors.verifyFloat(floats, worldSize, round, lanes, ReduceOp.SUM);
                if (error != null)
                {
                    result.wrongResult = "rank " + rank + " round " + round + ": " + error;
                    break;
                }
                result.roundsChecked++;
                if (round >= warmups)
                {
                    result.tatNs.recordValue(Math.min(tatNs, HIGHEST_TRACKABLE_NS));
                    result.tatsInOrderNs[result.timed++] = tatNs;
                    result.retransmissionsTimed += retransmitted;
                    result.timedCpuNs = result.timedCpuNs < 0 || cpuBeforeNs < 0 || cpuAfterNs < 0 ?
                        -1 : result.timedCpuNs + cpuAfterNs - cpuBeforeNs;
                }
            }
            result.retransmissionsTotal = counters.retransmissions();
            result.fastRetransmissionsTotal = counters.fastRetransmissions();
            result.tailProbesTotal = counters.tailProbes();
            result.probesTotal = counters.probesSent();
            result.nacksTotal = counters.nacksReceived();
            result.pendingsTotal = counters.pendingsReceived();
            result.packetsSent = counters.packetsSent();
            result.packetsReceived = counters.packetsReceived();
            result.staleResults = counters.staleResults();
            result.spuriousProbes = counters.spuriousProbes();
            result.macsInLanes = counters.macsInLanes();
            result.selectorWaits = counters.selectorWaits();
            result.coalescedSleeps = counters.coalescedSleeps();
            result.spuriousRetransmissions = counters.spuriousRetransmissions();
            result.smoothedRttNs = client.smoothedRttNs();
        }
        catch (final AllReduceException | IllegalArgumentException ex)
        {
            result.jobFailure = "rank " + rank + ": " + ex.getMessage();
        }
        return result;
    }

    /**
     * The float32 tensor of bench/rack's Gloo and MPI harnesses: element i of rank r is (r + 1) * (1 + i % 8).
     * The results of all three systems are then checked against the same sum. Filling and checking cost one
     * pass each, where {@link KnownTensors} hashes every element once per rank to check it: on 2 shared cores
     * that check took more CPU than the 1 MB all-reduce itself, and a rank checking early took it from ranks
     * still finishing theirs.
     */
    static void fillPeerValues(final float[] dst, final int rank)
    {
        final float factor = rank + 1;
        final int first = Math.min(CHECK_BLOCK, dst.length);
        for (int j = 0; j < first; j++)
        {
            dst[j] = factor * PATTERN[j];
        }
        // every block is the first one again (CHECK_BLOCK is a multiple of the pattern's 8): copied, which runs at
        // memory speed whichever compiler has this method (worker JVMs stop at C1 by default: the launcher's
        // SWITCHML_WORKER_JIT), as torch's fill does for the Gloo and MPI harnesses
        for (int from = first; from < dst.length; from += CHECK_BLOCK)
        {
            System.arraycopy(dst, 0, dst, from, Math.min(CHECK_BLOCK, dst.length - from));
        }
    }

    /**
     * Check a sum of {@link #fillPeerValues} tensors: n(n+1)/2 * (1 + i % 8) within the block floating point
     * bound n/f of a chunk whose largest element is 8n (no chunk's is larger, so none has a larger bound) plus
     * an ulp of the result.
     *
     * @return a description of the first element out of bound, or null when all are within it.
     */
    static String verifyPeerValues(final float[] result, final int worldSize)
    {
        final float factor = worldSize * (worldSize + 1) / 2.0f;
        final int exponent = BlockFloatingPoint.exponentOfMagnitudeBits(Float.floatToRawIntBits(8.0f * worldSize));
        final double bound = BlockFloatingPoint.errorBound(exponent, worldSize) + Math.ulp(8.0f * factor);
        final float[] expected = new float[CHECK_BLOCK];
        for (int j = 0; j < CHECK_BLOCK; j++)
        {
            expected[j] = factor * PATTERN[j];
        }
        for (int from = 0; from < result.length; from += CHECK_BLOCK)
        {
            final int count = Math.min(CHECK_BLOCK, result.length - from);
            // a block equal to the expected one bit for bit (these sums are exact in block floating point) passes on
            // Arrays.mismatch's word-wide compare, fast in C1's code too, where the Gloo and MPI harnesses compare
            // with torch.equal; any other block gets the bound below
            if (java.util.Arrays.mismatch(result, from, from + count, expected, 0, count) < 0)
            {
                continue;
            }
            // a max reduction without an early exit, against a precomputed block: 16 GB/s (1 MB) against 3.4 with the
            // pattern computed from the index (scratch measurement here); NaN propagates and fails the test below
            float maxError = 0;
            for (int j = 0; j < count; j++)
            {
                maxError = Math.max(maxError, Math.abs(result[from + j] - expected[j]));
            }
            if (!(maxError <= bound))
            {
                for (int j = 0; j < count; j++)
                {
                    if (!(Math.abs(result[from + j] - expected[j]) <= bound))
                    {
                        return "element " + (from + j) + " is " + result[from + j] + ", expected " + expected[j] +
                            " within " + bound;
                    }
                }
            }
        }
        return null;
    }
}
