package io.switchml.worker;

import java.util.function.ToLongFunction;

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
        volatile long pendingsReceived;
        volatile long staleResults;
        volatile long malformedResults;
        volatile long sendFailures;
        volatile long lossInjected;
        volatile long allReduces;
        volatile long exponentOnlyPackets;
        volatile long lookaheadMisses;
        volatile long nonFiniteChunks;
        volatile long macsInLanes;
        volatile long spuriousProbes;
        volatile long spuriousRetransmissions;
        volatile long pausesNs;
        volatile long selectorWaits;
        volatile long coalescedSleeps;
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

    /** Not on the packet path: readers only (the lambdas capture nothing, so they are not allocated per call). */
    private long sum(final ToLongFunction<Cells> cell)
    {
        long sum = 0;
        for (final Cells c : cells)
        {
            sum += cell.applyAsLong(c);
        }
        return sum;
    }

    Cells cells(final int agent)
    {
        return cells[agent];
    }

    public long packetsSent()
    {
        return sum(c -> c.packetsSent);
    }

    public long packetsReceived()
    {
        return sum(c -> c.packetsReceived);
    }

    /** @return updates sent again: after their slot's timer expired, or answering a NACK. */
    public long retransmissions()
    {
        return sum(c -> c.retransmissions);
    }

    /**
     * @return header-only probes sent about updates suspected lost (see {@link WorkerContext#fastRetransmit}),
     * tail probes included; not counted as retransmissions.
     */
    public long probesSent()
    {
        return sum(c -> c.probesSent);
    }

    /**
     * @return NACKs received: the appliance's answers to probes for updates it has not got.
     */
    public long nacksReceived()
    {
        return sum(c -> c.nacksReceived);
    }

    /**
     * @return PENDINGs received: the appliance's answers to probes for updates it holds while their slot waits for
     * other ranks (a slow peer, not a loss).
     */
    public long pendingsReceived()
    {
        return sum(c -> c.pendingsReceived);
    }

    /**
     * @return resends of updates the appliance answered a probe for with a NACK (fast retransmission),
     * included in {@link #retransmissions()}.
     */
    public long fastRetransmissions()
    {
        return sum(c -> c.fastRetransmissions);
    }

    /**
     * @return tail-loss probes: probes about the newest outstanding packet after a quiet period, included in
     * {@link #probesSent()}.
     */
    public long tailProbes()
    {
        return sum(c -> c.tailProbes);
    }

    /** @return results for a chunk this worker had already completed (duplicates, late shadow copies). */
    public long staleResults()
    {
        return sum(c -> c.staleResults);
    }

    public long malformedResults()
    {
        return sum(c -> c.malformedResults);
    }

    public long sendFailures()
    {
        return sum(c -> c.sendFailures);
    }

    public long lossInjected()
    {
        return sum(c -> c.lossInjected);
    }

    /** @return all-reduce calls completed successfully. */
    public long allReduces()
    {
        return sum(c -> c.allReduces);
    }

    /**
     * @return exponent-only updates sent (first transmissions; resends count as retransmissions): one
     * per slot each time a slot starts on a chunk without an agreed exponent, i.e. at the start of the
     * stream and after the stream ran dry on that slot.
     */
    public long exponentOnlyPackets()
    {
        return sum(c -> c.exponentOnlyPackets);
    }

    /**
     * @return nanoseconds the I/O agents did not run beyond the waits they asked for (descheduled, GC): their timers
     * did not count them.
     */
    public long pausesNs()
    {
        return sum(c -> c.pausesNs);
    }

    /** @return times an idle I/O agent blocked in its selector, woken by the next packet, a submitter or a timer. */
    public long selectorWaits()
    {
        return sum(c -> c.selectorWaits);
    }

    /**
     * @return times an idle I/O agent slept while results were on their way, to read several at once
     * ({@link ResultCoalescing}).
     */
    public long coalescedSleeps()
    {
        return sum(c -> c.coalescedSleeps);
    }

    /**
     * @return probes that were not needed: the probed slot's result came from its normal completion with no NACK in
     * between (its update and its result were both on their way). Probes answered with a PENDING (the slot waited
     * for another rank) are not counted here: see {@link #pendingsReceived()}.
     */
    public long spuriousProbes()
    {
        return sum(c -> c.spuriousProbes);
    }

    /**
     * @return timer resends shown to be unneeded (a lower bound: see {@link AdaptiveLossRecovery}).
     */
    public long spuriousRetransmissions()
    {
        return sum(c -> c.spuriousRetransmissions);
    }

    /**
     * @return float updates sent with an unknown look-ahead exponent because the next chunk on their
     * slot had not been submitted yet; each makes the slot's next chunk start with an exponent-only round.
     */
    public long lookaheadMisses()
    {
        return sum(c -> c.lookaheadMisses);
    }

    /**
     * @return result chunks written as NaN because a rank's chunk held a NaN or an infinity (this rank's or another's):
     * each such chunk's sum is not finite, as under Gloo, which a loss scaler reads as an overflow and skips the step.
     */
    public long nonFiniteChunks()
    {
        return sum(c -> c.nonFiniteChunks);
    }

    /**
     * @return packets whose MACs were computed (signed or checked) eight at a time in vector lanes: 0 with MACs off,
     * before the lanes' warm-up is done, or where the JVM cannot (see the start-up report's "packet MACs").
     */
    public long macsInLanes()
    {
        return sum(c -> c.macsInLanes);
    }

    @Override
    public String toString()
    {
        return "sent=" + packetsSent() + " received=" + packetsReceived() + " retransmissions=" + retransmissions() +
            " (fast " + fastRetransmissions() + ") probes=" + probesSent() + " (tail " + tailProbes() + ") nacks=" +
            nacksReceived() + " pendings=" + pendingsReceived() +
            " staleResults=" + staleResults() + " malformed=" + malformedResults() + " sendFailures=" + sendFailures() +
            " spuriousProbes=" + spuriousProbes() + " spuriousRetransmissions=" + spuriousRetransmissions() +
            " pausedMs=" + pausesNs() / 1_000_000 + " selectorWaits=" + selectorWaits() +
            " coalescedSleeps=" + coalescedSleeps() +
            " lossInjected=" + lossInjected() + " allReduces=" + allReduces() + " exponentOnly=" + exponentOnlyPackets() +
            " lookaheadMisses=" + lookaheadMisses() + " nonFiniteChunks=" + nonFiniteChunks() +
            " macsInLanes=" + macsInLanes();
    }
}
