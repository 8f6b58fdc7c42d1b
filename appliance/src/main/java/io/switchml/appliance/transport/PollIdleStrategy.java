package io.switchml.appliance.transport;

import io.switchml.protocol.udp.NativeUdp;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Idles a native shard by waiting in poll(2) on its socket, with a short timeout so that the shard's
 * periodic work and shutdown still run. A datagram's arrival wakes the shard at once, and an idle shard
 * takes no CPU: on a host where the appliance shares two cores with its workers, a spinning shard would
 * take a whole core from them, and a parking one (Agrona's backoff ending in parkNanos) would add up to
 * its park period to every round trip that finds it parked. A few spins first catch the next datagram of a
 * burst without a system call's sleep and wake-up.
 * <p>
 * Used by the shard's own thread only; allocation-free.
 */
final class PollIdleStrategy implements IdleStrategy
{
    private final UnsafeBuffer pollfd;
    private final long pollfdAddress;
    private final int maxSpins;
    private final int timeoutMs;
    private int spins;
    private long polls;

    /**
     * @param pollfd        a view of the shard's struct pollfd, whose fd and events it sets.
     * @param pollfdAddress native address of that struct pollfd.
     * @param fd            socket to wait on.
     * @param maxSpins      idle turns spent spinning before polling.
     * @param timeoutMs     longest wait in poll.
     */
    PollIdleStrategy(
        final UnsafeBuffer pollfd, final long pollfdAddress, final int fd, final int maxSpins, final int timeoutMs)
    {
        this.pollfd = pollfd;
        this.pollfdAddress = pollfdAddress;
        this.maxSpins = maxSpins;
        this.timeoutMs = timeoutMs;
        pollfd.putInt(NativeUdp.POLLFD_FD_OFFSET, fd);
        pollfd.putShort(NativeUdp.POLLFD_EVENTS_OFFSET, NativeUdp.POLLIN);
    }

    /**
     * Also wake when the socket can take more datagrams: the shard has results waiting to be sent.
     */
    void awaitWritable(final boolean writable)
    {
        pollfd.putShort(NativeUdp.POLLFD_EVENTS_OFFSET, writable ? (short)(NativeUdp.POLLIN | NativeUdp.POLLOUT) : NativeUdp.POLLIN);
    }

    public void idle(final int workCount)
    {
        if (workCount > 0)
        {
            spins = 0;
        }
        else
        {
            idle();
        }
    }

    public void idle()
    {
        if (spins < maxSpins)
        {
            spins++;
            Thread.onSpinWait();
            return;
        }
        polls++;
        NativeUdp.poll(pollfdAddress, 1L, timeoutMs);
    }

    public void reset()
    {
        spins = 0;
    }

    /**
     * @return how many times it waited in poll; read by the owning thread or for diagnostics.
     */
    long polls()
    {
        return polls;
    }

    public String alias()
    {
        return "poll";
    }
}
