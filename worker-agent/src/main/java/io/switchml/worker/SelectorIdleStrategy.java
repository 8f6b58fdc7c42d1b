package io.switchml.worker;

import org.agrona.concurrent.IdleStrategy;

/**
 * Idle strategy of a {@link ShardAgent}: after a duty cycle without work it spins briefly (a result
 * is often a few microseconds away), yields a few times, then blocks in the agent's selector until a
 * result arrives, a submitter wakes it, or the next retransmission timer is due. Machines running
 * workers are often oversubscribed (the training framework wants the cores), so the agent must not
 * busy-spin while it waits for slow ranks; blocking in the selector adds no latency when a packet
 * arrives, unlike a backoff that parks for a fixed period. While results stream in at a measured pace the agent
 * sleeps to read them in batches ({@link ResultCoalescing}), straight away: spinning and yielding would only poll
 * an empty socket.
 */
final class SelectorIdleStrategy implements IdleStrategy
{
    private final ShardAgent agent;
    private final int spins;
    private final int spinsAndYields;
    private int idleCycles;

    SelectorIdleStrategy(final ShardAgent agent, final int spins, final int yields)
    {
        this.agent = agent;
        this.spins = spins;
        this.spinsAndYields = spins + yields;
    }

    public void idle(final int workCount)
    {
        if (workCount > 0)
        {
            idleCycles = 0;
            return;
        }
        idle();
    }

    public void idle()
    {
        final int cycles = idleCycles++;
        if (cycles < spinsAndYields && agent.coalesce())
        {
            idleCycles = spinsAndYields;
        }
        else if (cycles < spins)
        {
            Thread.onSpinWait();
        }
        else if (cycles < spinsAndYields)
        {
            Thread.yield();
        }
        else
        {
            agent.idle();
        }
    }

    public void reset()
    {
        idleCycles = 0;
    }

    public String alias()
    {
        return "selector";
    }
}
