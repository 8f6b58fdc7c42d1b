package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.quant.BlockFloatingPoint;
import io.switchml.worker.transport.DatagramTransport;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;

import static io.switchml.protocol.DataHeaderFlyweight.FLAG_EXPONENT_ONLY;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_RETRANSMIT;
import static io.switchml.protocol.DataHeaderFlyweight.NO_EXPONENT;
import static io.switchml.protocol.DataHeaderFlyweight.UNKNOWN_EXPONENT;

/**
 * The I/O agent of one appliance shard: it owns the shard's transport and the job's slots that the
 * shard holds (global slot i belongs to shard i mod S and is local slot i / S here), and moves the
 * client's stream of submitted tensors through them (Algorithm 4 with loss recovery).
 * <p>
 * It schedules chunks onto slots and steers results; the other roles are its parts, each testable alone:
 * {@link SubmissionWindow} (the submissions taken and not finished), {@link ChunkCodec} (tensor elements to lanes and
 * back), {@link PacketLink} (MAC, test loss and validation at the packet edge), a {@link DatagramTransport} (packet
 * I/O) and a {@link LossRecovery} policy (timers, probes, RTT).
 * <p>
 * Every agent sees every submission, in stream order, through its own bounded queue, and keeps the
 * submissions it has not finished in a window. Each of its slots walks its stream chunks i, i+s, i+2s,
 * ... regardless of which tensor they belong to: when a result returns, the slot moves on to its next
 * stream chunk at once if that chunk has been submitted, else it waits until it is. Float updates carry
 * the exponent of the slot's next chunk as look-ahead when it is known, and {@link
 * DataHeaderFlyweight#UNKNOWN_EXPONENT} when it is not; since that value wins the maximum, every rank
 * learns from the result alike whether the next chunk has an agreed exponent or must open with an
 * exponent-only round. A chunk holding a NaN or an infinity has the exponent {@link
 * DataHeaderFlyweight#NON_FINITE_EXPONENT}, which wins the maximum over finite ones: every rank then sends that
 * chunk as zeros and writes NaN into its result ({@link ChunkCodec}).
 * <p>
 * Everything on the packet path uses preallocated buffers: no allocation per packet. Failures that end
 * the client (abort, progress timeout, an ordering violation) go to {@link WorkerClient#fail}, after
 * which every agent fails the futures it holds.
 */
final class ShardAgent implements Agent, LossRecovery.Actions, DatagramTransport.Receiver
{
    private static final long NANOS_PER_MS = 1_000_000L;
    private static final int WAITING = 0;
    private static final int EXPONENT = 1;
    private static final int DATA = 2;
    /** Datagrams handled per duty cycle at most; the timers wait until the sockets are drained. */
    private static final int RECEIVE_BUDGET = 1024;
    private static final int POLL_BUDGET = 64;
    private static final long MAX_IDLE_WAIT_MS = 50;
    /** A gap between duty cycles longer than the waits asked for by more than this is a pause of the thread. */
    private static final long PAUSE_SLACK_NS = 1_000_000L;

    private final WorkerClient client;
    private final int shard;
    private final int shardCount;
    private final int slotCount;
    private final int localSlots;
    private final int jobId;
    private final int rank;
    private final int worldSize;
    private final int lanesPerSlot;
    private final byte elementType;
    private final boolean isFloat;
    private final DatagramTransport transport;
    private final PacketLink link;
    private final boolean[] accepted = new boolean[DatagramTransport.Receiver.MAX_HAND_OVER];
    private final SubmissionWindow submissions;
    private final ChunkCodec codec;
    private final WorkerCounters.Cells counters;
    private final String roleName;

    private final int[] slotLength;
    private final UnsafeBuffer[] slotViews;
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();

    private final long[] slotChunk;
    private final int[] slotState;
    private final boolean[] slotNeedsExponent;
    private final int[] slotVersion;
    private final int[] slotExponent;
    private final LossRecovery recovery;
    private final UnsafeBuffer probeView;

    private final long progressTimeoutNs;
    private long lastProgressNs;
    private long lastCycleEndNs;
    private long awaitedNs;
    private final ResultCoalescing coalescing;
    private volatile Thread agentThread;
    private int resultsRead;
    /** Whether a result was read since the agent last slept or blocked: results are flowing. */
    private boolean readSinceIdle;
    /** Whether the last result's slot has no chunk after the one it went on to: the stream's last window. */
    private boolean streamTail;
    private int inFlight;
    private boolean failedAll;

