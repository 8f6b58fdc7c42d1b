package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingDeque;

/**
 * The all-reduces of a {@link LocalGroup}: the n-th request of each local rank forms the n-th round; when all have
 * asked (for the same dtype, op and length; a disagreement fails the job naming the ranks), the group's thread adds the
 * other ranks' ranges into local rank 0's, chunk by chunk, and submits each chunk to the node's job as soon as it is
 * summed; each result is copied back into the other ranks' ranges when it arrives, ahead of any further sum, and a
 * round's requests complete when their last chunk is back. Rounds overlap as pipelined requests do (a DDP bucket is
 * summed while the previous one is on the wire), and every node submits its chunks in the same order.
 * <p>
 * One thread, one task at a time: results to copy back are queued at the front, rounds and chunks to sum at the back,
 * so a round's and a chunk's state is touched by that thread alone. A task that throws anything, an {@code Error}
 * too, fails its round: a round left incomplete would hang its ranks' replies. Once the rounds have failed (a disagreement, a
 * failed chunk, a rank gone), queued and later requests fail with the first message.
 * <p>
 * A round that some local ranks asked for and others did not within the job's progress timeout fails the rounds and
 * aborts the node's job, naming the ranks that did not ask: nothing of that round reaches the appliance, so no slot
 * timeout there would ever end the wait (on a single node nothing would), and a rank that skipped an all-reduce or
 * hangs must not hang the others.
 */
final class LocalRounds
{
    /** Bytes summed before they are submitted: small enough to overlap, large enough to keep the stream busy. */
    static final long CHUNK_BYTES = 8L << 20;
    private static final Runnable STOP = () -> { };

    private final String jobName;
    private final int localWorld;
    private final int worldSize;
    private final int firstRank;
    private final DirectLink node;
    private final long chunkBytes;
    private final long formTimeoutNs;
    private final List<ArrayDeque<Pending>> queues = new ArrayList<>();
    /** The group thread's work: results to copy back at the front, rounds and chunks to sum at the back. */
    private final LinkedBlockingDeque<Runnable> work = new LinkedBlockingDeque<>();
    private volatile String failure;
    private boolean stopped;

    /**
     * @param firstRank     the rank of local rank 0.
     * @param worldSize     ranks of the job (an average divides by it).
     * @param node          the node's job, which the chunks go to.
     * @param chunkBytes    bytes summed before they are submitted, a multiple of 4 ({@link #CHUNK_BYTES}).
     * @param formTimeoutMs how long a round may wait for its last local rank's request (the job's progress timeout).
     */
    LocalRounds(final String jobName, final int firstRank, final int localWorld, final int worldSize,
        final DirectLink node, final long chunkBytes, final long formTimeoutMs)
    {
        if (chunkBytes < Float.BYTES || chunkBytes % Float.BYTES != 0)
        {
            throw new IllegalArgumentException("chunk bytes must be a positive multiple of 4: " + chunkBytes);
        }
        this.jobName = jobName;
        this.firstRank = firstRank;
        this.localWorld = localWorld;
        this.worldSize = worldSize;
        this.node = node;
        this.chunkBytes = chunkBytes;
        this.formTimeoutNs = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(formTimeoutMs);
        for (int i = 0; i < localWorld; i++)
        {
            queues.add(new ArrayDeque<>());
        }
    }

    /**
     * Start the thread (when the group forms).
     *
     * @throws OutOfMemoryError when no thread can be started.
     */
    void startThread()
    {
        Thread.ofPlatform().daemon().name("switchml-local-sum-" + jobName).start(this::runWork);
    }

    /**
     * @return the first failure, or null.
     */
    String failure()
    {
        return failure;
    }

    /**
     * Fail: queued requests and every later one fail with the (first) message.
     */
    synchronized void fail(final String message)
    {
        if (failure == null)
        {
            failure = message;
        }
        for (final ArrayDeque<Pending> queue : queues)
        {
            Pending pending;
            while ((pending = queue.poll()) != null)
            {
                pending.done.completeExceptionally(new AllReduceException(failure));
            }
        }
    }

