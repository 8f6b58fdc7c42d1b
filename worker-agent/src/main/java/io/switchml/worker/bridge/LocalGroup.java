package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerContext;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The ranks of one job that share a host agent, summed on this host and sent to the appliance as one worker of the
 * job (hierarchical all-reduce: the node's ranks are reduced in memory, the nodes through the appliance, as NCCL and
 * Horovod reduce a node's GPUs before the network). The appliance sees {@code world / localWorld} workers; each moves
 * one copy of the tensor instead of one per rank, so a host's link and its cores carry a {@code localWorld}-th of the
 * packets.
 * <p>
 * This class is the group's membership: it forms when all {@code localWorld} ranks have opened a session, within the
 * join timeout of the first (ranks must agree on the job's appliance, backend, geometry and world), and local rank 0's
 * session then joins the node's job for all of them. Every rank keeps its own session and shared memory; their
 * all-reduces are {@link LocalRounds}. A rank that leaves with {@code CLOSE} leaves the node's job (as an ungrouped
 * rank leaves its own), and the node's other ranks fail naming it; a rank lost mid-job aborts the job naming it, for
 * every node.
 */
final class LocalGroup
{
    private final String jobName;
    private final int localWorld;
    private final int worldSize;
    private final int firstRank;
    private final String signature;
    private final long formDeadlineNs;
    private final DirectLink node;
    private final LocalRounds rounds;
    private final Member[] members;
    private final CompletableFuture<Void> joined = new CompletableFuture<>();
    private int present;
    private int left;
    private volatile boolean settled;

    /**
     * @param first      the context of the rank that opened the group: its job, world and local world.
     * @param node       the node's job (one worker per node), joined by local rank 0's session.
     * @param chunkBytes bytes summed before they are submitted ({@link LocalRounds#CHUNK_BYTES}).
     */
    LocalGroup(final BridgeContext first, final DirectLink node, final long chunkBytes)
    {
        this.jobName = first.worker().jobName();
        this.localWorld = first.localWorld();
        this.worldSize = first.worker().worldSize();
        this.firstRank = first.worker().rank() - first.localRank();
        this.signature = signature(first);
        this.formDeadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(first.worker().joinTimeoutMs());
        this.node = node;
        this.members = new Member[localWorld];
        this.rounds = new LocalRounds(jobName, firstRank, localWorld, worldSize, node, chunkBytes,
            first.worker().progressTimeoutMs());
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
        final String failure = rounds.failure();
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
                rounds.startThread();
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
        while (present < localWorld && rounds.failure() == null)
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
        final String failure = rounds.failure();
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
        rounds.fail(message);
        settled = true;
        joined.completeExceptionally(new AllReduceException(rounds.failure()));
        notifyAll();
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
            if (left == present)
            {
                rounds.stop();
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
            return rounds.submit(localRank, range, false, op);
        }

        @Override
        public CompletableFuture<Void> allReduceInts(final MemorySegment range)
        {
            node.requireInt32();
            return rounds.submit(localRank, range, true, ReduceOp.SUM);
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