    ShardAgent(
        final WorkerClient client,
        final WorkerContext context,
        final int shard,
        final int shardCount,
        final int jobId,
        final DatagramTransport transport,
        final boolean macEnabled,
        final long macK0,
        final long macK1,
        final WorkerCounters.Cells counters,
        final int pendingCapacity)
    {
        this.client = client;
        this.shard = shard;
        this.shardCount = shardCount;
        this.slotCount = context.slots();
        this.localSlots = (slotCount - shard + shardCount - 1) / shardCount;
        this.jobId = jobId;
        this.rank = context.rank();
        this.worldSize = context.worldSize();
        this.lanesPerSlot = context.lanes();
        this.elementType = context.elementType();
        this.isFloat = ElementType.isFloat(elementType);
        this.transport = transport;
        this.counters = counters;
        this.roleName = "switchml-worker-r" + rank + "-shard" + shard;
        this.link = new PacketLink(transport, counters,
            LossGenerator.of(context.lossRate(), context.lossSeed() * 1_000_003L + rank + 7919L * shard),
            LossGenerator.of(context.lossRate(), context.lossSeed() * 1_000_033L + rank + 17 + 7919L * shard),
            macEnabled, macK0, macK1);
        this.submissions = new SubmissionWindow(pendingCapacity, localSlots);
        this.codec = new ChunkCodec(elementType, lanesPerSlot, worldSize);

        final int packetCapacity = DataHeaderFlyweight.packetLength(lanesPerSlot);
        final ByteBuffer all = ByteBuffer.allocateDirect(packetCapacity * Math.max(1, localSlots));
        slotLength = new int[localSlots];
        slotViews = new UnsafeBuffer[localSlots];
        for (int l = 0; l < localSlots; l++)
        {
            final ByteBuffer packet = all.slice(l * packetCapacity, packetCapacity);
            slotViews[l] = new UnsafeBuffer(packet);
        }

        slotChunk = new long[localSlots];
        slotState = new int[localSlots];
        slotNeedsExponent = new boolean[localSlots];
        slotVersion = new int[localSlots];
        slotExponent = new int[localSlots];
        recovery = context.lossRecovery().create(context, localSlots, counters);
        coalescing = new ResultCoalescing(context.idleCoalesceMaxUs() * 1000L);
        probeView = new UnsafeBuffer(ByteBuffer.allocateDirect(DataHeaderFlyweight.HEADER_LENGTH));
        for (int l = 0; l < localSlots; l++)
        {
            slotChunk[l] = (long)l * shardCount + shard;
            slotNeedsExponent[l] = isFloat;
        }

        progressTimeoutNs = context.progressTimeoutMs() * NANOS_PER_MS;
    }

    public void onStart()
    {
        agentThread = Thread.currentThread();
        transport.onStart();
    }

    public String roleName()
    {
        return roleName;
    }

    /**
     * Offer a submission, from the client's publishing thread (under its submission lock).
     *
     * @return false when the queue is full.
     */
    boolean offer(final Submission submission)
    {
        return submissions.offer(submission);
    }

    /** Make a waiting {@link #idle} return: new work or a failure. Any thread. */
    void wakeup()
    {
        transport.wakeup();
        final Thread thread = agentThread;
        if (thread != null)
        {
            // ends a coalescing sleep (or makes the next one return at once)
            LockSupport.unpark(thread);
        }
    }

    long smoothedRttNs()
    {
        return recovery.smoothedRttNs();
    }

    long retransmitTimeoutNs()
    {
        return recovery.retransmitTimeoutNs();
    }

    public int doWork()
    {
        final String failure = client.failure();
        if (failure != null)
        {
            return failEverything(failure);
        }
        if (inFlight > 0 && lastCycleEndNs != 0)
        {
            final long pauseNs = System.nanoTime() - lastCycleEndNs - awaitedNs - PAUSE_SLACK_NS;
            if (pauseNs > 0)
            {
                recovery.onPause(pauseNs);
            }
        }
        awaitedNs = 0;
        final int inFlightBefore = inFlight;
        resultsRead = 0;
        int work = 0;
        if (!client.isStreamHeld())
        {
            work += pollSubmissions();
        }
        work += transport.receive(this, RECEIVE_BUDGET);
        if (transport.drained())
        {
            // judge the timers only once every result that has arrived was seen: a thread that did not run for a
            // while must not take its own backlog for loss
            work += checkTimers();
        }
        else
        {
            work += checkProgress(System.nanoTime());
        }
        work += link.flush();
        lastCycleEndNs = System.nanoTime();
        coalescing.onCycle(lastCycleEndNs, inFlightBefore, resultsRead);
        readSinceIdle |= resultsRead > 0;
        return work;
    }

