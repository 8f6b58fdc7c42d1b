package io.switchml.worker.bridge;

import io.switchml.worker.ReduceOp;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;

/**
 * How a bridge reaches its job: straight through its own {@link io.switchml.worker.WorkerClient}s
 * ({@link DirectLink}), or as one local rank of a {@link LocalGroup} whose ranks on this host are summed here and
 * sent to the appliance once.
 */
interface JobLink
{
    /**
     * Join the job, blocking until it is joined (every rank, or every node's group, has joined).
     *
     * @throws io.switchml.worker.AllReduceException when the join is refused or times out, or the link was closed.
     */
    void join();

    /**
     * All-reduce a float32 range of the bridge's shared memory in place.
     *
     * @param range native-order float32 elements; not touched by the caller until the future completes.
     * @return completes when the result is in {@code range}.
     */
    CompletableFuture<Void> allReduceFloats(MemorySegment range, ReduceOp op);

    /**
     * All-reduce an int32 range in place (sum, wrapping); the int32 job is joined on the first call.
     */
    CompletableFuture<Void> allReduceInts(MemorySegment range);

    /**
     * The client of this link went away mid-job: abort the job with the reason, so every rank fails naming it.
     */
    void abort(String reason);

    /**
     * Append the job's worker counters to a {@code STATS} reply.
     */
    void appendStats(StringBuilder reply);

    /**
     * @return the joined job's packet I/O, for the start-up report; empty before {@link #join}.
     */
    String transportDescription();

    /**
     * @return where the appliance aggregates the job (and, for a group, how the host's ranks are summed).
     */
    String placementDescription();

    /**
     * Leave the job (pending calls fail). Safe to call more than once.
     */
    void close();
}
