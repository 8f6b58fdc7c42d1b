package io.switchml.appliance.backend;

import java.util.Map;
import java.util.TreeMap;

/**
 * First-fit allocation of contiguous ranges of the slot array to jobs, with neighbouring free ranges merged on
 * release: the slot (or register) space of an offload backend. Control threads only; synchronized.
 */
public final class SlotRanges
{
    private final int capacity;
    private final TreeMap<Integer, Integer> free = new TreeMap<>();
    private int freeTotal;

    public SlotRanges(final int capacity)
    {
        this.capacity = capacity;
        free.put(0, capacity);
        freeTotal = capacity;
    }

    /**
     * @return the start of a free range of that length, now taken, or -1 when no free range is long enough.
     */
    public synchronized int allocate(final int length)
    {
        for (final Map.Entry<Integer, Integer> range : free.entrySet())
        {
            if (range.getValue() >= length)
            {
                final int start = range.getKey();
                free.remove(start);
                if (range.getValue() > length)
                {
                    free.put(start + length, range.getValue() - length);
                }
                freeTotal -= length;
                return start;
            }
        }
        return -1;
    }

    public synchronized void release(final int start, final int length)
    {
        int from = start;
        int size = length;
        final Map.Entry<Integer, Integer> before = free.floorEntry(start);
        if (before != null && before.getKey() + before.getValue() == start)
        {
            from = before.getKey();
            size += before.getValue();
            free.remove(before.getKey());
        }
        final Integer after = free.get(start + length);
        if (after != null)
        {
            size += after;
            free.remove(start + length);
        }
        free.put(from, size);
        freeTotal += length;
    }

    public synchronized int largestFree()
    {
        int largest = 0;
        for (final int length : free.values())
        {
            largest = Math.max(largest, length);
        }
        return largest;
    }

    public synchronized int freeTotal()
    {
        return freeTotal;
    }

    public int capacity()
    {
        return capacity;
    }
}