    /**
     * Stop the thread once every task queued so far has run (they fail fast once the rounds have failed).
     */
    synchronized void stop()
    {
        if (!stopped)
        {
            stopped = true;
            work.addLast(STOP);
        }
    }

    /**
     * A local rank's all-reduce of a range of its shared memory, in place.
     *
     * @param ints int32 (sum, wrapping) instead of float32.
     * @return completes when the result is in the range.
     */
    CompletableFuture<Void> submit(final int localRank, final MemorySegment range, final boolean ints, final ReduceOp op)
    {
        final Pending pending = new Pending(range, ints, op, new CompletableFuture<>(), System.nanoTime());
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
            work.addLast(() -> begin(round));
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
            final long checkNs = Math.max(1_000_000L, Math.min(formTimeoutNs / 4, 1_000_000_000L));
            while (true)
            {
                final Runnable task = work.pollFirst(checkNs, java.util.concurrent.TimeUnit.NANOSECONDS);
                if (task == STOP)
                {
                    return;
                }
                if (task != null)
                {
                    task.run();
                }
                checkFormation(System.nanoTime());
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Fail the rounds when the oldest round still forming has waited longer than the timeout for a local rank.
     */
    void checkFormation(final long nowNs)
    {
        final String stalled;
        synchronized (this)
        {
            if (failure != null)
            {
                return;
            }
            long oldestNs = 0;
            int oldest = -1;
            boolean someMissing = false;
            for (int i = 0; i < localWorld; i++)
            {
                final Pending head = queues.get(i).peek();
                if (head == null)
                {
                    someMissing = true;
                }
                else if (oldest < 0 || head.queuedNs - oldestNs < 0)
                {
                    oldestNs = head.queuedNs;
                    oldest = i;
                }
            }
            if (oldest < 0 || !someMissing || nowNs - oldestNs <= formTimeoutNs)
            {
                return;
            }
            final StringBuilder missing = new StringBuilder();
            for (int i = 0; i < localWorld; i++)
            {
                if (queues.get(i).isEmpty())
                {
                    missing.append(missing.isEmpty() ? "" : ", ").append(firstRank + i);
                }
            }
            stalled = "ranks [" + missing + "] of job " + jobName + " on this host did not ask for their next all-reduce " +
                "within " + formTimeoutNs / 1_000_000 + " ms of rank " + (firstRank + oldest) + " (the progress timeout): " +
                "a rank hangs, or the ranks did not issue the same all-reduces in the same order";
        }
        // the other nodes wait for this node's chunks: they learn of it from the job
        node.abort(stalled);
        fail(stalled);
    }

    /**
     * A round whose requests have all come: checked, then one sum task per chunk, queued behind the earlier rounds'.
     */
    private void begin(final Round round)
    {
        try
        {
            requireNotFailed();
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
            requireNotFailed();
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
                final MemorySegment[] copies = new MemorySegment[localWorld - 1];
                for (int i = 1; i < localWorld; i++)
                {
                    copies[i - 1] = requests[i].range.asSlice(offset, length);
                }
                LocalSum.scaleAndCopy(result, (float)(1.0 / worldSize), copies);
            }
            else
            {
                for (int i = 1; i < localWorld; i++)
                {
                    MemorySegment.copy(result, 0, requests[i].range, offset, length);
                }
            }
            if (--round.chunksLeft == 0)
            {
                round.complete();
            }
        }
        catch (final RuntimeException | Error ex)
        {
            failRound(round, ex);
        }
    }

    /**
     * @throws AllReduceException once the rounds have failed: a rank may have gone (its memory unmapped), and the
     *                            other nodes hear of it from the job.
     */
    private void requireNotFailed()
    {
        final String failed = failure;
        if (failed != null)
        {
            throw new AllReduceException(failed);
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

    private record Pending(MemorySegment range, boolean ints, ReduceOp op, CompletableFuture<Void> done, long queuedNs)
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
}
