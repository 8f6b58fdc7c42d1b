package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The ranks of one job that share a host agent, summed on this host and sent to the appliance as one worker of the
 * job (hierarchical all-reduce: the node's ranks are reduced in memory, the nodes through the appliance, as NCCL and
 * Horovod reduce a node's GPUs before the network). The appliance sees {@code world / localWorld} workers; each moves
 * one copy of the tensor instead of one per rank, so a host's link and its cores carry a {@code localWorld}-th of the
 * packets.
 * <p>
 * Every rank keeps its own session and shared memory. The n-th all-reduce of each local rank forms the group's n-th
 * round: when all have asked (for the same dtype, op and length; a disagreement fails the job naming the ranks), one
 * thread of the group adds the other ranks' ranges into local rank 0's, chunk by chunk, submits each chunk to the
 * node's job as soon as it is summed (so the sum of the next chunk overlaps the previous one on the wire), and copies
 * each result back into the other ranks' ranges when it arrives.
 * <p>
 * The group forms when all {@code localWorld} ranks have opened a session, within the join timeout of the first;
 * local rank 0's session then joins the node's job for all of them. A rank that leaves ends the group for the others
 * (they fail naming it); a rank lost mid-job aborts the job, as an ungrouped rank does. The job is left when the last
 * rank's session ends.
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
    private final String token;
    private final long formDeadlineNs;
    private final DirectLink node;
    private final long chunkBytes;
    private final Member[] members;
    private final List<ArrayDeque<Pending>> queues = new ArrayList<>();
    private final CompletableFuture<Void> joined = new CompletableFuture<>();
    private final ExecutorService summer;
    private int present;
    private int left;
    private volatile boolean settled;
    private String failure;

    /**
     * @param first     the context of the rank that opened the group: its job, world and local world.
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
        this.token = first.worker().token();
        this.formDeadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(first.worker().joinTimeoutMs());
        this.node = node;
        this.members = new Member[localWorld];
        for (int i = 0; i < localWorld; i++)
        {
            queues.add(new ArrayDeque<>());
        }
        this.summer = Executors.newSingleThreadExecutor(runnable -> Thread.ofPlatform().daemon()
            .name("switchml-local-sum-" + jobName).unstarted(runnable));
    }

    /**
     * What the ranks of a group must agree on, besides the token: the job's appliance, backend, geometry and world.
     */
    static String signature(final BridgeContext context)
    {
        final io.switchml.worker.WorkerContext worker = context.worker();
        return "appliance=" + worker.applianceHost() + ":" + worker.controlPort() + " backend=" + worker.backend() +
            " k=" + worker.lanes() + " s=" + worker.slots() + " mac=" + (worker.macEnabled() ? "on" : "off") +
            " world=" + worker.worldSize() + " localWorld=" + context.localWorld() +
            " int32=" + (context.int32Worker() == null ? "off" : "on");
    }

    /**
     * Add a rank's session to the group.
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
        if (!Objects.equals(token, context.worker().token()))
        {
            throw new IllegalArgumentException("rank " + rank + "'s token differs from that of the ranks of job " +
                jobName + " already on this host agent");
        }
        final String mine = signature(context);
        if (!signature.equals(mine))
        {
            throw new IllegalArgumentException("rank " + rank + " of job " + jobName + " asks for " + mine +
                ", the ranks already on this host agent for " + signature);
        }
        final Member member = new Member(localRank);
        members[localRank] = member;
        present++;
        if (present == localWorld)
        {
            settle();
        }
        notifyAll();
        return member;
    }

    private void settle()
    {
        settled = true;
    }

    /**
     * @return whether the group has formed, or failed to: a later rank of the same name starts a new group.
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
        settle();
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
        final Pending[] round;
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
            round = new Pending[localWorld];
            for (int i = 0; i < localWorld; i++)
            {
                round[i] = queues.get(i).poll();
            }
        }
        summer.execute(() -> run(round));
        return pending.done;
    }

    /**
     * One round, on the group's thread: sum, submit chunk by chunk, copy each result back to the other ranks.
     */
    private void run(final Pending[] round)
    {
        try
        {
            requireAgreement(round);
            final boolean ints = round[0].ints;
            final long bytes = round[0].range.byteSize();
            final MemorySegment sum = round[0].range;
            final ArrayDeque<Chunk> inFlight = new ArrayDeque<>();
            final MemorySegment[] others = new MemorySegment[localWorld - 1];
            for (long offset = 0; offset < bytes; offset += chunkBytes)
            {
                final long length = Math.min(chunkBytes, bytes - offset);
                final MemorySegment chunk = sum.asSlice(offset, length);
                for (int i = 1; i < localWorld; i++)
                {
                    others[i - 1] = round[i].range.asSlice(offset, length);
                }
                LocalSum.addInto(chunk, others, ints);
                inFlight.add(new Chunk(offset, length,
                    ints ? node.allReduceInts(chunk) : node.allReduceFloats(chunk, ReduceOp.SUM)));
                while (!inFlight.isEmpty() && inFlight.peek().done.isDone())
                {
                    copyBack(round, inFlight.poll());
                }
            }
            while (!inFlight.isEmpty())
            {
                copyBack(round, inFlight.poll());
            }
            for (final Pending pending : round)
            {
                pending.done.complete(null);
            }
        }
        catch (final CompletionException ex)
        {
            failRound(round, ex.getCause() == null ? ex : ex.getCause());
        }
        catch (final RuntimeException ex)
        {
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

    private void copyBack(final Pending[] round, final Chunk chunk)
    {
        chunk.done.join();
        final MemorySegment result = round[0].range.asSlice(chunk.offset, chunk.length);
        if (round[0].op == ReduceOp.AVERAGE)
        {
            LocalSum.scaleFloats(result, (float)(1.0 / worldSize));
        }
        for (int i = 1; i < localWorld; i++)
        {
            MemorySegment.copy(result, 0, round[i].range, chunk.offset, chunk.length);
        }
    }

    private void failRound(final Pending[] round, final Throwable cause)
    {
        final RuntimeException failed = cause instanceof AllReduceException || cause instanceof IllegalArgumentException ?
            (RuntimeException)cause : new AllReduceException(String.valueOf(cause.getMessage()), cause);
        if (!(failed instanceof AllReduceException))
        {
            // failed here, mid-sequence: the other nodes would wait for chunks this node will not send
            node.abort(failed.getMessage());
        }
        for (final Pending pending : round)
        {
            pending.done.completeExceptionally(failed);
        }
        fail(failed.getMessage());
    }

    private void leave(final int localRank)
    {
        synchronized (this)
        {
            if (members[localRank] == null || members[localRank].left)
            {
                return;
            }
            members[localRank].left = true;
            left++;
            fail("rank " + (firstRank + localRank) + " of job " + jobName + " ended its session on this host " +
                "agent, and the node's other ranks all-reduce through the same group");
            if (left < present)
            {
                return;
            }
        }
        // the last rank out leaves the node's job
        summer.shutdown();
        node.close();
    }

    /**
     * @return ranks per node in this group.
     */
    int localWorld()
    {
        return localWorld;
    }

    private record Pending(MemorySegment range, boolean ints, ReduceOp op, CompletableFuture<Void> done)
    {
    }

    private record Chunk(long offset, long length, CompletableFuture<Void> done)
    {
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
            catch (final CompletionException ex)
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
            return submit(localRank, new Pending(range, true, ReduceOp.SUM, new CompletableFuture<>()));
        }

        @Override
        public void abort(final String reason)
        {
            node.abort(reason);
            fail(reason);
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
            leave(localRank);
        }
    }
}
