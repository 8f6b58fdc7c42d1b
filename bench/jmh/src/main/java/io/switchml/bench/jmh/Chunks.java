package io.switchml.bench.jmh;

import java.util.SplittableRandom;

/**
 * Seeded test data shared by the benchmarks.
 */
final class Chunks
{
    private Chunks()
    {
    }

    /**
     * Gradient-like floats: uniform in (-1, 1) times a scale that varies by a factor of up to 2^6 across the chunk,
     * so the values are not all of one magnitude.
     */
    static float[] gradientLike(final int length, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final float[] values = new float[length];
        for (int i = 0; i < length; i++)
        {
            values[i] = (float)Math.scalb(random.nextDouble(-1.0, 1.0), -random.nextInt(7) - 3);
        }
        return values;
    }

    static byte[] randomBytes(final int length, final long seed)
    {
        final byte[] bytes = new byte[length];
        new SplittableRandom(seed).nextBytes(bytes);
        return bytes;
    }
}
