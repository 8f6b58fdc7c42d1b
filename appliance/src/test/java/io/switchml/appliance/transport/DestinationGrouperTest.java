package io.switchml.appliance.transport;

import io.switchml.protocol.udp.NativeUdp;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The grouping step of the shard's result GSO, on a queue laid out as the shard lays it out (iovecs and sockaddr_in
 * entries): what it does to the queue is checked entry by entry, on seeded random batches.
 */
class DestinationGrouperTest
{
    private static final int CAPACITY = NativeUdp.MAX_MMSG;
    private static final int IOV = 0;
    private static final int NAMES = CAPACITY * NativeUdp.IOVEC_SIZE;

    private final UnsafeBuffer meta =
        new UnsafeBuffer(ByteBuffer.allocateDirect(CAPACITY * (NativeUdp.IOVEC_SIZE + NativeUdp.SOCKADDR_IN_SIZE)));
    private final DestinationGrouper grouper = new DestinationGrouper(CAPACITY);

    private record Entry(long base, long length, long destination)
    {
    }

    private void put(final int i, final Entry entry)
    {
        meta.putLong(IOV + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_BASE_OFFSET, entry.base());
        meta.putLong(IOV + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET, entry.length());
        meta.putLong(NAMES + i * NativeUdp.SOCKADDR_IN_SIZE, entry.destination());
    }

    private Entry get(final int i)
    {
        return new Entry(meta.getLong(IOV + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_BASE_OFFSET),
            meta.getLong(IOV + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET),
            meta.getLong(NAMES + i * NativeUdp.SOCKADDR_IN_SIZE));
    }

    @Test
    void groupsEachDestinationTogetherKeepingItsOrder()
    {
        final Random random = new Random(20261125);
        final long[] lengths = {1064, 40, 8972, 40_000};
        for (int round = 0; round < 500; round++)
        {
            final int from = random.nextInt(8);
            final int to = from + 2 + random.nextInt(300);
            final int destinations = 1 + random.nextInt(6);
            final List<Entry> before = new ArrayList<>();
            for (int i = from; i < to; i++)
            {
                final Entry entry = new Entry(0x10000L * i, lengths[random.nextInt(random.nextBoolean() ? 1 : 4)],
                    0x0100007f_0000_0002L + random.nextInt(destinations) * 0x10000L);
                before.add(entry);
                put(i, entry);
            }
            final boolean grouped = grouper.group(meta, IOV, NAMES, from, to);

            final List<Entry> after = new ArrayList<>();
            for (int i = from; i < to; i++)
            {
                after.add(get(i));
            }
            assertEquals(new HashSet<>(before), new HashSet<>(after), "the same datagrams, round " + round);
            assertEquals(order(before), order(after), "each destination's datagrams in their order, round " + round);
            if (grouped)
            {
                final Set<Long> closed = new HashSet<>();
                for (int i = 0; i < after.size(); i++)
                {
                    final long key = after.get(i).destination();
                    if (i > 0 && key != after.get(i - 1).destination())
                    {
                        closed.add(after.get(i - 1).destination());
                    }
                    assertFalse(closed.contains(key), "destination " + key + " split, round " + round);
                }
            }
            else
            {
                assertEquals(before, after, "unchanged when there is nothing to coalesce, round " + round);
                assertTrue(noCoalescablePair(before), "a pair of one destination and length was missed, round " + round);
            }
        }
    }

    @Test
    void leavesTheQueueAloneWhenNothingCanShareAMessage()
    {
        // one destination with lengths that change each time, another once, a third twice but with 40,000 bytes (two
        // exceed a payload)
        put(0, new Entry(1, 1064, 11));
        put(1, new Entry(2, 1064, 12));
        put(2, new Entry(3, 40_000, 13));
        put(3, new Entry(4, 40, 11));
        put(4, new Entry(5, 40_000, 13));
        put(5, new Entry(6, 1064, 11));
        assertFalse(grouper.group(meta, IOV, NAMES, 0, 6));
        assertEquals(new Entry(3, 40_000, 13), get(2));
        assertEquals(new Entry(4, 40, 11), get(3));
    }

    @Test
    void moreGroupsThanItTracksLeavesTheQueueAsItIs()
    {
        final int n = 2 * (DestinationGrouper.MAX_GROUPS + 1);
        for (int i = 0; i < n; i++)
        {
            put(i, new Entry(i, 1064, i % (DestinationGrouper.MAX_GROUPS + 1)));
        }
        assertFalse(grouper.group(meta, IOV, NAMES, 0, n));
        for (int i = 0; i < n; i++)
        {
            assertEquals(i, get(i).base());
        }
    }

    private static Map<Long, List<Long>> order(final List<Entry> entries)
    {
        final Map<Long, List<Long>> order = new HashMap<>();
        for (final Entry entry : entries)
        {
            order.computeIfAbsent(entry.destination(), d -> new ArrayList<>()).add(entry.base());
        }
        return order;
    }

    private static boolean noCoalescablePair(final List<Entry> entries)
    {
        final Map<Long, Long> lastLength = new HashMap<>();
        for (final Entry entry : entries)
        {
            final Long previous = lastLength.put(entry.destination(), entry.length());
            if (previous != null && previous == entry.length() && 2 * entry.length() <= NativeUdp.MAX_UDP_PAYLOAD)
            {
                return false;
            }
        }
        return true;
    }
}
