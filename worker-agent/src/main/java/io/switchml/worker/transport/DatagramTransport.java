package io.switchml.worker.transport;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * The packet I/O of one worker I/O agent: a UDP socket connected to one appliance shard, and optionally a socket
 * joined to the shard's multicast group for results. Two implementations: {@link NativeDatagramTransport} (the
 * default on Linux: sendmmsg with UDP GSO for a burst of same-size updates, recvmmsg batches, poll with an eventfd
 * for wake-ups, through the FFM bindings the appliance uses too) and {@link NioDatagramTransport} (the portable
 * fallback: one datagram per system call on a {@code DatagramChannel}), chosen by {@link TransportKind}.
 * <p>
 * Everything but {@link #wakeup()} is called on the agent's thread only. No allocation per datagram.
 */
public interface DatagramTransport extends AutoCloseable
{
    /**
     * Handles one received datagram.
     */
    @FunctionalInterface
    interface Receiver
    {
        /** Most datagrams one {@link #onDatagrams} call hands over, so a receiver can size its arrays once. */
        int MAX_HAND_OVER = 64;

        /**
         * @param buffer the datagram at offset 0; valid until the call returns.
         * @param length its length in bytes.
         */
        void onDatagram(UnsafeBuffer buffer, int length);

        /**
         * @return true when {@link #onDatagrams} checks the datagrams' MACs in vector lanes: a native transport then
         * receives more large datagrams per call ({@code NativeUdp.RECEIVE_BATCH_BYTES_MAC_LANES}).
         */
        default boolean checksMacsInLanes()
        {
            return false;
        }

        /**
         * Handles datagrams received together (one recvmmsg batch, or the segments of GRO buffers), so that the
         * receiver can check them together: a job's packet MACs are hashed several at once. The default hands them
         * to {@link #onDatagram} one by one, in order.
         *
         * @param buffers each datagram at offset 0 of its buffer; valid until the call returns.
         * @param lengths their lengths in bytes.
         * @param count   datagrams, from index 0; at most {@link #MAX_HAND_OVER}.
         */
        default void onDatagrams(final UnsafeBuffer[] buffers, final int[] lengths, final int count)
        {
            for (int i = 0; i < count; i++)
            {
                onDatagram(buffers[i], lengths[i]);
            }
        }
    }

    /**
     * The socket's local port, to announce in the JOIN; known once opened.
     */
    int localPort();

    /**
     * Fix the appliance shard's address: every send goes there.
     */
    void connect(java.net.Inet4Address address, int port) throws java.io.IOException;

    /**
     * Receive results multicast to a group as well, on a second socket bound to the group's port.
     */
    void joinGroup(java.net.Inet4Address group, int port, java.net.Inet4Address interfaceAddress) throws java.io.IOException;

    /**
     * Called on the agent's thread before its first duty cycle.
     */
    void onStart();

    /**
     * Queue (or send) one datagram; its bytes are copied, so the caller may reuse the buffer at once.
     *
     * @return false when it could be neither queued nor sent (counted by the caller; the retransmission timers
     * recover it).
     */
    boolean send(UnsafeBuffer datagram, int length);

    /**
     * As {@link #send}, but the transport may read the datagram where it is at the next {@link #flush} instead of
     * copying it now: the caller must not change those bytes until that flush returns, and may change them after it
     * (a transport copies what it leaves queued). The default copies.
     */
    default boolean sendReference(final UnsafeBuffer datagram, final int length)
    {
        return send(datagram, length);
    }

    /**
     * Hand what is queued to the kernel, as far as it takes it without blocking; the rest stays queued.
     *
     * @return datagrams sent.
     */
    int flush();

    /**
     * @return true when datagrams wait to be sent.
     */
    boolean hasQueued();

    /**
     * Receive what has arrived, handing each datagram to the receiver, until the sockets are empty or
     * {@code limit} datagrams were handed over: the group's socket first, then the unicast one. A unicast result is
     * the answer to a probe, sent after the group's results already queued here (the slot it names had completed);
     * handed over first, it made this rank send that slot's next update before the earlier slots' and so changed the
     * order in which the appliance completes them, which every other rank then saw as a burst of holes.
     *
     * @return datagrams received.
     */
    int receive(Receiver receiver, int limit);

    /**
     * @return true when the last {@link #receive} found every socket empty: every datagram that arrived before it
     * started has been handed over.
     */
    boolean drained();

    /**
     * Block until a datagram arrives, {@link #wakeup()} is called, the socket can take queued datagrams, or the
     * timeout passes.
     */
    void await(long timeoutMs);

    /**
     * End an {@link #await} now or make the next one return at once. Any thread.
     */
    void wakeup();

    /**
     * @return system calls made to send and to receive, datagrams dropped as truncated, and datagrams the kernel
     * refused (EAGAIN aside): for the counters.
     */
    long sendCalls();

    long receiveCalls();

    long truncated();

    long sendErrors();

    /**
     * @return what it is, for the start-up report: "native (sendmmsg, UDP GSO up to 64 segments, recvmmsg batch 32)".
     */
    String description();

    @Override
    void close();
}
