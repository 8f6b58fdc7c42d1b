package io.switchml.bench.jmh;

import io.switchml.protocol.quant.BlockFloatingPoint;

/**
 * Rewrites of {@link BlockFloatingPoint} loops that C2 compiles to better machine code, benchmarked next to the
 * originals by {@link VectorizationBenchmark}. They are not used by the product; each returns bit-for-bit what the
 * original returns for every input (checked by {@link #checkEquivalence()} before any measurement).
 */
final class Candidates
{
    private static final int ABS_MASK = 0x7FFF_FFFF;

    private Candidates()
    {
    }

    /**
     * {@link BlockFloatingPoint#quantize} with the clamp done on ints after the conversion instead of on doubles
     * before it. The same for every input: limits are integers and the double-to-int cast saturates, so clamping
     * before or after the cast agrees, and NaN becomes 0 either way. Java's double min/max must order -0.0 below 0.0
     * and propagate NaN, which costs C2 about six extra vector instructions each; int min/max is one instruction.
     */
    static void quantizeIntClamp(
        final float[] src, final int from, final int count, final double scale, final int limit,
        final int[] dst, final int dstFrom)
    {
        final int min = -limit;
        for (int i = 0; i < count; i++)
        {
            dst[dstFrom + i] = Math.max(min, Math.min(limit, (int)Math.rint(src[from + i] * scale)));
        }
    }

    /**
     * {@link BlockFloatingPoint#maxExponent} with eight independent running maxima instead of one, so the loop is
     * not one serial chain of compare-and-move; C2 does not vectorize the single int max reduction of the original.
     */
    static int maxExponentEightWay(final float[] src, final int from, final int count)
    {
        int m0 = 0;
        int m1 = 0;
        int m2 = 0;
        int m3 = 0;
        int m4 = 0;
        int m5 = 0;
        int m6 = 0;
        int m7 = 0;
        final int end = from + count;
        int i = from;
        for (; i <= end - 8; i += 8)
        {
            m0 = Math.max(m0, Float.floatToRawIntBits(src[i]) & ABS_MASK);
            m1 = Math.max(m1, Float.floatToRawIntBits(src[i + 1]) & ABS_MASK);
            m2 = Math.max(m2, Float.floatToRawIntBits(src[i + 2]) & ABS_MASK);
            m3 = Math.max(m3, Float.floatToRawIntBits(src[i + 3]) & ABS_MASK);
            m4 = Math.max(m4, Float.floatToRawIntBits(src[i + 4]) & ABS_MASK);
            m5 = Math.max(m5, Float.floatToRawIntBits(src[i + 5]) & ABS_MASK);
            m6 = Math.max(m6, Float.floatToRawIntBits(src[i + 6]) & ABS_MASK);
            m7 = Math.max(m7, Float.floatToRawIntBits(src[i + 7]) & ABS_MASK);
        }
        for (; i < end; i++)
        {
            m0 = Math.max(m0, Float.floatToRawIntBits(src[i]) & ABS_MASK);
        }
        final int maxBits = Math.max(Math.max(Math.max(m0, m1), Math.max(m2, m3)), Math.max(Math.max(m4, m5), Math.max(m6, m7)));
        return BlockFloatingPoint.exponentOfMagnitudeBits(maxBits);
    }

    /**
     * {@link BlockFloatingPoint#maxExponent} as a float maximum of absolute values, a reduction C2 does vectorize.
     * The same for every input: for non-negative floats other than NaN the float order is the order of the bit
     * patterns; NaN propagates through Math.max and, like infinity, maps to {@link BlockFloatingPoint#NON_FINITE};
     * -0.0 and 0.0 both give magnitude bits 0.
     */
    static int maxExponentFloatMax(final float[] src, final int from, final int count)
    {
        float max = 0.0f;
        for (int i = from, end = from + count; i < end; i++)
        {
            max = Math.max(max, Math.abs(src[i]));
        }
        return BlockFloatingPoint.exponentOfMagnitudeBits(Float.floatToIntBits(max) & ABS_MASK);
    }

    /**
     * Compare every candidate with the original on gradient-like chunks and on the edge cases (zeros of both signs,
     * subnormals, the largest finite values, infinities, NaN, values beyond the lane limit).
     *
     * @throws IllegalStateException naming the first disagreement.
     */
    static void checkEquivalence()
    {
        final float[][] chunks = {
            Chunks.gradientLike(8192, 1),
            Chunks.gradientLike(1000, 2),
            {0.0f, -0.0f},
            {-0.0f},
            {Float.MIN_VALUE, -Float.MIN_NORMAL / 2},
            {Float.MAX_VALUE, -Float.MAX_VALUE, 1.0f},
            {1.0f, Float.POSITIVE_INFINITY},
            {Float.NEGATIVE_INFINITY, 2.0f},
            {3.0f, Float.NaN, -5.0f},
            {-7.5f, 7.5f, 0.5f, -0.5f, 1.5f, 2.5f},
        };
        for (final float[] chunk : chunks)
        {
            final int expected = BlockFloatingPoint.maxExponent(chunk, 0, chunk.length);
            check(expected, maxExponentEightWay(chunk, 0, chunk.length), "maxExponentEightWay", chunk);
            check(expected, maxExponentFloatMax(chunk, 0, chunk.length), "maxExponentFloatMax", chunk);
            for (final int workers : new int[]{1, 4, 256})
            {
                for (final int exponent : new int[]{expected == BlockFloatingPoint.NON_FINITE ? 128 : expected, -3, 0, 10})
                {
                    final double scale = BlockFloatingPoint.scale(exponent, workers);
                    final int limit = BlockFloatingPoint.laneLimit(workers);
                    final int[] original = new int[chunk.length];
                    final int[] candidate = new int[chunk.length];
                    BlockFloatingPoint.quantize(chunk, 0, chunk.length, scale, limit, original, 0);
                    quantizeIntClamp(chunk, 0, chunk.length, scale, limit, candidate, 0);
                    if (!java.util.Arrays.equals(original, candidate))
                    {
                        throw new IllegalStateException("quantizeIntClamp differs for exponent " + exponent + ", n " + workers +
                            " on " + describe(chunk));
                    }
                }
            }
        }
    }

    private static void check(final int expected, final int actual, final String name, final float[] chunk)
    {
        if (expected != actual)
        {
            throw new IllegalStateException(name + " gives " + actual + ", the original " + expected + " on " + describe(chunk));
        }
    }

    private static String describe(final float[] chunk)
    {
        return chunk.length > 8 ? chunk.length + " gradient-like floats" : java.util.Arrays.toString(chunk);
    }
}
