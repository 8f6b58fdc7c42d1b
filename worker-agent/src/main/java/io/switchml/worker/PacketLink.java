package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMac;
import io.switchml.protocol.security.PacketMacBatch;
import io.switchml.worker.transport.DatagramTransport;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The packet edge of one I/O agent, between its {@link DatagramTransport} and its slots: signs what leaves and
 * verifies what arrives when the job uses a MAC, injects test loss both ways when configured, drops malformed
 * datagrams, and counts each case.
 * <p>
 * MACs are computed up to {@link PacketMacBatch#LANES} packets at a time ({@link PacketMacBatch}): a slot's packet
 * waits here, unsigned, until that many of one length have gathered or until the next {@link #send} or
 * {@link #flush()}, and is then signed with the others and handed to the transport; datagrams received together
 * ({@link #acceptAll}) are verified together. Nothing reaches the transport unsigned: every call into it happens
 * after the packets waiting here were signed.
 */
final class PacketLink
{
    private final DatagramTransport transport;
    private final WorkerCounters.Cells counters;
    private final LossGenerator txLoss;
    private final LossGenerator rxLoss;
    private final boolean macEnabled;
    private final long macK0;
    private final long macK1;
    private final PacketMacBatch macs = new PacketMacBatch();
    private final UnsafeBuffer[] unsigned = new UnsafeBuffer[PacketMacBatch.LANES];
    private int unsignedCount;
    private int unsignedLength;
    private final int[] checking = new int[PacketMacBatch.LANES];

    PacketLink(final DatagramTransport transport, final WorkerCounters.Cells counters, final LossGenerator txLoss,
        final LossGenerator rxLoss, final boolean macEnabled, final long macK0, final long macK1)
    {
        this.transport = transport;
        this.counters = counters;
        this.txLoss = txLoss;
        this.rxLoss = rxLoss;
        this.macEnabled = macEnabled;
        this.macK0 = macK0;
        this.macK1 = macK1;
    }

    DatagramTransport transport()
    {
        return transport;
    }

    /**
     * @return true when {@link #acceptAll} checks MACs in vector lanes (the job uses MACs and this JVM has lanes).
     */
    boolean checksMacsInLanes()
    {
        return macEnabled && PacketMacBatch.vectorized();
    }

    /**
     * Sign (when the job uses a MAC) and send one datagram: a probe, or anything else whose buffer the caller reuses
     * before the next flush. The transport copies it, after the slots' packets waiting to be signed.
     */
    void send(final UnsafeBuffer datagram, final int length)
    {
        signWaiting();
        if (txLoss.shouldDrop())
        {
            counters.lossInjected++;
            return;
        }
        if (macEnabled)
        {
            PacketMac.sign(macK0, macK1, datagram, 0, length);
        }
        hand(datagram, length, false);
    }

    /**
     * Sign (when the job uses a MAC) and send a slot's update or resend from the slot's own buffer, which holds a
     * whole packet whenever the duty cycle flushes: the transport may send it from there without copying it
     * ({@link DatagramTransport#sendReference}). With a MAC it may wait here to be signed with others, until
     * {@link #flush()} at the latest; the buffer may still change until then (the newest bytes are signed and sent).
     */
    void sendSlot(final UnsafeBuffer datagram, final int length)
    {
        if (txLoss.shouldDrop())
        {
            counters.lossInjected++;
            return;
        }
        if (!macEnabled)
        {
            hand(datagram, length, true);
            return;
        }
        if (unsignedCount > 0 && length != unsignedLength)
        {
            signWaiting();
        }
        unsigned[unsignedCount++] = datagram;
        unsignedLength = length;
        if (unsignedCount == PacketMacBatch.LANES)
        {
            signWaiting();
        }
    }

    /**
     * Sign and hand to the transport the slots' packets waiting to be signed, then send what the transport holds.
     *
     * @return datagrams sent.
     */
    int flush()
    {
        signWaiting();
        return transport.flush();
    }

    /**
     * @return true when datagrams wait to be signed or sent.
     */
    boolean hasQueued()
    {
        return unsignedCount > 0 || transport.hasQueued();
    }

    private void signWaiting()
    {
        final int count = unsignedCount;
        if (count == 0)
        {
            return;
        }
        final int length = unsignedLength;
        for (int i = 0; i < count; i++)
        {
            macs.add(unsigned[i], 0);
        }
        if (macs.sign(macK0, macK1, length))
        {
            counters.macsInLanes += count;
        }
        macs.clear();
        unsignedCount = 0;
        for (int i = 0; i < count; i++)
        {
            hand(unsigned[i], length, true);
            unsigned[i] = null;
        }
    }

    private void hand(final UnsafeBuffer datagram, final int length, final boolean byReference)
    {
        if (!(byReference ? transport.sendReference(datagram, length) : transport.send(datagram, length)))
        {
            // the socket takes nothing now and the queue is full: the timers resend it; an appliance that is
            // gone ends the stream through the control connection or the progress timeout with a clear error
            counters.sendFailures++;
            return;
        }
        counters.packetsSent++;
    }

    /**
     * Count a received datagram and check it.
     *
     * @return true when it is a well-formed packet (with a valid MAC when the job uses one) and no test loss took it.
     */
    boolean accept(final UnsafeBuffer datagram, final int length)
    {
        if (!admit(datagram, length))
        {
            return false;
        }
        if (macEnabled && !PacketMac.verify(macK0, macK1, datagram, 0, length))
        {
            counters.malformedResults++;
            return false;
        }
        return true;
    }

    /**
     * Count and check datagrams received together, as {@link #accept} each, hashing their MACs together.
     *
     * @param accepted receives, for each datagram, whether it passed.
     */
    void acceptAll(final UnsafeBuffer[] datagrams, final int[] lengths, final int count, final boolean[] accepted)
    {
        int waiting = 0;
        int waitingLength = 0;
        for (int i = 0; i < count; i++)
        {
            final boolean admitted = admit(datagrams[i], lengths[i]);
            accepted[i] = admitted && !macEnabled;
            if (!admitted || !macEnabled)
            {
                continue;
            }
            if (waiting > 0 && lengths[i] != waitingLength)
            {
                verifyWaiting(datagrams, waiting, waitingLength, accepted);
                waiting = 0;
            }
            checking[waiting++] = i;
            waitingLength = lengths[i];
            if (waiting == PacketMacBatch.LANES)
            {
                verifyWaiting(datagrams, waiting, waitingLength, accepted);
                waiting = 0;
            }
        }
        if (waiting > 0)
        {
            verifyWaiting(datagrams, waiting, waitingLength, accepted);
        }
    }

    private void verifyWaiting(
        final UnsafeBuffer[] datagrams, final int waiting, final int length, final boolean[] accepted)
    {
        for (int j = 0; j < waiting; j++)
        {
            macs.add(datagrams[checking[j]], 0);
        }
        if (macs.compute(macK0, macK1, length))
        {
            counters.macsInLanes += waiting;
        }
        for (int j = 0; j < waiting; j++)
        {
            final boolean valid = macs.verified(j);
            accepted[checking[j]] = valid;
            if (!valid)
            {
                counters.malformedResults++;
            }
        }
        macs.clear();
    }

    private boolean admit(final UnsafeBuffer datagram, final int length)
    {
        counters.packetsReceived++;
        if (rxLoss.shouldDrop())
        {
            counters.lossInjected++;
            return false;
        }
        if (DataHeaderFlyweight.validate(datagram, 0, length) != DropReason.NONE)
        {
            counters.malformedResults++;
            return false;
        }
        return true;
    }
}
