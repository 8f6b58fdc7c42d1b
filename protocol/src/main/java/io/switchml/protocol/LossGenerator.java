package io.switchml.protocol;

import java.util.SplittableRandom;

/**
 * Decides whether to drop a packet, for loss-injection tests on both directions of a link. A seeded
 * generator replays the same drop pattern for the same sequence of calls.
 */
public interface LossGenerator
{
    /** A generator that never drops. */
    LossGenerator NONE = () -> false;

    /**
     * @return true when the next packet should be dropped.
     */
    boolean shouldDrop();

    /**
     * Create a generator from configuration.
     *
     * @param rate probability of dropping a packet, 0 to 1.
     * @param seed for the pseudo-random sequence.
     * @return {@link #NONE} when rate is 0, else a seeded Bernoulli generator.
     */
    static LossGenerator of(final double rate, final long seed)
    {
        if (!(rate >= 0.0 && rate <= 1.0))
        {
            throw new IllegalArgumentException("loss rate must be within [0, 1]: " + rate);
        }
        if (rate == 0.0)
        {
            return NONE;
        }
        final SplittableRandom random = new SplittableRandom(seed);
        return () -> random.nextDouble() < rate;
    }
}
