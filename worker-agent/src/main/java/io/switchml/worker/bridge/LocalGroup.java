package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerContext;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.TimeUnit;

/**
 * The ranks of one job that share a host agent, summed on this host and sent to the appliance as one worker of the
 * job (hierarchical all-reduce: the node's ranks are reduced in memory, the nodes through the appliance, as NCCL and
 * Horovod reduce a node's GPUs before the network). The appliance sees {@code world / localWorld} workers; each moves
 * one copy of the tensor instead of one per rank, so a host's link and its cores carry a {@code localWorld}-th of the
 * packets.
 * <p>
 * Every rank keeps its own session and shared memory. The n-th all-reduce of each local rank forms the group's n-th
 * round: when all have asked (for the same dtype, op and length; a disagreement fails the job naming the ranks), the
 * group's thread adds the other ranks' ranges into local rank 0's, chunk by chunk, and submits each chunk to the
 * node's job as soon as it is summed; each result is copied back into the other ranks' ranges when it arrives, ahead
 * of any further sum, and a round's requests complete when their last chunk is back. Rounds overlap as pipelined
 * requests do (a DDP bucket is summed while the previous one is on the wire), in one order on every node.
 * <p>
 * The group forms when all {@code localWorld} ranks have opened a session, within the join timeout of the first;
 * local rank 0's session then joins the node's job for all of them. A rank that leaves with {@code CLOSE} leaves the
 * node's job (as an ungrouped rank leaves its own), and the node's other ranks fail naming it; a rank lost mid-job
 * aborts the job naming it, for every node.
 */
final class LocalGroup
{
    /** Bytes summed before they are submitted: small enough to overlap, large enough to keep the stream busy. */
    static final long CHUNK_BYTES = 8L << 20;

    private final String jobName;
    private final int localWorld;
    private final int worldSize;
    private final int firstRank;
    private final String signature;
    private final long formDeadlineNs;
    private final DirectLink node;
    private final long chunkBytes;
    private final Member[] members;
    private final List<ArrayDeque<Pending>> queues = new ArrayList<>();
    private final CompletableFuture<Void> joined = new CompletableFuture<>();
    /** The group thread's work: results to copy back at the front, rounds and chunks to sum at the back. */
    private final LinkedBlockingDeque<Runnable> work = new LinkedBlockingDeque<>();
    private int present;
    private int left;
    private volatile boolean settled;
    private volatile String failure;
    private boolean stopped;

    /**
     * @param first      the context of the rank that opened the group: its job, world and local world.
     * @param node       the node's job (one worker per node), joined by local rank 0's session.
     * @param chunkBytes bytes summed before they are submitted, a multiple of 4 ({@link #CHUNK_BYTES}).
     */
    LocalGroup(final BridgeContext first, final DirectLink node, final long chunkBytes)
    {
        if (chunkBytes < Float.BYTES || chunkBytes % Float.BYTES != 0)
        {
            throw new IllegalArgumentException("chunk bytes must be a positive multiple of 4: " + chunkBytes);
        }
        this.chunkBytes = chunkBytes;
        this.jobName = first.worker().jobName();
        this.localWorld = first.localWorld();
        this.worldSize = first.worker().worldSize();
        this.firstRank = first.worker().rank() - first.localRank();
        this.signature = signature(first);
        this.formDeadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(first.worker().joinTimeoutMs());
        this.node = node;
        this.members = new Member[localWorld];
        for (int i = 0; i < localWorld; i++)
        {
            queues.add(new ArrayDeque<>());
        }
    }

    /**
     * What the ranks of a group must agree on, besides the job and token (which find the group): the job's
     * appliance, backend, geometry and world.
     */
    static String signature(final BridgeContext context)
    {
        final WorkerContext worker = context.worker();
        return "appliance=" + worker.applianceHost() + ":" + worker.controlPort() + " backend=" + worker.backend() +
            " k=" + worker.lanes() + " s=" + worker.slots() + " mac=" + (worker.macEnabled() ? "on" : "off") +
            " world=" + worker.worldSize() + " localWorld=" + context.localWorld() +
            " int32=" + (context.int32Worker() == null ? "off" : "on");
    }

