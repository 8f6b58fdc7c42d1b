package io.switchml.worker;

import org.agrona.concurrent.IdleStrategy;

/**
 * Idle strategy of a {@link ShardAgent}: after a duty cycle without work it spins briefly (a result
 * is often a few microseconds away), yields a few times, then blocks in the agent's selector until a
 * result arrives, a submitter wakes it, or the next retransmission timer is due. Machines running
 * workers are often oversubscribed (the training framework wants the cores), so the agent must not
 * busy-spin while it waits for slow ranks; blocking in the selector adds no latency when a packet
 * arrives, unlike a backoff that parks for a fixed period.
 */
final class SelectorIdleStrategy implements IdleStrategy
{
    private static final int SPINS = 4;
    private static final int YIELDS = 2;

    private final ShardAgent agent;
    private int idleCycles;

    SelectorIdleStrategy(final ShardAgent agent)
    {
        this.agent = agent;
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
        if (cycles < SPINS)
        {
            Thread.onSpinWait();
        }
        else if (cycles < SPINS + YIELDS)
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
