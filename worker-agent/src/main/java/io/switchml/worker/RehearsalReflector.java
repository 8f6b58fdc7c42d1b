package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.worker.transport.DatagramTransport;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The appliance's part in a {@link DataPathRehearsal}: every update comes back as its result, and now and then the
 * way a real network and a real appliance send them back, so that the rare paths of the worker run before the job
 * does too. The JIT compiles a method from its profile and leaves out a branch that the profile never saw taken; when
 * the branch is taken later, the compiled method is thrown away (an uncommon trap) and runs interpreted or in C1 code
 * until C2 has compiled it again. On a loopback job of 4 agent JVMs on 2 cores that happened to the I/O agent's
 * result handling, loss recovery and receive loop during the first dozen all-reduces (one probe per 1,000 packets is
 * enough to take each branch), each time for several all-reduces (docs/bench/worker-transport-2026-11-25.md, session
 * 31). So, counting updates, after the first {@link #PLAIN_UPDATES} (from about the rehearsal's 4th all-reduce on) it
 * <ul>
 * <li>drops one now and then: the later results make the worker suspect it and probe, it answers the probe with a
 * NACK as the appliance would (it has not got that round's update), and the resent update with a result;</li>
 * <li>answers a probe about a round whose result went out with PENDING, and the next one with the result from its copy
 * of it, flagged as a retransmission (a shadow result; the worker may then get that result twice, once stale), as it
 * answers a resent update whose result went out;</li>
 * <li>sends a result twice;</li>
 * <li>holds a result back until after the next one, or its next turn (reordered);</li>
 * <li>keeps a round waiting, as for another rank, until the worker probes it: PENDING, then the result.</li>
 * </ul>
 * Its sums are not the job's and nobody reads them; the rehearsal is bounded by its deadline. One thread; it keeps a
 * copy of each slot's latest result (the rehearsal's pool is small) and allocates nothing per packet.
 */
final class RehearsalReflector extends LoopbackPeer
{
    /**
     * Updates reflected plainly first: a rehearsal cut short (4 agent JVMs starting at once on 2 cores completed 1-12
     * of its all-reduces) spends its time on the common path, which the first all-reduce needs compiled most.
     */
    static final long PLAIN_UPDATES = 1024;
    /** Every this many updates, one is dropped. */
    static final int DROP_EVERY = 97;
    /** Every this many updates, a result is sent twice. */
    static final int DUPLICATE_EVERY = 89;
    /** Every this many updates, a result is held back until after the next (or until the reflector's next turn). */
    static final int REORDER_EVERY = 83;
    /** Every this many updates, the round waits (for another rank, as it were) until the worker probes it. */
    static final int STALL_EVERY = 79;
    /** Where in its period each happens: apart, so that they seldom fall on one update (the first that applies wins). */
    private static final int DROP_AT = 13;
    private static final int DUPLICATE_AT = 29;
    private static final int REORDER_AT = 41;
    private static final int STALL_AT = 61;
    /** The flags that tell a slot's round apart besides its chunk: pool version and exponent-only. */
    private static final int ROUND_FLAGS = DataHeaderFlyweight.FLAG_POOL_VERSION | DataHeaderFlyweight.FLAG_EXPONENT_ONLY;

    private final int slots;
    private final int maxPacket;
    /** The latest result of each slot, to answer a probe or a resend with, as the appliance's shadow copy does. */
    private final UnsafeBuffer copies;
    private final int[] copyLength;
    private final long[] copySequence;
    private final int[] copyFlags;
    private final int[] probesAnswered;
    private final boolean[] stalled;
    private final UnsafeBuffer held;
    private final UnsafeBuffer copyView = new UnsafeBuffer(new byte[0]);
    private int heldLength;
    private long updates;

    /**
     * @param transport the reflector's socket.
     * @param lanes     elements per packet of the rehearsal.
     * @param slots     slot indices of the rehearsal's pool (every shard's).
     * @param terms     MAC and key: the job's MAC setting, so that its packet path is the one rehearsed.
     */
    RehearsalReflector(final DatagramTransport transport, final int lanes, final int slots, final JobJoin.JoinTerms terms)
    {
        super(transport, "switchml-rehearsal-reflector", terms);
        this.slots = slots;
        maxPacket = DataHeaderFlyweight.HEADER_LENGTH + lanes * Integer.BYTES;
        copies = new UnsafeBuffer(new byte[slots * maxPacket]);
        copyLength = new int[slots];
        copySequence = new long[slots];
        copyFlags = new int[slots];
        probesAnswered = new int[slots];
        stalled = new boolean[slots];
        held = new UnsafeBuffer(new byte[maxPacket]);
        java.util.Arrays.fill(copySequence, -1);
    }

    public void onDatagram(final UnsafeBuffer buffer, final int length)
    {
        if (length < DataHeaderFlyweight.HEADER_LENGTH || length > maxPacket)
        {
            return;
        }
        header.wrap(buffer, 0);
        final int slot = header.slotIndex();
        if (slot < 0 || slot >= slots)
        {
            return;
        }
        final byte type = header.type();
        if (type == DataHeaderFlyweight.TYPE_PROBE)
        {
            onProbe(buffer, slot);
        }
        else if (type == DataHeaderFlyweight.TYPE_UPDATE)
        {
            onUpdate(buffer, length, slot);
        }
    }

    /**
     * A held result goes out at the latest on the reflector's next turn: after the results of that turn's batch.
     */
    void onTurn()
    {
        sendHeld();
    }

    private void onUpdate(final UnsafeBuffer buffer, final int length, final int slot)
    {
        final long sequence = header.chunkSequence();
        final int roundFlags = header.flags() & ROUND_FLAGS;
        if ((header.flags() & DataHeaderFlyweight.FLAG_RETRANSMIT) != 0 && holds(slot, sequence, roundFlags))
        {
            stalled[slot] = false;
            // a resend of an update whose result went out: the shadow copy answers, flagged as a retransmission
            sendCopy(slot, true);
            return;
        }
        final long n = ++updates;
        final boolean rare = n > PLAIN_UPDATES;
        if (rare && n % DROP_EVERY == DROP_AT)
        {
            return;
        }
        toResult(buffer);
        copies.putBytes(slot * maxPacket, buffer, 0, length);
        copyLength[slot] = length;
        copySequence[slot] = sequence;
        copyFlags[slot] = roundFlags;
        probesAnswered[slot] = 0;
        stalled[slot] = rare && n % STALL_EVERY == STALL_AT;
        if (stalled[slot])
        {
            return;
        }
        if (rare && heldLength == 0 && n % REORDER_EVERY == REORDER_AT)
        {
            held.putBytes(0, buffer, 0, length);
            heldLength = length;
            return;
        }
        send(buffer, length);
        if (rare && n % DUPLICATE_EVERY == DUPLICATE_AT)
        {
            send(buffer, length);
        }
        sendHeld();
    }

    /**
     * As the appliance answers: NACK when it has not got this round's update (dropped, or lost on the way), else
     * PENDING and the shadow copy's result in turn (a completed round whose result the worker has not seen yet).
     */
    private void onProbe(final UnsafeBuffer probe, final int slot)
    {
        if (!holds(slot, header.chunkSequence(), header.flags() & ROUND_FLAGS))
        {
            answer(probe, DataHeaderFlyweight.TYPE_NACK);
        }
        else if (stalled[slot])
        {
            // the round was waiting: PENDING, then its result completes it as it would when the last rank's update came
            stalled[slot] = false;
            answer(probe, DataHeaderFlyweight.TYPE_PENDING);
            sendCopy(slot, false);
        }
        else if ((probesAnswered[slot]++ & 1) == 1)
        {
            sendCopy(slot, true);
        }
        else
        {
            answer(probe, DataHeaderFlyweight.TYPE_PENDING);
        }
    }

    private boolean holds(final int slot, final long sequence, final int roundFlags)
    {
        return copySequence[slot] == sequence && copyFlags[slot] == roundFlags;
    }

    /**
     * Send a slot's copy of its latest result: as a shadow result (flagged as a retransmission) or as the round's
     * normal completion.
     */
    private void sendCopy(final int slot, final boolean shadow)
    {
        final int flagsAt = slot * maxPacket + DataHeaderFlyweight.FLAGS_OFFSET;
        final byte flags = copies.getByte(flagsAt);
        copies.putByte(flagsAt, (byte)(shadow ?
            flags | DataHeaderFlyweight.FLAG_RETRANSMIT : flags & ~DataHeaderFlyweight.FLAG_RETRANSMIT));
        copyView.wrap(copies, slot * maxPacket, copyLength[slot]);
        send(copyView, copyLength[slot]);
    }

    private void sendHeld()
    {
        if (heldLength != 0)
        {
            send(held, heldLength);
            heldLength = 0;
        }
    }

    /**
     * A header-only answer to a probe, as the appliance writes it: the probe's header (which {@link #header} wraps)
     * retyped in place, MAC zero; the send copies it.
     */
    private void answer(final UnsafeBuffer probe, final byte type)
    {
        header.type(type).mac(0L);
        send(probe, DataHeaderFlyweight.HEADER_LENGTH);
    }
}
