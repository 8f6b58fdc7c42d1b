package io.switchml.appliance.control;

import java.util.BitSet;

/**
 * Job ids, handed out in increasing order. Job j's results are multicast to the group base + (j mod 65536) (see
 * {@code ShardProcessor.groupOf} and the XDP backend), so an id whose group a live job already holds is skipped: two
 * live jobs 65,536 ids apart would otherwise share a group, and each job's members would receive the other's results.
 * Ids stay positive: after {@link Integer#MAX_VALUE} they start again at 1, skipping the live ones. Not thread-safe;
 * the registry calls it under its lock.
 */
final class JobIds
{
    /**
     * Result groups one appliance has, one per id modulo this.
     */
    static final int GROUPS = 1 << 16;

    private int next = 1;

    /**
     * The id the next job gets, without taking it.
     *
     * @param liveIds the ids of the jobs that exist now.
     * @return the first id from the next one on whose group (id mod {@link #GROUPS}) no live job holds.
     * @throws IllegalStateException when every group is held, which the counters' limit on live jobs rules out.
     */
    int peek(final Iterable<Integer> liveIds)
    {
        final BitSet held = new BitSet(GROUPS);
        for (final int id : liveIds)
        {
            held.set(id & (GROUPS - 1));
        }
        int id = next;
        for (int i = 0; i < GROUPS; i++)
        {
            if (!held.get(id & (GROUPS - 1)))
            {
                return id;
            }
            id = id == Integer.MAX_VALUE ? 1 : id + 1;
        }
        throw new IllegalStateException("every one of the " + GROUPS + " result groups is held by a live job");
    }

    /**
     * Take an id {@link #peek} returned: the next one starts after it.
     */
    void take(final int id)
    {
        next = id == Integer.MAX_VALUE ? 1 : id + 1;
    }

    /**
     * Where the next {@link #peek} starts; for tests of the wrap and of groups held 65,536 ids back.
     */
    void startAt(final int id)
    {
        next = id;
    }
}