    /**
     * Add a rank's session to the group; the last one starts the group's thread.
     *
     * @return its link to the job, to {@link JobLink#join} (which waits for the group to form).
     * @throws IllegalArgumentException when the rank is taken, disagrees with the group, or the group failed.
     */
    synchronized Member add(final BridgeContext context)
    {
        final int localRank = context.localRank();
        final int rank = context.worker().rank();
        if (failure != null || settled)
        {
            throw new IllegalArgumentException(failure != null ? failure :
                "the ranks of job " + jobName + " on this host have formed their group already");
        }
        if (rank - localRank != firstRank)
        {
            throw new IllegalArgumentException("rank " + rank + " (local rank " + localRank + ") is not on the node of " +
                "ranks " + firstRank + ".." + (firstRank + localWorld - 1) + " that opened job " + jobName +
                " on this host agent");
        }
        if (members[localRank] != null)
        {
            throw new IllegalArgumentException("local rank " + localRank + " (rank " + rank + ") of job " + jobName +
                " has a session on this host agent already");
        }
        final String mine = signature(context);
        if (!signature.equals(mine))
        {
            throw new IllegalArgumentException("rank " + rank + " of job " + jobName + " asks for " + mine +
                ", the ranks already on this host agent for " + signature);
        }
        if (present + 1 == localWorld)
        {
            // started here, so that a missing thread refuses this OPEN instead of hanging the group's requests
            try
            {
                Thread.ofPlatform().daemon().name("switchml-local-sum-" + jobName).start(this::runWork);
            }
            catch (final OutOfMemoryError ex)
            {
                throw new IllegalArgumentException("busy: this host agent cannot start a thread for job " + jobName);
            }
            settled = true;
        }
        final Member member = new Member(localRank);
        members[localRank] = member;
        present++;
        notifyAll();
        return member;
    }

    /**
     * @return whether the group has formed, or failed to: a later rank of the same job starts a new group.
     */
    boolean settled()
    {
        return settled;
    }

    private synchronized void awaitMembers(final int localRank)
    {
        while (present < localWorld && failure == null)
        {
            final long leftNs = formDeadlineNs - System.nanoTime();
            if (leftNs <= 0)
            {
                final StringBuilder missing = new StringBuilder();
                for (int i = 0; i < localWorld; i++)
                {
                    if (members[i] == null)
                    {
                        missing.append(missing.isEmpty() ? "" : ", ").append(firstRank + i);
                    }
                }
                fail("rank(s) " + missing + " of job " + jobName + " opened no session with this host agent within " +
                    "the join timeout, while local ranks of the same node did: a node's ranks must share one host " +
                    "agent (or send no localWorld, for one worker per rank)");
                break;
            }
            try
            {
                TimeUnit.NANOSECONDS.timedWait(this, leftNs);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                fail("local rank " + localRank + " of job " + jobName + " was interrupted while its group formed");
            }
        }
        if (failure != null)
        {
            throw new AllReduceException(failure);
        }
    }

    /**
     * Fail the group: queued requests and every later one fail with the message; waiting ranks wake.
     */
    private synchronized void fail(final String message)
    {
        if (failure == null)
        {
            failure = message;
        }
        settled = true;
        joined.completeExceptionally(new AllReduceException(failure));
        for (final ArrayDeque<Pending> queue : queues)
        {
            Pending pending;
            while ((pending = queue.poll()) != null)
            {
                pending.done.completeExceptionally(new AllReduceException(failure));
            }
        }
        notifyAll();
    }

    private CompletableFuture<Void> submit(final int localRank, final Pending pending)
    {
        final Round round;
        synchronized (this)
        {
            if (failure != null)
            {
                return CompletableFuture.failedFuture(new AllReduceException(failure));
            }
            queues.get(localRank).add(pending);
            for (final ArrayDeque<Pending> queue : queues)
            {
                if (queue.isEmpty())
                {
                    return pending.done;
                }
            }
            final Pending[] requests = new Pending[localWorld];
            for (int i = 0; i < localWorld; i++)
            {
                requests[i] = queues.get(i).poll();
            }
            round = new Round(requests);
            // queued under the lock, so that the last rank's leave cannot put STOP ahead of it
            work.addLast(() -> start(round));
        }
        return pending.done;
    }

