package io.switchml.appliance.transport;

import io.switchml.protocol.udp.NativeUdp;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Reorders a shard's queued datagrams so that those to one destination sit next to each other, in the order they were
 * queued, so that the shard's GSO coalescing finds that destination's consecutive datagrams of one length as runs.
 * <p>
 * Unicast results alternate destinations: a slot completes and its result goes to each member in turn, then the next
 * slot's does. Without this step no two consecutive datagrams share a destination and every result costs the kernel a
 * whole UDP send (on loopback, its delivery into the receiver's socket as well). Grouped, the results of the batch's
 * slots for one member go out as one UDP GSO message. Datagrams to different destinations may change order relative
 * to each other; nothing depends on that order (a worker only compares the order of its own results, and those keep
 * theirs).
 * <p>
 * Works in place on the sendmmsg queue's iovec and sockaddr_in arrays (each message header points at its own entry
 * of both, so moving the entries' contents moves the datagrams). A stable counting sort over at most
 * {@link #MAX_GROUPS} destinations; a batch with more leaves the queue as it is. No allocation: the
 * scratch arrays are sized for the queue once.
 */
final class DestinationGrouper
{
    /** Distinct destinations one batch may hold and still be grouped. */
    static final int MAX_GROUPS = 64;

    private final long[] groupDestination = new long[MAX_GROUPS];
    private final long[] groupLength = new long[MAX_GROUPS];
    private final int[] groupStart = new int[MAX_GROUPS];
    private final int[] groupOf;
    private final long[] iovBase;
    private final long[] iovLength;
    private final long[] destination;

    /**
     * @param capacity the most datagrams the queue holds.
     */
    DestinationGrouper(final int capacity)
    {
        groupOf = new int[capacity];
        iovBase = new long[capacity];
        iovLength = new long[capacity];
        destination = new long[capacity];
    }

    /**
     * Group the queued datagrams {@code [from, to)}.
     *
     * @param meta       the buffer holding the queue's arrays.
     * @param iovOffset  offset of iovec 0 in {@code meta}.
     * @param nameOffset offset of sockaddr_in 0 in {@code meta}.
     * @param from       first queued datagram.
     * @param to         one past the last.
     * @return true when a destination has two datagrams of one length in a row (of its own) that fit one UDP payload
     * twice (the queue now holds each destination's datagrams adjacent); false when there is nothing to coalesce or
     * too many destinations (the queue is unchanged).
     */
    boolean group(final UnsafeBuffer meta, final int iovOffset, final int nameOffset, final int from, final int to)
    {
        int groups = 0;
        boolean coalescable = false;
        boolean ordered = true;
        int previous = -1;
        for (int i = from; i < to; i++)
        {
            final long key = meta.getLong(nameOffset + i * NativeUdp.SOCKADDR_IN_SIZE);
            final long length = meta.getLong(iovOffset + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET);
            int g = 0;
            while (g < groups && groupDestination[g] != key)
            {
                g++;
            }
            if (g == groups)
            {
                if (groups == MAX_GROUPS)
                {
                    return false;
                }
                groupDestination[g] = key;
                groupStart[g] = 0;
                groups++;
            }
            else if (groupLength[g] == length && 2 * length <= NativeUdp.MAX_UDP_PAYLOAD)
            {
                coalescable = true;
            }
            groupLength[g] = length;
            ordered &= g >= previous;
            previous = g;
            groupOf[i - from] = g;
            groupStart[g]++;
        }
        if (!coalescable)
        {
            return false;
        }
        if (ordered)
        {
            return true;
        }
        int start = from;
        for (int g = 0; g < groups; g++)
        {
            final int count = groupStart[g];
            groupStart[g] = start;
            start += count;
        }
        for (int i = from; i < to; i++)
        {
            final int slot = groupStart[groupOf[i - from]]++ - from;
            final int iov = iovOffset + i * NativeUdp.IOVEC_SIZE;
            iovBase[slot] = meta.getLong(iov + NativeUdp.IOV_BASE_OFFSET);
            iovLength[slot] = meta.getLong(iov + NativeUdp.IOV_LEN_OFFSET);
            destination[slot] = meta.getLong(nameOffset + i * NativeUdp.SOCKADDR_IN_SIZE);
        }
        for (int i = from; i < to; i++)
        {
            final int iov = iovOffset + i * NativeUdp.IOVEC_SIZE;
            meta.putLong(iov + NativeUdp.IOV_BASE_OFFSET, iovBase[i - from]);
            meta.putLong(iov + NativeUdp.IOV_LEN_OFFSET, iovLength[i - from]);
            meta.putLong(nameOffset + i * NativeUdp.SOCKADDR_IN_SIZE, destination[i - from]);
        }
        return true;
    }
}