    /**
     * Wait for a packet, a wake-up or the next timer, for the idle strategy once spinning is over.
     */
    void idle()
    {
        if (coalesce())
        {
            return;
        }
        readSinceIdle = false;
        long waitMs = MAX_IDLE_WAIT_MS;
        if (inFlight > 0)
        {
            final long untilNs = untilWakeNs();
            waitMs = Math.max(1, Math.min(MAX_IDLE_WAIT_MS, (untilNs + NANOS_PER_MS - 1) / NANOS_PER_MS));
        }
        awaitedNs += waitMs * NANOS_PER_MS;
        counters.selectorWaits++;
        transport.await(waitMs);
        if (link.hasQueued())
        {
            link.flush();
        }
    }

    /**
     * Sleep while results gather in the socket, to read and answer them in one batch, where {@link ResultCoalescing}
     * says so; the idle strategy tries it before spinning and yielding, which would only poll an empty socket (the
     * next result is tens of microseconds away), and {@link #idle} before blocking.
     *
     * @return whether the agent slept.
     */
    boolean coalesce()
    {
        if (inFlight == 0)
        {
            return false;
        }
        final long sleepNs =
            coalescing.sleepNs(inFlight, readSinceIdle, streamTail, untilWakeNs(), link.hasQueued());
        if (sleepNs == 0)
        {
            return false;
        }
        readSinceIdle = false;
        awaitedNs += sleepNs;
        counters.coalescedSleeps++;
        LockSupport.parkNanos(sleepNs);
        return true;
    }

    private long untilWakeNs()
    {
        return Math.min(recovery.nextWakeNs(), lastProgressNs + progressTimeoutNs) - System.nanoTime();
    }

    public void onClose()
    {
        final String failure = client.failure();
        failEverything(failure != null ? failure :
            "job " + jobId + " rank " + rank + ": the client was closed before the all-reduce completed");
        transport.close();
    }

    private int pollSubmissions()
    {
        final int polled = submissions.poll(POLL_BUDGET);
        if (polled > 0)
        {
            submissions.popFinished(shard);
            final long streamEnd = submissions.streamEnd();
            final long nowNs = System.nanoTime();
            for (int l = 0; l < localSlots; l++)
            {
                if (slotState[l] == WAITING && slotChunk[l] < streamEnd)
                {
                    if (inFlight++ == 0)
                    {
                        lastProgressNs = nowNs;
                        recovery.onStreamStart(nowNs);
                        // no coalescing before this stream's first result, which also tells whether it is in its tail
                        readSinceIdle = false;
                        streamTail = false;
                    }
                    start(l, nowNs);
                }
            }
        }
        return polled;
    }

    /**
     * Exponent of a stream chunk not yet sent, or {@link DataHeaderFlyweight#UNKNOWN_EXPONENT} when it has not
     * been submitted yet.
     */
    private int lookahead(final int l, final long chunk)
    {
        final Submission submission = submissions.peek(l, chunk);
        if (submission == null)
        {
            counters.lookaheadMisses++;
            return UNKNOWN_EXPONENT;
        }
        return exponentOf(submission, (int)(chunk - submission.firstChunk));
    }

    /**
     * This rank's exponent of a chunk of a submission, computed now if nobody has yet: {@link
     * BlockFloatingPoint#NON_FINITE} for a chunk holding a NaN or an infinity, which is carried (the chunk's result is
     * NaN on every rank). A chunk beyond the ones checked at submission that holds a finite value out of a 16-bit
     * range fails the client and aborts the job, naming the element: part of the tensor has been sent, so the other
     * ranks cannot finish it.
     *
     * @return the exponent, or {@link DataHeaderFlyweight#UNKNOWN_EXPONENT} after such a failure.
     */
    private int exponentOf(final Submission submission, final int index)
    {
        final int exponent = submission.exponents.of(index);
        if (exponent == BlockFloatingPoint.OUT_OF_RANGE)
        {
            client.fail(submission.exponents.notRepresentable(index, jobId, rank) +
                "; the job is aborted because earlier chunks of the tensor were already sent", true);
            return UNKNOWN_EXPONENT;
        }
        return exponent;
    }