    /**
     * The group's thread: copies back first, then sums, one task at a time, until the last rank has
     * left.
     */
    private void runWork()
    {
        try
        {
            while (true)
            {
                final Runnable task = work.takeFirst();
                if (task == STOP)
                {
                    return;
                }
                task.run();
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    private static final Runnable STOP = () -> { };

    /**
     * A round whose requests have all come: checked, then one sum task per chunk, queued behind the earlier rounds'.
     */
    private void start(final Round round)
    {
        try
        {
            final String failed = failure;
            if (failed != null)
            {
                throw new AllReduceException(failed);
            }
            requireAgreement(round.requests);
            final long bytes = round.requests[0].range.byteSize();
            round.chunksLeft = (int)((bytes + chunkBytes - 1) / chunkBytes);
            if (round.chunksLeft == 0)
            {
                round.complete();
                return;
            }
            for (long offset = 0; offset < bytes; offset += chunkBytes)
            {
                final long chunkOffset = offset;
                final long length = Math.min(chunkBytes, bytes - offset);
                work.addLast(() -> sumAndSubmit(round, chunkOffset, length));
            }
        }
        catch (final RuntimeException | Error ex)
        {
            // an Error too: a round left incomplete would hang its ranks' replies
            failRound(round, ex);
        }
    }

    private void sumAndSubmit(final Round round, final long offset, final long length)
    {
        if (round.failed)
        {
            return;
        }
        try
        {
            final String failed = failure;
            if (failed != null)
            {
                // a rank has gone: its memory may be unmapped, and the other nodes hear of it from the job
                throw new AllReduceException(failed);
            }
            final Pending[] requests = round.requests;
            final MemorySegment chunk = requests[0].range.asSlice(offset, length);
            final MemorySegment[] others = new MemorySegment[localWorld - 1];
            for (int i = 1; i < localWorld; i++)
            {
                others[i - 1] = requests[i].range.asSlice(offset, length);
            }
            LocalSum.addInto(chunk, others, requests[0].ints);
            final CompletableFuture<Void> result = requests[0].ints ? node.allReduceInts(chunk) :
                node.allReduceFloats(chunk, ReduceOp.SUM);
            // completed on the job's I/O thread: the copy goes to the group's thread, ahead of further sums
            result.whenComplete((ignore, error) -> work.addFirst(() -> copyBack(round, offset, length, error)));
        }
        catch (final RuntimeException | Error ex)
        {
            // an Error too: a round left incomplete would hang its ranks' replies
            failRound(round, ex);
        }
    }

    private void copyBack(final Round round, final long offset, final long length, final Throwable error)
    {
        if (round.failed)
        {
            return;
        }
        if (error != null)
        {
            failRound(round, error instanceof java.util.concurrent.CompletionException && error.getCause() != null ?
                error.getCause() : error);
            return;
        }
        try
        {
            final Pending[] requests = round.requests;
            final MemorySegment result = requests[0].range.asSlice(offset, length);
            if (requests[0].op == ReduceOp.AVERAGE)
            {
                LocalSum.scaleFloats(result, (float)(1.0 / worldSize));
            }
            for (int i = 1; i < localWorld; i++)
            {
                MemorySegment.copy(result, 0, requests[i].range, offset, length);
            }
            if (--round.chunksLeft == 0)
            {
                round.complete();
            }
        }
        catch (final RuntimeException | Error ex)
        {
            // an Error too: a round left incomplete would hang its ranks' replies
            failRound(round, ex);
        }
    }

    private void requireAgreement(final Pending[] round)
    {
        for (final Pending pending : round)
        {
            if (pending.ints != round[0].ints || pending.op != round[0].op ||
                pending.range.byteSize() != round[0].range.byteSize())
            {
                final StringBuilder asked = new StringBuilder();
                for (int i = 0; i < round.length; i++)
                {
                    asked.append(i == 0 ? "" : "; ").append("rank ").append(firstRank + i).append(": ")
                        .append(round[i].range.byteSize() / Float.BYTES).append(round[i].ints ? " int32" : " float32")
                        .append(' ').append(round[i].op.name().toLowerCase(java.util.Locale.ROOT));
                }
                throw new IllegalArgumentException("the ranks of job " + jobName + " on this host asked for " +
                    "different all-reduces at the same point of their sequence (" + asked + ")");
            }
        }
    }

    private void failRound(final Round round, final Throwable cause)
    {
        if (round.failed)
        {
            return;
        }
        round.failed = true;
        final RuntimeException failed = cause instanceof AllReduceException || cause instanceof IllegalArgumentException ?
            (RuntimeException)cause : new AllReduceException(String.valueOf(cause), cause);
        if (!(cause instanceof AllReduceException))
        {
            // failed here, mid-sequence: the other nodes would wait for chunks this node will not send
            node.abort(failed.getMessage());
        }
        for (final Pending pending : round.requests)
        {
            pending.done.completeExceptionally(failed);
        }
        fail(failed.getMessage());
    }

    private void leave(final int localRank, final boolean lost, final String reason)
    {
        synchronized (this)
        {
            if (members[localRank] == null || members[localRank].left)
            {
                return;
            }
            members[localRank].left = true;
            left++;
        }
        if (lost)
        {
            node.abort(reason);
        }
        fail(reason);
        // the first rank out leaves the node's job, as an ungrouped rank leaves its own (its calls in flight fail, and
        // their copies, queued ahead, fail their rounds); the last one stops the thread behind every queued task, which
        // fails fast now
        node.close();
        synchronized (this)
        {
            if (left == present && !stopped)
            {
                stopped = true;
                work.addLast(STOP);
            }
        }
    }

    private record Pending(MemorySegment range, boolean ints, ReduceOp op, CompletableFuture<Void> done)
    {
    }

    /**
     * One all-reduce of every local rank; touched by the group's thread only after it is queued.
     */
    private static final class Round
    {
        private final Pending[] requests;
        private int chunksLeft;
        private boolean failed;

        private Round(final Pending[] requests)
        {
            this.requests = requests;
        }

        private void complete()
        {
            for (final Pending pending : requests)
            {
                pending.done.complete(null);
            }
        }
    }

    /**
     * One rank's link to the job through its group.
     */
    final class Member implements JobLink
    {
        private final int localRank;
        private boolean left;

        private Member(final int localRank)
        {
            this.localRank = localRank;
        }

        @Override
        public void join()
        {
            awaitMembers(localRank);
            if (localRank == 0)
            {
                try
                {
                    node.join();
                    joined.complete(null);
                }
                catch (final RuntimeException ex)
                {
                    fail(ex.getMessage());
                    throw ex;
                }
            }
            try
            {
                joined.join();
            }
            catch (final java.util.concurrent.CompletionException ex)
            {
                throw ex.getCause() instanceof RuntimeException cause ? cause : ex;
            }
        }

        @Override
        public CompletableFuture<Void> allReduceFloats(final MemorySegment range, final ReduceOp op)
        {
            return submit(localRank, new Pending(range, false, op, new CompletableFuture<>()));
        }

        @Override
        public CompletableFuture<Void> allReduceInts(final MemorySegment range)
        {
            if (!node.servesInt32())
            {
                throw new IllegalArgumentException("this bridge serves no int32 job (started without one)");
            }
            return submit(localRank, new Pending(range, true, ReduceOp.SUM, new CompletableFuture<>()));
        }

        @Override
        public void abort(final String reason)
        {
            leave(localRank, true, reason);
        }

        @Override
        public void appendStats(final StringBuilder reply)
        {
            node.appendStats(reply);
        }

        @Override
        public String transportDescription()
        {
            return node.transportDescription();
        }

        @Override
        public String placementDescription()
        {
            return node.placementDescription() + "; ranks " + firstRank + ".." + (firstRank + localWorld - 1) +
                " summed on this host and sent as one worker (node " + firstRank / localWorld + " of " +
                worldSize / localWorld + ")";
        }

        @Override
        public void close()
        {
            leave(localRank, false, "rank " + (firstRank + localRank) + " of job " + jobName + " ended its session " +
                "on this host agent, and the node's other ranks all-reduce through the same group");
        }
    }
}
