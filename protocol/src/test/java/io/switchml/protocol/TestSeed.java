package io.switchml.protocol;

/**
 * Seeds for randomized tests: a fresh seed per test unless {@value #PROPERTY} is set, so that any
 * failure can be replayed exactly. Tests put {@link #describe(long)} in every assertion message.
 */
public final class TestSeed
{
    /** System property that fixes the seed of every randomized test, e.g. {@code -Dswitchml.test.seed=123}. */
    public static final String PROPERTY = "switchml.test.seed";

    private TestSeed()
    {
    }

    /**
     * @return the seed from {@value #PROPERTY}, or a fresh one.
     */
    public static long seed()
    {
        final String value = System.getProperty(PROPERTY);
        if (null != value && !value.isBlank())
        {
            return Long.decode(value.trim());
        }
        return System.nanoTime() ^ Double.doubleToLongBits(Math.random());
    }

    /**
     * @param seed used by the test.
     * @return text naming the seed and how to replay it.
     */
    public static String describe(final long seed)
    {
        return "seed=" + seed + " (replay with -D" + PROPERTY + "=" + seed + ")";
    }
}
