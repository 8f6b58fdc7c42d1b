package io.switchml.worker;

/**
 * Counters of one worker client. Written by the thread running an all-reduce, readable by others
 * (values may lag).
 */
public final class WorkerCounters
{
    volatile long packetsSent;
    volatile long packetsReceived;
    volatile long retransmissions;
    volatile long staleResults;
    volatile long malformedResults;
    volatile long sendFailures;
    volatile long lossInjected;
    volatile long allReduces;

    public long packetsSent()
    {
        return packetsSent;
    }

    public long packetsReceived()
    {
        return packetsReceived;
    }

    /** @return updates sent again after their slot's timer expired. */
    public long retransmissions()
    {
        return retransmissions;
    }

    /** @return results for a chunk this worker had already completed (duplicates, late shadow copies). */
    public long staleResults()
    {
        return staleResults;
    }

    public long malformedResults()
    {
        return malformedResults;
    }

    public long sendFailures()
    {
        return sendFailures;
    }

    public long lossInjected()
    {
        return lossInjected;
    }

    public long allReduces()
    {
        return allReduces;
    }

    @Override
    public String toString()
    {
        return "sent=" + packetsSent + " received=" + packetsReceived + " retransmissions=" + retransmissions +
            " staleResults=" + staleResults + " malformed=" + malformedResults + " sendFailures=" + sendFailures +
            " lossInjected=" + lossInjected + " allReduces=" + allReduces;
    }
}
