package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.security.PacketMac;
import io.switchml.worker.transport.DatagramTransport;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A stand-in for the appliance on a local socket: a thread that receives a worker's datagrams on its own transport
 * and answers them as {@link #onDatagram} decides, for the join-time rehearsal ({@link DataPathRehearsal}) and for
 * tests that script the appliance's answers. Not the appliance: it sums nothing.
 */
abstract class LoopbackPeer implements DatagramTransport.Receiver
{
    final DatagramTransport transport;
    /** The peer thread's view of a datagram's header. */
    final DataHeaderFlyweight header = new DataHeaderFlyweight();
    /** The key of the job the peer stands in for: it signs what it sends when MACs are on. */
    private final JobJoin.JoinTerms terms;
    private final Thread thread;
    private volatile boolean running = true;

    LoopbackPeer(final DatagramTransport transport, final String threadName)
    {
        this(transport, threadName, JobJoin.JoinTerms.NO_APPLIANCE);
    }

    /**
     * @param terms the job's MAC and key as a join reply would give them: the worker checks the peer's packets, and
     *              the peer signs them, under that key.
     */
    LoopbackPeer(final DatagramTransport transport, final String threadName, final JobJoin.JoinTerms terms)
    {
        this.transport = transport;
        this.terms = terms;
        this.thread = Thread.ofPlatform().daemon().name(threadName).unstarted(this::loop);
    }

    /**
     * Pair a worker's transport with this peer on loopback, start the peer, and make the worker's client of it: the
     * peer's MAC and key, the given control socket (the other end of which stays silent).
     */
    final WorkerClient connectClient(final WorkerContext context, final DatagramTransport worker,
        final java.net.Inet4Address loopback, final java.net.Socket control, final int jobId) throws java.io.IOException
    {
        worker.connect(loopback, transport.localPort());
        transport.connect(loopback, worker.localPort());
        thread.start();
        return new WorkerClient(context, control, new DatagramTransport[] {worker}, jobId, terms, null);
    }

    /**
     * Called on the peer's thread once per turn of its loop, before it receives: for answers that are due at a time
     * rather than on a datagram. Sends queue on {@link #transport} and go out at the turn's flush.
     */
    void onTurn()
    {
    }

    private void loop()
    {
        transport.onStart();
        while (running)
        {
            onTurn();
            if (transport.receive(this, 256) == 0 && transport.drained())
            {
                transport.await(1);
            }
            transport.flush();
        }
    }

    /**
     * Send an update back as its result, as the appliance would for a slot it completed: the update's own header
     * retyped (the retransmission flag cleared) and lanes, signed when MACs are on.
     */
    final void sendAsResult(final UnsafeBuffer update, final int length)
    {
        toResult(update);
        send(update, length);
    }

    /**
     * Sign (with MACs on) and queue a datagram on {@link #transport}.
     */
    final void send(final UnsafeBuffer datagram, final int length)
    {
        if (terms.macEnabled())
        {
            PacketMac.sign(terms.macK0(), terms.macK1(), datagram, 0, length);
        }
        transport.send(datagram, length);
    }

    /**
     * Turn an update into its result in place, as {@link #sendAsResult} sends it.
     */
    final void toResult(final UnsafeBuffer update)
    {
        header.wrap(update, 0);
        header.type(DataHeaderFlyweight.TYPE_RESULT).flags(header.flags() & ~DataHeaderFlyweight.FLAG_RETRANSMIT).mac(0L);
    }

    final void close()
    {
        running = false;
        transport.wakeup();
        try
        {
            thread.join(1_000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        transport.close();
    }
}