    private void start(final int l, final long nowNs)
    {
        final Submission submission = submissions.locate(l, slotChunk[l]);
        if (slotNeedsExponent[l])
        {
            sendExponentOnly(l, submission, nowNs);
        }
        else
        {
            sendData(l, submission, nowNs);
        }
    }

    private void sendExponentOnly(final int l, final Submission submission, final long nowNs)
    {
        final long chunk = slotChunk[l];
        final int index = (int)(chunk - submission.firstChunk);
        final int exponent = exponentOf(submission, index);
        if (exponent == UNKNOWN_EXPONENT)
        {
            return;
        }
        slotState[l] = EXPONENT;
        header.wrap(slotViews[l], 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, slotVersion[l] | FLAG_EXPONENT_ONLY, elementType,
            globalSlot(l), chunk, 0, NO_EXPONENT, exponent, submission.tensorCheck(index));
        counters.exponentOnlyPackets++;
        transmit(l, DataHeaderFlyweight.HEADER_LENGTH, LossRecovery.FIRST, nowNs);
    }

    private void sendData(final int l, final Submission submission, final long nowNs)
    {
        final long chunk = slotChunk[l];
        final int index = (int)(chunk - submission.firstChunk);
        final int from = index * lanesPerSlot;
        final int count = Math.min(lanesPerSlot, submission.length - from);
        int scaleExponent = NO_EXPONENT;
        int lookahead = NO_EXPONENT;
        slotState[l] = DATA;
        if (isFloat)
        {
            scaleExponent = slotExponent[l];
            final int local = exponentOf(submission, index);
            if (local == UNKNOWN_EXPONENT)
            {
                return;
            }
            if (local > scaleExponent)
            {
                orderingViolation("the agreed block exponent " + scaleExponent + " of " + submission.describeChunk(chunk) +
                    " is below this rank's " + local);
                return;
            }
            lookahead = lookahead(l, chunk + slotCount);
        }
        codec.encode(submission.tensor, from, count, scaleExponent, slotViews[l], DataHeaderFlyweight.PAYLOAD_OFFSET);
        header.wrap(slotViews[l], 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, slotVersion[l], elementType, globalSlot(l), chunk, count,
            ChunkCodec.wireScaleExponent(scaleExponent), lookahead, submission.tensorCheck(index));
        transmit(l, DataHeaderFlyweight.packetLength(elementType, count), LossRecovery.FIRST, nowNs);
    }

    private int globalSlot(final int l)
    {
        return l * shardCount + shard;
    }

    private void transmit(final int l, final int packetLength, final int why, final long nowNs)
    {
        slotLength[l] = packetLength;
        recovery.onTransmit(l, why, nowNs);
        // sent from the slot's buffer without a copy. Every change to that buffer is finished (and signed) before the
        // duty cycle's flush; if one lands on a buffer still queued in the same cycle (a resend's flag, or a slot
        // re-encoded because an earlier copy's result came back), the queue sends the newer whole packet, which
        // the appliance takes as a duplicate
        link.sendSlot(slotViews[l], packetLength);
    }

    public boolean checksMacsInLanes()
    {
        return link.checksMacsInLanes();
    }

    public void onDatagrams(final UnsafeBuffer[] receiveViews, final int[] lengths, final int count)
    {
        if (client.failure() != null)
        {
            return;
        }
        link.acceptAll(receiveViews, lengths, count, accepted);
        for (int i = 0; i < count && client.failure() == null; i++)
        {
            if (accepted[i])
            {
                onResult(receiveViews[i]);
            }
        }
    }

    public void onDatagram(final UnsafeBuffer receiveView, final int bytes)
    {
        if (client.failure() != null || !link.accept(receiveView, bytes))
        {
            return;
        }
        onResult(receiveView);
    }

