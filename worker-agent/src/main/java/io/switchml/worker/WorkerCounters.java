package io.switchml.worker;

/**
 * Counters of one worker client, summed over its I/O agents (one per appliance shard) and its
 * submitting threads. Each agent writes only its own cells, submitting threads (under the client's
 * submission lock) theirs; readers on other threads see values that may lag.
 */
public final class WorkerCounters
{
    /** One agent's counters: a single writer, any number of readers. */
    static final class Cells
    {
        volatile long packetsSent;
        volatile long packetsReceived;
        volatile long retransmissions;
        volatile long fastRetransmissions;
        volatile long tailProbes;
        volatile long probesSent;
        volatile long nacksReceived;
        volatile long staleResults;
        volatile long malformedResults;
        volatile long sendFailures;
        volatile long lossInjected;
        volatile long allReduces;
        volatile long exponentOnlyPackets;
        volatile long lookaheadMisses;
    }

    private final Cells[] cells;

    WorkerCounters(final int agents)
    {
        cells = new Cells[agents];
        for (int i = 0; i < agents; i++)
        {
            cells[i] = new Cells();
        }
    }

    Cells cells(final int agent)
    {
        return cells[agent];
    }

    public long packetsSent()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.packetsSent;
        }
        return sum;
    }

    public long packetsReceived()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.packetsReceived;
        }
        return sum;
    }

    /** @return updates sent again after their slot's timer expired. */
    public long retransmissions()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.retransmissions;
        }
        return sum;
    }

    /** @return results for a chunk this worker had already completed (duplicates, late shadow copies). */
    /**
     * @return header-only probes sent about updates suspected lost (see {@link WorkerContext#fastRetransmit}),
     * tail probes included; not counted as retransmissions.
     */
    public long probesSent()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.probesSent;
        }
        return sum;
    }

    /**
     * @return NACKs received: the appliance's answers to probes for updates it has not got.
     */
    public long nacksReceived()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.nacksReceived;
        }
        return sum;
    }

    /**
     * @return resends of updates the appliance answered a probe for with a NACK (fast retransmission),
     * included in {@link #retransmissions()}.
     */
    public long fastRetransmissions()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.fastRetransmissions;
        }
        return sum;
    }

    /**
     * @return tail-loss probes: probes about the newest outstanding packet after a quiet period, included in
     * {@link #probesSent()}.
     */
    public long tailProbes()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.tailProbes;
        }
        return sum;
    }

    public long staleResults()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.staleResults;
        }
        return sum;
    }

    public long malformedResults()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.malformedResults;
        }
        return sum;
    }

    public long sendFailures()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.sendFailures;
        }
        return sum;
    }

    public long lossInjected()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.lossInjected;
        }
        return sum;
    }

    /** @return all-reduce calls completed successfully. */
    public long allReduces()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.allReduces;
        }
        return sum;
    }

    /**
     * @return exponent-only updates sent (first transmissions; resends count as retransmissions): one
     * per slot each time a slot starts on a chunk without an agreed exponent, i.e. at the start of the
     * stream and after the stream ran dry on that slot.
     */
    public long exponentOnlyPackets()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.exponentOnlyPackets;
        }
        return sum;
    }

    /**
     * @return float updates sent with an unknown look-ahead exponent because the next chunk on their
     * slot had not been submitted yet; each makes the slot's next chunk start with an exponent-only round.
     */
    public long lookaheadMisses()
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += c.lookaheadMisses;
        }
        return sum;
    }

    @Override
    public String toString()
    {
        return "sent=" + packetsSent() + " received=" + packetsReceived() + " retransmissions=" + retransmissions() +
            " (fast " + fastRetransmissions() + ") probes=" + probesSent() + " (tail " + tailProbes() + ") nacks=" +
            nacksReceived() +
            " staleResults=" + staleResults() + " malformed=" + malformedResults() + " sendFailures=" + sendFailures() +
            " lossInjected=" + lossInjected() + " allReduces=" + allReduces() + " exponentOnly=" + exponentOnlyPackets() +
            " lookaheadMisses=" + lookaheadMisses();
    }
}
