package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.worker.transport.DatagramTransport;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;

/**
 * The appliance's part in a {@link DataPathRehearsal}: every update comes back as its result, and now and then the
 * way a real network and a real appliance send them back, so that the rare paths of the worker run before the job
 * does too. The JIT compiles a method from its profile and leaves out a branch that the profile never saw taken; when
 * the branch is taken later, the compiled method is thrown away (an uncommon trap) and runs interpreted or in C1 code
 * until C2 has compiled it again. On a loopback job of 4 agent JVMs on 2 cores that happened to the I/O agent's
 * result handling, loss recovery and receive loop during the first dozen all-reduces (one probe per 1,000 packets is
 * enough to take each branch), each time for several all-reduces (docs/bench/worker-transport-2026-11-25.md, session
 * 31). So, counting updates, after the first {@link #PLAIN_UPDATES} it
 * <ul>
 * <li>drops one now and then: the later results make the worker suspect it and probe, it answers the probe with a
 * NACK as the appliance would, and answers the resent update with a shadow result (flagged as a retransmission);</li>
 * <li>answers a probe about a slot it did not drop with PENDING, and the next one with a shadow result (so the worker
 * gets that result twice, the second time stale);</li>
 * <li>sends a result twice;</li>
 * <li>holds a result back until after the next one (reordered).</li>
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
    /** Every this many updates (offset from the drops), a result is sent twice. */
    static final int DUPLICATE_EVERY = 89;
    /** Every this many updates (offset from the others), a result is held back until after the next. */
    static final int REORDER_EVERY = 83;
    private static final int MAX_SLOTS = 256;

    private final int maxPacket;
    private final UnsafeBuffer copies;
    private final int[] copyLength = new int[MAX_SLOTS];
    private final long[] copySequence = new long[MAX_SLOTS];
    private final long[] droppedSequence = new long[MAX_SLOTS];
    private final int[] probesAnswered = new int[MAX_SLOTS];
    private final UnsafeBuffer held;
    private final UnsafeBuffer answer = new UnsafeBuffer(new byte[DataHeaderFlyweight.HEADER_LENGTH]);
    private final UnsafeBuffer copyView = new UnsafeBuffer(new byte[0]);
    private int heldLength;
    private long updates;

    /**
     * @param transport the reflector's socket.
     * @param lanes     elements per packet of the rehearsal.
     */
    RehearsalReflector(final DatagramTransport transport, final int lanes)
    {
        super(transport, "switchml-rehearsal-reflector");
        maxPacket = DataHeaderFlyweight.HEADER_LENGTH + lanes * Integer.BYTES;
        copies = new UnsafeBuffer(new byte[MAX_SLOTS * maxPacket]);
        held = new UnsafeBuffer(new byte[maxPacket]);
        java.util.Arrays.fill(droppedSequence, -1);
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
        if (slot < 0 || slot >= MAX_SLOTS)
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

    private void onUpdate(final UnsafeBuffer buffer, final int length, final int slot)
    {
        final long sequence = header.chunkSequence();
        final boolean resent = (header.flags() & DataHeaderFlyweight.FLAG_RETRANSMIT) != 0;
        final long n = ++updates;
        final boolean rare = n > PLAIN_UPDATES && !resent;
        if (rare && n % DROP_EVERY == 13)
        {
            droppedSequence[slot] = sequence;
            return;
        }
        droppedSequence[slot] = -1;
        probesAnswered[slot] = 0;
        header.type(DataHeaderFlyweight.TYPE_RESULT).mac(0L);
        if (!resent)
        {
            header.flags(header.flags() & ~DataHeaderFlyweight.FLAG_RETRANSMIT);
        }
        copies.putBytes(slot * maxPacket, buffer, 0, length);
        copyLength[slot] = length;
        copySequence[slot] = sequence;
        if (rare && heldLength == 0 && n % REORDER_EVERY == 41)
        {
            held.putBytes(0, buffer, 0, length);
            heldLength = length;
            return;
        }
        transport.send(buffer, length);
        if (rare && n % DUPLICATE_EVERY == 29)
        {
            transport.send(buffer, length);
        }
        if (heldLength != 0)
        {
            transport.send(held, heldLength);
            heldLength = 0;
        }
    }

    private void onProbe(final UnsafeBuffer probe, final int slot)
    {
        final long sequence = header.chunkSequence();
        if (droppedSequence[slot] == sequence)
        {
            answer(probe, DataHeaderFlyweight.TYPE_NACK);
        }
        else if (copySequence[slot] == sequence && (probesAnswered[slot]++ & 1) == 1)
        {
            final int at = slot * maxPacket;
            copies.putByte(at + DataHeaderFlyweight.FLAGS_OFFSET,
                (byte)(copies.getByte(at + DataHeaderFlyweight.FLAGS_OFFSET) | DataHeaderFlyweight.FLAG_RETRANSMIT));
            copyView.wrap(copies, at, copyLength[slot]);
            transport.send(copyView, copyLength[slot]);
        }
        else
        {
            answer(probe, DataHeaderFlyweight.TYPE_PENDING);
        }
    }

    /**
     * A header-only answer to a probe, as the appliance writes it: the probe's header with another type, MAC zero.
     */
    private void answer(final UnsafeBuffer probe, final byte type)
    {
        answer.putBytes(0, probe, 0, DataHeaderFlyweight.HEADER_LENGTH);
        answer.putByte(DataHeaderFlyweight.TYPE_OFFSET, type);
        answer.putLong(DataHeaderFlyweight.MAC_OFFSET, 0L, ByteOrder.BIG_ENDIAN);
        transport.send(answer, DataHeaderFlyweight.HEADER_LENGTH);
    }
}
