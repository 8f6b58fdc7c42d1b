package io.switchml.worker;

import org.agrona.concurrent.ManyToOneConcurrentArrayQueue;

/**
 * One I/O agent's view of the client's stream of submitted tensors: the queue the submitting threads fill, and the
 * window of submissions the agent has taken and not finished, in stream order. Each of the agent's slots keeps a
 * cursor into the window, so that finding the submission that holds a slot's next chunk costs a step or two, not a
 * search. Agent thread only, except {@link #offer}.
 */
final class SubmissionWindow
{
    private final ManyToOneConcurrentArrayQueue<Submission> inbox;
    private final Submission[] window;
    private final int mask;
    private final long[] cursor;
    private long head;
    private long tail;
    private long streamEnd;

    /**
     * @param capacity   submissions in the queue and in the window, a power of two.
     * @param localSlots slots of the agent, one cursor each.
     */
    SubmissionWindow(final int capacity, final int localSlots)
    {
        inbox = new ManyToOneConcurrentArrayQueue<>(capacity);
        window = new Submission[capacity];
        mask = capacity - 1;
        cursor = new long[localSlots];
    }

    /**
     * From the client's publishing thread (under its submission lock).
     *
     * @return false when the queue is full.
     */
    boolean offer(final Submission submission)
    {
        return inbox.offer(submission);
    }

    /**
     * Take up to {@code budget} queued submissions into the window, as far as it has room.
     *
     * @return submissions taken.
     */
    int poll(final int budget)
    {
        int polled = 0;
        while (polled < budget && tail - head <= mask)
        {
            final Submission submission = inbox.poll();
            if (submission == null)
            {
                break;
            }
            window[(int)(tail & mask)] = submission;
            tail++;
            streamEnd = submission.endChunk;
            polled++;
        }
        return polled;
    }

    /**
     * @return the stream chunk after the last one submitted so far.
     */
    long streamEnd()
    {
        return streamEnd;
    }

    /**
     * Drop the submissions at the head of the window that this agent's shard has finished.
     */
    void popFinished(final int shard)
    {
        while (head < tail)
        {
            final int index = (int)(head & mask);
            if (window[index].pendingByShard[shard] != 0)
            {
                break;
            }
            window[index] = null;
            head++;
        }
    }

    /**
     * @return the submission holding stream chunk {@code chunk}, the next one slot {@code l} sends, which must be in
     * the window; the slot's cursor moves to it.
     */
    Submission locate(final int l, final long chunk)
    {
        long w = Math.max(cursor[l], head);
        Submission submission = window[(int)(w & mask)];
        while (submission.endChunk <= chunk)
        {
            w++;
            submission = window[(int)(w & mask)];
        }
        cursor[l] = w;
        return submission;
    }

    /**
     * @return the submission holding a later chunk of slot {@code l} (a look-ahead), or null when it has not been
     * submitted yet; the cursor stays.
     */
    Submission peek(final int l, final long chunk)
    {
        if (chunk >= streamEnd)
        {
            return null;
        }
        long w = cursor[l];
        Submission submission = window[(int)(w & mask)];
        while (submission.endChunk <= chunk)
        {
            w++;
            submission = window[(int)(w & mask)];
        }
        return submission;
    }

    /**
     * @return the submission at slot {@code l}'s cursor: the one its outstanding chunk belongs to.
     */
    Submission current(final int l)
    {
        return window[(int)(cursor[l] & mask)];
    }

    /**
     * Fail every submission in the window (once) and every one still queued.
     *
     * @param includeWindow false when the window was failed before: only the queue is drained.
     * @return submissions failed.
     */
    int failAll(final String failure, final boolean includeWindow)
    {
        int failed = 0;
        if (includeWindow)
        {
            for (long w = head; w < tail; w++)
            {
                final int index = (int)(w & mask);
                window[index].future.completeExceptionally(new AllReduceException(failure));
                window[index] = null;
                failed++;
            }
            head = tail;
        }
        Submission submission;
        while ((submission = inbox.poll()) != null)
        {
            submission.future.completeExceptionally(new AllReduceException(failure));
            failed++;
        }
        return failed;
    }
}
