package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMac;
import io.switchml.worker.transport.DatagramTransport;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The packet edge of one I/O agent, between its {@link DatagramTransport} and its slots: signs what leaves and
 * verifies what arrives when the job uses a MAC, injects test loss both ways when configured, drops malformed
 * datagrams, and counts each case.
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
     * Sign (when the job uses a MAC) and send one datagram: a probe, or anything else whose buffer the caller reuses
     * before the next flush. The transport copies it.
     */
    void send(final UnsafeBuffer datagram, final int length)
    {
        send(datagram, length, false);
    }

    /**
     * Sign (when the job uses a MAC) and send a slot's update or resend from the slot's own buffer, which holds a whole,
     * signed packet whenever the duty cycle flushes: the transport may send it from there without copying it
     * ({@link DatagramTransport#sendReference}).
     */
    void sendSlot(final UnsafeBuffer datagram, final int length)
    {
        send(datagram, length, true);
    }

    private void send(final UnsafeBuffer datagram, final int length, final boolean byReference)
    {
        if (txLoss.shouldDrop())
        {
            counters.lossInjected++;
            return;
        }
        if (macEnabled)
        {
            PacketMac.sign(macK0, macK1, datagram, 0, length);
        }
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
        counters.packetsReceived++;
        if (rxLoss.shouldDrop())
        {
            counters.lossInjected++;
            return false;
        }
        if (DataHeaderFlyweight.validate(datagram, 0, length) != DropReason.NONE ||
            (macEnabled && !PacketMac.verify(macK0, macK1, datagram, 0, length)))
        {
            counters.malformedResults++;
            return false;
        }
        return true;
    }
}