    /**
     * A well-formed packet from the appliance: a result, a NACK or a PENDING for one of this agent's slots, or stale.
     */
    private void onResult(final UnsafeBuffer receiveView)
    {
        header.wrap(receiveView, 0);
        final int slot = header.slotIndex();
        final byte type = header.type();
        if ((type != DataHeaderFlyweight.TYPE_RESULT && type != DataHeaderFlyweight.TYPE_NACK &&
            type != DataHeaderFlyweight.TYPE_PENDING) ||
            header.jobId() != jobId || slot >= slotCount ||
            slot % shardCount != shard || header.elementType() != elementType)
        {
            counters.malformedResults++;
            return;
        }
        final int l = slot / shardCount;
        final int state = slotState[l];
        final long chunk = slotChunk[l];
        final boolean exponentOnly = header.isExponentOnly();
        final boolean fromShadow = (header.flags() & FLAG_RETRANSMIT) != 0;
        if (state == WAITING || header.chunkSequence() != chunk || header.poolVersion() != slotVersion[l] ||
            exponentOnly != (state == EXPONENT))
        {
            counters.staleResults++;
            if (type == DataHeaderFlyweight.TYPE_RESULT)
            {
                recovery.onStaleResult(l, fromShadow, roundKey(header.chunkSequence(), exponentOnly), System.nanoTime());
            }
            return;
        }
        if (type != DataHeaderFlyweight.TYPE_RESULT && header.workerRank() != rank)
        {
            // a NACK or PENDING answers one rank's probe, and names that rank
            counters.malformedResults++;
            return;
        }
        if (type == DataHeaderFlyweight.TYPE_NACK)
        {
            // the appliance has not got this transmission's update: resend it now, once per probe (a second
            // NACK for the same probe round, or one that arrives after a resend, changes nothing)
            counters.nacksReceived++;
            final long nowNs = System.nanoTime();
            if (recovery.onNack(l, nowNs))
            {
                counters.fastRetransmissions++;
                resend(l, LossRecovery.NACKED, nowNs);
            }
            return;
        }
        if (type == DataHeaderFlyweight.TYPE_PENDING)
        {
            // the appliance holds this transmission's update and waits for other ranks: nothing to resend
            counters.pendingsReceived++;
            recovery.onPending(l, System.nanoTime());
            return;
        }

        final long nowNs = System.nanoTime();
        resultsRead++;
        recovery.onResult(l, fromShadow, roundKey(chunk, exponentOnly), nowNs);
        slotVersion[l] ^= 1;
        lastProgressNs = nowNs;

        final Submission submission = submissions.current(l);
        final int index = (int)(chunk - submission.firstChunk);
        if (header.tensorCheck() != submission.tensorCheck(index))
        {
            orderingViolation("the result of " + submission.describeChunk(chunk) + " shows that another rank put a " +
                "different tensor (length, position in it, or reduce op) at this point of its stream");
            return;
        }
        if (state == EXPONENT)
        {
            final int agreed = header.lookaheadExponent();
            if (agreed == UNKNOWN_EXPONENT)
            {
                orderingViolation("the exponent round of " + submission.describeChunk(chunk) +
                    " returned no exponent: another rank sent data where this rank opened an exponent round");
                return;
            }
            slotExponent[l] = agreed;
            sendData(l, submission, nowNs);
            return;
        }

        final int count = header.elementCount();
        final int from = index * lanesPerSlot;
        final int expected = Math.min(lanesPerSlot, submission.length - from);
        if (count != expected || (isFloat && header.scaleExponent() != ChunkCodec.wireScaleExponent(slotExponent[l])))
        {
            orderingViolation("the result of " + submission.describeChunk(chunk) + " has " + count +
                " elements and exponent " + header.scaleExponent() + ", this rank sent " + expected + " and " +
                ChunkCodec.wireScaleExponent(slotExponent[l]));
            return;
        }
        final int nonFinite = codec.decode(receiveView, DataHeaderFlyweight.PAYLOAD_OFFSET, count,
            isFloat ? slotExponent[l] : NO_EXPONENT, submission, from);
        if (isFloat && slotExponent[l] == BlockFloatingPoint.NON_FINITE)
        {
            counters.nonFiniteChunks++;
        }
        if (nonFinite >= 0)
        {
            submission.onDataError("job " + jobId + " rank " + rank + ": the sum at offset " + (from + nonFinite) +
                " of " + submission.describe() + " is outside the " + ElementType.name(elementType) +
                " range; its other elements were written");
        }

        final int lookahead = header.lookaheadExponent();
        if (isFloat)
        {
            slotNeedsExponent[l] = lookahead == UNKNOWN_EXPONENT;
            slotExponent[l] = lookahead;
        }
        slotChunk[l] = chunk + slotCount;
        streamTail = slotChunk[l] + slotCount >= submissions.streamEnd();
        onChunkDone(submission);
        if (slotChunk[l] < submissions.streamEnd())
        {
            start(l, nowNs);
        }
        else
        {
            slotState[l] = WAITING;
            recovery.onIdle(l);
            inFlight--;
            if (isFloat && !slotNeedsExponent[l])
            {
                orderingViolation("the result of " + submission.describeChunk(chunk) + " carries an agreed exponent " +
                    "for stream chunk " + slotChunk[l] + ", which this rank has not submitted");
            }
        }
    }

