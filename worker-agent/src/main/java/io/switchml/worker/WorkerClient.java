package io.switchml.worker;

import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMacBatch;
import org.agrona.collections.Long2ObjectHashMap;
import io.switchml.worker.transport.DatagramTransport;
import io.switchml.worker.transport.TransportKind;
import org.agrona.concurrent.AgentRunner;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicReferenceFieldUpdater;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A worker's side of the SwitchML protocol: the paper's stream buffer manager (appendix B) over
 * Algorithm 4 with loss recovery. Successive all-reduce calls are one continuous stream of chunks of k
 * elements through the appliance's s slots, with no per-call setup round.
 *
 * <h2>The stream</h2>
 * Each call is queued as a submission; chunk numbering continues across calls, so chunk j of a tensor
 * whose first chunk is stream chunk b is stream chunk b + j, and stream chunk g always uses slot
 * g mod s. One I/O agent per appliance shard ({@link ShardAgent}, an Agrona {@code Agent} on its own
 * thread) owns that shard's UDP channel and the slots i with i mod S = shard, keeps one packet in flight
 * per slot, retransmits on the slot's timer (RFC 6298 estimate, exponential backoff), flips the slot's
 * pool version on every reuse, and writes each result into the destination of the tensor it belongs to.
 * When a slot's result returns it moves on at once to its next stream chunk g + s, which may belong to
 * a later tensor. Each chunk is quantized when its slot frees, by the agent that owns the slot, never
 * behind unrelated work. A call's future completes when its last chunk is written.
 *
 * <h2>Look-ahead exponents across tensors</h2>
 * The update for stream chunk g carries this rank's block exponent of chunk g + s, the next chunk on the
 * same slot, and the result returns the maximum over ranks, with which everyone quantizes chunk g + s.
 * A tensor's block exponents exist from its submission (the first s chunks are computed by the submitting
 * thread, the rest by the agents as the stream reaches them), so the look-ahead may come from a later
 * tensor. When chunk g + s has not been submitted yet when chunk g is sent, the update carries
 * {@code UNKNOWN_EXPONENT}; it is the largest value, so it wins the maximum and the result tells every
 * rank alike that chunk g + s has no agreed exponent. The slot then opens chunk g + s with an
 * exponent-only round (one round trip) as soon as it is submitted. A slot's first chunk also opens with
 * one. So exponent-only rounds happen once per slot when the stream starts and again only where the
 * stream ran dry: tensors submitted back to back (asynchronously, or from several threads) pay none,
 * while a loop of blocking calls, each submitted only after the previous one finished, pays one round
 * per call as before. {@link WorkerCounters#exponentOnlyPackets()} and
 * {@link WorkerCounters#lookaheadMisses()} count them. int32 tensors have no exponents and no such rounds.
 *
 * <h2>Ordering contract</h2>
 * Every rank must submit the same sequence of all-reduce calls: the same tensor lengths, element type
 * and reduce op, in the same order. Calls from one thread are submitted in program order. Threads that
 * submit concurrently must agree on an order: submit from one thread, or number the calls with the
 * {@code sequence} overloads (0, 1, 2, ... across all calls of this client; a call waits in the client
 * until all lower numbers have been submitted, and a call without a number takes the next free one).
 * A violation is detected and reported, never silently mixed, where the data allows it:
 * <ul>
 *   <li>Each update carries an 8-bit check of its tensor's length, its chunk index in that tensor and the
 *   op; the appliance returns the byte-wise maximum of the checks, so when two ranks put different
 *   tensors at the same point of the stream, every rank sees it in the result (a different length or a
 *   shifted position is missed with probability 1/256 per chunk).</li>
 *   <li>A chunk whose element count differs between ranks (a tensor end) is rejected by the appliance
 *   (slot mismatch) and never completes; the appliance aborts the job, or its slot deadline does.</li>
 *   <li>An agreed block exponent below this rank's own exponent of a chunk means the other ranks sent a
 *   different chunk.</li>
 * </ul>
 * A rank that detects a violation fails its pending futures with a message saying that the ranks
 * submitted different tensor sequences and aborts the job, so the other ranks fail with the same message
 * rather than wait. What cannot be caught: two tensors of the same length and op swapped (say two
 * same-shape gradient buckets), whose chunks are indistinguishable on the wire; their results are
 * swapped sums. A different op alone is caught by the check, though it would not corrupt the sums.
 *
 * <h2>Failures</h2>
 * An abort from the appliance (another rank died, a slot deadline, an operator), a lost control
 * connection, a progress timeout ({@code progressTimeoutMs} without any result while chunks are in
 * flight) or an ordering violation fails every pending future with an {@link AllReduceException} carrying
 * the message, and every later call fails the same way. A NaN or an infinity is carried: the chunk of k elements
 * holding it comes back NaN on every rank ({@link WorkerCounters#nonFiniteChunks()}). A finite value outside a
 * 16-bit format's range is refused with an {@link IllegalArgumentException} naming the offset before anything
 * is sent; a 16-bit sum that rounds out of range fails that call's future only.
 *
 * <h2>Cost</h2>
 * No allocation per packet: buffers, lanes and scratch arrays are allocated when the client starts.
 * Per call, the submitting thread allocates the submission, its future, a tensor view and an array of
 * block exponents (2 bytes per chunk), about 200 bytes for a 17-chunk tensor; the agents allocate
 * nothing per packet or per call (they complete the future). {@code WorkerStreamTest} measures both with
 * {@code ThreadMXBean#getThreadAllocatedBytes}.
 * <p>
 * Futures complete on an agent thread, so dependent actions attached without an {@code *Async} method
 * run there and hold up the stream: keep them short. A blocking call from an agent thread is refused
 * (it would wait for itself). Cancelling a future does not withdraw its tensor from the stream.
 */
public final class WorkerClient implements AutoCloseable
{
    private static final long SUBMIT_BACKOFF_NS = 50_000L;
    private static final AtomicReferenceFieldUpdater<WorkerClient, String> FAILURE_UPDATER =
        AtomicReferenceFieldUpdater.newUpdater(WorkerClient.class, String.class, "failure");

    private final int jobId;
    private final String jobName;
    private final int rank;
    private final int worldSize;
    private final int lanesPerSlot;
    private final int slotCount;
    private final byte elementType;
    private final Socket controlSocket;
    private final DatagramTransport[] transports;
    private final int shardCount;
    private final int pendingCapacity;
    private final ShardAgent[] agents;
    private final AgentRunner[] runners;
    private final Thread[] agentThreads;
    private final WorkerCounters counters;
    private final String backend;
    private final String fallback;
    private final boolean macEnabled;
    /**
     * A job's client with MACs on starts the packet MACs' warm-up ({@link PacketMacBatch#warmUpInBackground}) at the
     * end of the first all-reduce after which its agents have signed or checked {@link #MAC_WARM_UP_AFTER_BYTES}: the
     * warm-up's C2 work, a few tenths of a CPU-second per JVM, pays for itself after about a gigabyte hashed in lanes
     * instead of one packet at a time. Not during the join, where it competed with the rehearsal and the first call
     * (loopback, 4 agent JVMs on 2 cores: first calls of 1.7 s against 1.0-1.3 s with one packet at a time), nor after
     * a barrier's tiny all-reduce (the same: it then ran beside the first large one), nor in a rehearsal's client.
     */
    private volatile boolean macWarmUpDue;
    /** The data path's warm-up when it goes on after the join, until the first call stops it; else null. */
    private volatile DataPathWarmUp warmUp;
    static final long MAC_WARM_UP_AFTER_BYTES = 128L << 20;

    private final ReentrantLock submitLock = new ReentrantLock();
    private final Long2ObjectHashMap<Submission> waitingForPredecessors = new Long2ObjectHashMap<>();
    private long nextSequence;
    private long streamChunks;

    private volatile String failure;
    private volatile boolean closing;
    private volatile boolean streamHeld;

    WorkerClient(
        final WorkerContext context, final Socket controlSocket, final DatagramTransport[] transports,
        final int jobId, final JobJoin.JoinTerms terms, final String fallback)
    {
        ElementKernels.warnIfSlow();
        this.jobId = jobId;
        this.backend = terms.backend();
        this.fallback = fallback;
        this.jobName = context.jobName();
        this.transports = transports;
        this.shardCount = transports.length;
        this.rank = context.rank();
        this.worldSize = context.worldSize();
        this.lanesPerSlot = context.lanes();
        this.slotCount = context.slots();
        this.elementType = context.elementType();
        this.controlSocket = controlSocket;
        this.macEnabled = terms.macEnabled();
        this.pendingCapacity = Math.max(2, Integer.highestOneBit(context.maxPendingAllReduces() * 2 - 1));

        counters = new WorkerCounters(shardCount + 1);
        agents = new ShardAgent[shardCount];
        runners = new AgentRunner[shardCount];
        agentThreads = new Thread[shardCount];
        for (int shard = 0; shard < shardCount; shard++)
        {
            final ShardAgent agent = new ShardAgent(
                this, context, shard, shardCount, jobId, transports[shard], terms.macEnabled(), terms.macK0(), terms.macK1(),
                counters.cells(shard), pendingCapacity);
            agents[shard] = agent;
            runners[shard] = new AgentRunner(
                new SelectorIdleStrategy(agent, context.idleSpins(), context.idleYields()),
                throwable -> fail("job " + jobId + " rank " + rank + ": internal error in " + agent.roleName() + ": " +
                    throwable, false),
                null,
                agent);
        }
        Thread.ofPlatform().daemon().name("switchml-worker-control-" + rank).start(this::readControl);
        for (int shard = 0; shard < shardCount; shard++)
        {
            final String name = agents[shard].roleName();
            agentThreads[shard] = AgentRunner.startOnThread(
                runners[shard], task -> Thread.ofPlatform().daemon().name(name).unstarted(task));
        }
    }

    /**
     * Bind a data socket, join the job through the appliance's control endpoint ({@link JobJoin}), wait until
     * every rank has joined, and start the I/O agents.
     *
     * @param context worker configuration; {@link WorkerContext#conclude()} is called here.
     * @return a connected client.
     * @throws AllReduceException when the appliance refuses the join (the message says why) or
     *                            cannot be reached.
     */
    public static WorkerClient connect(final WorkerContext context)
    {
        context.conclude();
        final JobJoin.Joined joined = JobJoin.join(context);
        try
        {
            final WorkerClient client = new WorkerClient(
                context, joined.control(), joined.transports(), joined.jobId(), joined.terms(), joined.fallback());
            client.macWarmUpDue = joined.terms().macEnabled();
            client.warmUp = joined.warmUp();
            return client;
        }
        catch (final RuntimeException ex)
        {
            joined.close();
            throw ex;
        }
    }

    /**
     * @return what the agents' packet I/O is, for the start-up report: the first shard's transport, why it is NIO when
     * {@code --transport auto} could not have the native one, and how packet MACs are hashed.
     */
    public String transportDescription()
    {
        final String description = transports[0].description();
        final String nioReason = TransportKind.fallbackReason();
        return (nioReason != null && description.startsWith("nio") ? description + "; native unavailable: " + nioReason :
            description) + "; packet MACs " + (macEnabled ? PacketMacBatch.description() : "off") + "; " +
            ElementKernels.description();
    }

    /**
     * An all-reduce completed (called by the agent that completed it).
     */
    void onAllReduceDone()
    {
        if (macWarmUpDue)
        {
            final int packetLength = DataHeaderFlyweight.packetLength(elementType, lanesPerSlot);
            if ((counters.packetsSent() + counters.packetsReceived()) * packetLength >= MAC_WARM_UP_AFTER_BYTES)
            {
                macWarmUpDue = false;
                PacketMacBatch.warmUpInBackground(packetLength);
            }
        }
    }

    /**
     * @return the backend the appliance aggregates this job on (software, xdp, tofino), as its join reply said.
     */
    public String backend()
    {
        return backend;
    }

    /**
     * @return each backend of the appliance's preference list that passed this job over, with its reason, as the
     * CREATE reply said ("xdp: k=8192 exceeds 358; ..."), or "" when the job runs on the first backend of the list (every
     * rank's CREATE gets the job's placement, whichever rank created it).
     */
    public String fallback()
    {
        return fallback == null ? "" : fallback;
    }

    /**
     * @return where the job is aggregated, for the start-up report: the backend, and each backend of the appliance's
     * preference list that passed the job over with its reason ("software (passed over: xdp: k=8192 exceeds 358)").
     */
    public String placementDescription()
    {
        return fallback == null || fallback.isEmpty() ? backend : backend + " (passed over: " + fallback + ")";
    }

    private void readControl()
    {
        try
        {
            final BufferedReader reader = new BufferedReader(
                new InputStreamReader(controlSocket.getInputStream(), StandardCharsets.UTF_8));
            String line;
            while ((line = reader.readLine()) != null)
            {
                final Map<String, String> message = ControlProtocol.parse(line);
                if (ControlProtocol.ABORT.equals(message.get("")))
                {
                    fail("job '" + jobName + "' (" + jobId + ") aborted by the appliance: " +
                        message.getOrDefault("reason", "no reason given"), false);
                    return;
                }
            }
            if (!closing)
            {
                fail("the appliance closed the control connection of job " + jobId + " (appliance stopped or restarted)",
                    false);
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            if (!closing)
            {
                fail("lost the control connection to the appliance for job " + jobId + ": " + ex.getMessage(), false);
            }
        }
    }

    /**
     * Leave the job in an orderly way, stop the I/O agents (pending calls fail: the client was closed),
     * and release the sockets.
     */
    public void close()
    {
        closing = true;
        fail("job " + jobId + " rank " + rank + ": the client was closed before the all-reduce completed", false);
        sendControl(ControlProtocol.LEAVE);
        // the agents stop under the submission lock: a call that passed its failure check before this close() set
        // the failure finishes publishing first (the agents' last drain fails it), and every later one sees it
        submitLock.lock();
        try
        {
            for (final AgentRunner runner : runners)
            {
                runner.close();
            }
            failWaiting("job " + jobId + " rank " + rank + ": the client was closed before the all-reduce was submitted");
        }
        finally
        {
            submitLock.unlock();
        }
        JobJoin.closeQuietly(controlSocket, transports);
    }

    /**
     * Test hook: while held, the agents take no new submissions from their queues, so that a batch
     * submitted meanwhile is seen whole when released.
     */
    void holdStream(final boolean held)
    {
        streamHeld = held;
        if (!held)
        {
            wakeAgents();
        }
    }

    boolean isStreamHeld()
    {
        return streamHeld;
    }

    /** @return the I/O agent threads, for tests. */
    Thread[] agentThreads()
    {
        return agentThreads.clone();
    }

    String jobName()
    {
        return jobName;
    }

    /** @return the first failure that ended this client, or null while it works. */
    String failure()
    {
        return failure;
    }

    /**
     * Abort the job at the appliance with a reason, so that every rank's pending and later calls fail with it
     * at once (rather than at the slot deadline); this client's calls fail the same way. For a local service
     * whose user went away mid-job, such as the PyTorch bridge when its training process dies.
     *
     * @param reason what happened, naming this rank.
     */
    public void abort(final String reason)
    {
        fail(reason, true);
    }

    /**
     * End the client: every pending and later call fails with the message.
     *
     * @param message  what happened, for the exception.
     * @param abortJob also abort the job at the appliance, so the other ranks stop with this message.
     */
    void fail(final String message, final boolean abortJob)
    {
        if (FAILURE_UPDATER.compareAndSet(this, null, message))
        {
            if (abortJob && !closing)
            {
                sendControl(ControlProtocol.ABORT + " reason=" + message.replace('\n', ' '));
            }
            wakeAgents();
            // numbered calls still waiting for a lower number would wait for good: fail them, under the submission
            // lock and off this thread (an I/O agent's), which the lock's holder may be waiting on to drain a queue
            Thread.ofVirtual().name("switchml-fail-waiting").start(() ->
            {
                submitLock.lock();
                try
                {
                    failWaiting(message);
                }
                finally
                {
                    submitLock.unlock();
                }
            });
        }
    }

    /**
     * Fail the numbered calls waiting for a lower number; under the submission lock.
     */
    private void failWaiting(final String message)
    {
        if (!waitingForPredecessors.isEmpty())
        {
            waitingForPredecessors.values().forEach(
                (submission) -> submission.future.completeExceptionally(new AllReduceException(message)));
            waitingForPredecessors.clear();
        }
    }

    private void wakeAgents()
    {
        for (final ShardAgent agent : agents)
        {
            agent.wakeup();
        }
    }

    private void sendControl(final String line)
    {
        try
        {
            final OutputStream out = controlSocket.getOutputStream();
            synchronized (out)
            {
                out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
            }
        }
        catch (final IOException ignore)
        {
            // the appliance is gone; the failure stands on its own
        }
    }

    public WorkerCounters counters()
    {
        return counters;
    }

    public int rank()
    {
        return rank;
    }

    public int worldSize()
    {
        return worldSize;
    }

    /**
     * @return the element type of the job: which tensors the calls accept.
     */
    public byte elementType()
    {
        return elementType;
    }

    /**
     * All-reduce a float tensor (float32, float16 or bfloat16 job) and wait for the result.
     *
     * @param src the local tensor; every rank passes the same length at the same point of its call sequence.
     * @param dst where the result goes; may be src for an in-place reduction.
     * @param op  sum or average.
     * @throws IllegalArgumentException for a finite value outside the 16-bit format's range, naming the offset,
     *                                  before anything is sent (a NaN or an infinity is carried: its chunk's result
     *                                  is NaN).
     * @throws AllReduceException       when the job is aborted, makes no progress, or the ranks' call
     *                                  sequences differ.
     * @throws IllegalStateException    on an I/O agent thread (a future's callback), where it would deadlock.
     */
    public void allReduce(final float[] src, final float[] dst, final ReduceOp op)
    {
        await(allReduceAsync(src, dst, op));
    }

    /**
     * All-reduce an int tensor exactly (sums wrap around like Java int arithmetic) and wait.
     */
    public void allReduce(final int[] src, final int[] dst)
    {
        await(allReduceAsync(src, dst));
    }

    /**
     * All-reduce the remaining elements of a float buffer (heap or direct) into another buffer and wait.
     * Positions are not changed.
     */
    public void allReduce(final FloatBuffer src, final FloatBuffer dst, final ReduceOp op)
    {
        await(allReduceAsync(src, dst, op));
    }

    /**
     * All-reduce the remaining elements of an int buffer (heap or direct) into another buffer and wait.
     */
    public void allReduce(final IntBuffer src, final IntBuffer dst)
    {
        await(allReduceAsync(src, dst));
    }

    /**
     * Submit a float tensor (float32, float16 or bfloat16 job) to the stream.
     *
     * @param src the local tensor; neither it nor dst may be touched until the future completes.
     * @param dst where the result goes; may be src.
     * @param op  sum or average.
     * @return completes when the result is in dst; fails with {@link AllReduceException}.
     * @throws IllegalArgumentException for a wrong element type, a short destination, or a value that
     *                                  cannot be sent (finite but out of a 16-bit range), naming the offset.
     */
    public CompletableFuture<Void> allReduceAsync(final float[] src, final float[] dst, final ReduceOp op)
    {
        requireFloat();
        requireLength(src.length, dst.length);
        return submit(-1, new TensorView.FloatArray(src, dst), op);
    }

    /**
     * As {@link #allReduceAsync(float[], float[], ReduceOp)}, at an explicit place in this client's call
     * sequence, for threads that submit concurrently.
     *
     * @param sequence 0, 1, 2, ... over all calls of this client; the call enters the stream after every
     *                 lower number has. A call refused with an exception leaves its number unused: higher ones wait
     *                 until it is submitted again (or the job fails, which fails them).
     * @throws IllegalArgumentException for a number already used, or more than the pending capacity ahead.
     */
    public CompletableFuture<Void> allReduceAsync(
        final long sequence, final float[] src, final float[] dst, final ReduceOp op)
    {
        requireFloat();
        requireLength(src.length, dst.length);
        return submit(requireSequence(sequence), new TensorView.FloatArray(src, dst), op);
    }

    /**
     * Submit an int tensor (int32 job) to the stream; sums are exact.
     */
    public CompletableFuture<Void> allReduceAsync(final int[] src, final int[] dst)
    {
        requireType(ElementType.INT32);
        requireLength(src.length, dst.length);
        return submit(-1, new TensorView.IntArray(src, dst), ReduceOp.SUM);
    }

    /**
     * As {@link #allReduceAsync(int[], int[])} at an explicit place in the call sequence.
     */
    public CompletableFuture<Void> allReduceAsync(final long sequence, final int[] src, final int[] dst)
    {
        requireType(ElementType.INT32);
        requireLength(src.length, dst.length);
        return submit(requireSequence(sequence), new TensorView.IntArray(src, dst), ReduceOp.SUM);
    }

    /**
     * Submit the remaining elements of a float buffer (heap or direct); dst receives as many from its
     * position. The buffers' positions are read now and never changed.
     */
    public CompletableFuture<Void> allReduceAsync(final FloatBuffer src, final FloatBuffer dst, final ReduceOp op)
    {
        requireFloat();
        requireLength(src.remaining(), dst.remaining());
        return submit(-1, new TensorView.FloatBufferView(src, dst), op);
    }

    /**
     * As {@link #allReduceAsync(FloatBuffer, FloatBuffer, ReduceOp)} at an explicit place in the call sequence.
     */
    public CompletableFuture<Void> allReduceAsync(
        final long sequence, final FloatBuffer src, final FloatBuffer dst, final ReduceOp op)
    {
        requireFloat();
        requireLength(src.remaining(), dst.remaining());
        return submit(requireSequence(sequence), new TensorView.FloatBufferView(src, dst), op);
    }

    /**
     * Submit the remaining elements of an int buffer (heap or direct).
     */
    public CompletableFuture<Void> allReduceAsync(final IntBuffer src, final IntBuffer dst)
    {
        requireType(ElementType.INT32);
        requireLength(src.remaining(), dst.remaining());
        return submit(-1, new TensorView.IntBufferView(src, dst), ReduceOp.SUM);
    }

    /**
     * As {@link #allReduceAsync(IntBuffer, IntBuffer)} at an explicit place in the call sequence.
     */
    public CompletableFuture<Void> allReduceAsync(final long sequence, final IntBuffer src, final IntBuffer dst)
    {
        requireType(ElementType.INT32);
        requireLength(src.remaining(), dst.remaining());
        return submit(requireSequence(sequence), new TensorView.IntBufferView(src, dst), ReduceOp.SUM);
    }

    private void await(final CompletableFuture<Void> future)
    {
        final Thread current = Thread.currentThread();
        for (final Thread agentThread : agentThreads)
        {
            if (agentThread == current)
            {
                throw new IllegalStateException("a blocking all-reduce on the client's I/O thread (from a future's " +
                    "callback?) would wait for itself; use allReduceAsync or attach the callback with an *Async method");
            }
        }
        try
        {
            future.join();
        }
        catch (final CompletionException ex)
        {
            final Throwable cause = ex.getCause();
            if (cause instanceof AllReduceException || !(cause instanceof RuntimeException))
            {
                throw new AllReduceException(cause.getMessage(), cause);
            }
            throw (RuntimeException)cause;
        }
    }

    private void requireFloat()
    {
        if (!ElementType.isFloat(elementType))
        {
            throw new IllegalArgumentException("job " + jobId + " aggregates " + ElementType.name(elementType) +
                ", not float tensors");
        }
    }

    private void requireType(final byte type)
    {
        if (type != elementType)
        {
            throw new IllegalArgumentException("job " + jobId + " aggregates " + ElementType.name(elementType) +
                ", not " + ElementType.name(type));
        }
    }

    private static void requireLength(final int srcLength, final int dstLength)
    {
        if (dstLength < srcLength)
        {
            throw new IllegalArgumentException("destination holds " + dstLength + " elements, source " + srcLength);
        }
    }

    private static long requireSequence(final long sequence)
    {
        if (sequence < 0)
        {
            throw new IllegalArgumentException("sequence numbers start at 0: " + sequence);
        }
        return sequence;
    }

    /**
     * Compute the first s block exponents (refusing what cannot be sent), then enter the stream in sequence order.
     */
    private CompletableFuture<Void> submit(final long sequence, final TensorView tensor, final ReduceOp op)
    {
        final DataPathWarmUp running = warmUp;
        if (running != null)
        {
            warmUp = null;
            running.stopForFirstCall();
        }
        final BlockExponents exponents = tensor.isFloat() ?
            new BlockExponents(tensor, elementType, lanesPerSlot).checkFirst(slotCount, jobId, rank) : null;
        submitLock.lock();
        try
        {
            final long ordinal = sequence < 0 ? nextSequence : sequence;
            final Submission submission = new Submission(ordinal, tensor, op, worldSize, lanesPerSlot, exponents);
            final String failed = failure;
            if (failed != null)
            {
                submission.future.completeExceptionally(new AllReduceException(failed));
                failWaiting(failed);
                return submission.future;
            }
            if (ordinal < nextSequence || waitingForPredecessors.containsKey(ordinal))
            {
                throw new IllegalArgumentException("sequence number " + ordinal + " was already submitted on job " +
                    jobId + " rank " + rank + " (next free: " + nextSequence + ")");
            }
            if (ordinal - nextSequence >= pendingCapacity)
            {
                throw new IllegalArgumentException("sequence number " + ordinal + " is " + (ordinal - nextSequence) +
                    " calls ahead of the next one to submit (" + nextSequence + "); at most " + pendingCapacity +
                    " may wait (maxPendingAllReduces)");
            }
            if (ordinal != nextSequence)
            {
                waitingForPredecessors.put(ordinal, submission);
                return submission.future;
            }
            publish(submission);
            Submission next;
            while ((next = waitingForPredecessors.remove(nextSequence)) != null)
            {
                publish(next);
            }
            return submission.future;
        }
        finally
        {
            submitLock.unlock();
        }
    }

    /**
     * Give a submission its place in the stream and hand it to every agent; called in sequence order under
     * the submission lock. Waits while an agent's queue is full (back-pressure).
     */
    private void publish(final Submission submission)
    {
        nextSequence++;
        if (submission.chunks == 0)
        {
            submission.place(streamChunks, slotCount, shardCount);
            counters.cells(shardCount).allReduces++;
            submission.future.complete(null);
            return;
        }
        submission.place(streamChunks, slotCount, shardCount);
        streamChunks += submission.chunks;
        for (final ShardAgent agent : agents)
        {
            while (!agent.offer(submission))
            {
                final String failed = failure;
                if (failed != null)
                {
                    submission.future.completeExceptionally(new AllReduceException(failed));
                    return;
                }
                agent.wakeup();
                LockSupport.parkNanos(SUBMIT_BACKOFF_NS);
            }
            agent.wakeup();
        }
    }

    /**
     * @return the largest smoothed round-trip time of a slot over the shards, in nanoseconds (0 before the
     * first sample).
     */
    public long smoothedRttNs()
    {
        long max = 0;
        for (final ShardAgent agent : agents)
        {
            max = Math.max(max, agent.smoothedRttNs());
        }
        return max;
    }

    /**
     * @return the largest current retransmission timeout over the shards before backoff, in nanoseconds.
     */
    public long retransmitTimeoutNs()
    {
        long max = 0;
        for (final ShardAgent agent : agents)
        {
            max = Math.max(max, agent.retransmitTimeoutNs());
        }
        return max;
    }
}