    private void onChunkDone(final Submission submission)
    {
        if (--submission.pendingByShard[shard] == 0)
        {
            submissions.popFinished(shard);
            if (submission.onShardDone())
            {
                final String error = submission.dataError();
                if (error == null)
                {
                    counters.allReduces++;
                    submission.future.complete(null);
                    client.onAllReduceDone();
                }
                else
                {
                    submission.future.completeExceptionally(new AllReduceException(error));
                }
            }
        }
    }

    private int checkTimers()
    {
        if (inFlight == 0)
        {
            return 0;
        }
        final long nowNs = System.nanoTime();
        if (checkProgress(nowNs) != 0)
        {
            return 1;
        }
        return recovery.poll(nowNs, this);
    }

    /**
     * Fail the client when no result has come for the progress timeout.
     *
     * @return 1 when it failed, else 0.
     */
    private int checkProgress(final long nowNs)
    {
        if (inFlight == 0 || nowNs - lastProgressNs <= progressTimeoutNs)
        {
            return 0;
        }
        client.fail("job " + jobId + " rank " + rank + ": no result for " + progressTimeoutNs / NANOS_PER_MS +
            " ms on shard " + shard + " (pending: " + describePending(4) + "); the appliance or another rank is " +
            "not responding, or the ranks submitted different tensor sequences and the appliance rejects the " +
            "chunks whose element counts disagree", false);
        return 1;
    }

    private String describePending(final int limit)
    {
        final StringBuilder sb = new StringBuilder();
        int listed = 0;
        for (int l = 0; l < localSlots && listed < limit; l++)
        {
            if (slotState[l] != WAITING)
            {
                final Submission submission = submissions.current(l);
                sb.append(listed++ == 0 ? "" : "; ").append(submission.describeChunk(slotChunk[l]))
                    .append(" on slot ").append(globalSlot(l)).append(slotState[l] == EXPONENT ? " (exponent round)" : "");
            }
        }
        if (inFlight > listed)
        {
            sb.append("; ").append(inFlight - listed).append(" more slots");
        }
        return sb.toString();
    }

    /**
     * Ask the appliance about a slot's outstanding update with a header-only probe (40 bytes instead of
     * resending the update): it answers with the result if the slot completed (this rank lost it), a NACK if
     * it has not got this rank's update (then {@link #onResult} resends it), or a PENDING if it holds the
     * update and waits for another rank (an appliance older than PENDING answers nothing then).
     */
    public void probe(final int l, final boolean tail, final long nowNs)
    {
        if (tail)
        {
            counters.tailProbes++;
        }
        counters.probesSent++;
        final UnsafeBuffer probe = probeView;
        probe.putBytes(0, slotViews[l], 0, DataHeaderFlyweight.HEADER_LENGTH);
        probe.putByte(DataHeaderFlyweight.TYPE_OFFSET, DataHeaderFlyweight.TYPE_PROBE);
        probe.putShort(DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, (short)0, ByteOrder.BIG_ENDIAN);
        link.send(probe, DataHeaderFlyweight.HEADER_LENGTH);
    }

    public void retransmit(final int l, final long nowNs)
    {
        resend(l, LossRecovery.TIMEOUT, nowNs);
    }

    private void resend(final int l, final int why, final long nowNs)
    {
        final UnsafeBuffer view = slotViews[l];
        view.putByte(DataHeaderFlyweight.FLAGS_OFFSET, (byte)(view.getByte(DataHeaderFlyweight.FLAGS_OFFSET) | FLAG_RETRANSMIT));
        counters.retransmissions++;
        transmit(l, slotLength[l], why, nowNs);
    }

    private static long roundKey(final long chunk, final boolean exponentOnly)
    {
        return chunk << 1 | (exponentOnly ? 1 : 0);
    }

    /**
     * A local sign that the ranks submitted different tensor sequences: fail the client and abort the
     * job, so that every rank stops with this message rather than waiting.
     */
    private void orderingViolation(final String detail)
    {
        client.fail("job '" + client.jobName() + "' (" + jobId + ") rank " + rank + ": ordering violation, the ranks " +
            "submitted different tensor sequences: " + detail + ". Every rank must submit the same sequence of " +
            "all-reduce calls (same lengths, element type and op, in the same order)", true);
    }

    private int failEverything(final String failure)
    {
        final int failed = submissions.failAll(failure, !failedAll);
        if (!failedAll)
        {
            failedAll = true;
            inFlight = 0;
        }
        return failed;
    }
}
