package io.switchml.worker;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The block-exponent scans, the workers' int max over a segment and the float max it replaced, against their
 * definition, floatToIntBits(max |x|) and 0x7FFFFFFF, on the values that make a max over floats tricky: signed
 * zeros, subnormals, infinities, NaNs with any payload and sign, and chunk bounds that are not multiples of a
 * vector length.
 */
class ExponentScanTest
{
    private static final int ABS_MASK = 0x7FFF_FFFF;

    @Test
    void matchesTheDefinitionOnRandomChunksAtEveryAlignment()
    {
        final SplittableRandom random = new SplittableRandom(20261123L);
        final float[] values = new float[5000];
        for (int round = 0; round < 2000; round++)
        {
            final int kind = round % 4;
            for (int i = 0; i < values.length; i++)
            {
                values[i] = switch (kind)
                {
                    case 0 -> (float)random.nextGaussian() * 1e3f;
                    case 1 -> Float.intBitsToFloat(random.nextInt()); // every bit pattern: NaNs, infinities, subnormals
                    case 2 -> random.nextBoolean() ? -0.0f : Float.MIN_VALUE * random.nextInt(8);
                    default -> -(float)random.nextDouble();
                };
            }
            final int from = random.nextInt(values.length);
            final int count = random.nextInt(values.length - from + 1);
            final int expected = definition(values, from, count);
            assertEquals(expected, scan(values, from, count), () -> "kind " + kind + ", from " + from + ", count " + count);
            assertEquals(expected, TensorView.floatMaxAbsBits(values, from, count),
                () -> "float max, kind " + kind + ", from " + from + ", count " + count);
        }
    }

    @Test
    void anyNanGivesTheCanonicalNanAndAnInfinityItsBits()
    {
        final float[] values = new float[100];
        java.util.Arrays.fill(values, -3.5f);
        values[97] = Float.NEGATIVE_INFINITY;
        assertEquals(0x7F80_0000, scan(values, 0, values.length));
        values[3] = Float.intBitsToFloat(0xFF80_0001); // a negative signalling NaN, in the vector part
        assertEquals(Float.floatToIntBits(Float.NaN), scan(values, 0, values.length));
        assertEquals(0x7F80_0000, scan(values, 4, 96));
        values[99] = Float.intBitsToFloat(0x7FFF_FFFF); // in the scalar tail
        assertEquals(Float.floatToIntBits(Float.NaN), scan(values, 4, 96));
        assertEquals(0, scan(values, 50, 0));
        assertEquals(0, scan(new float[]{-0.0f, 0.0f}, 0, 2));
    }

    /** Through the view the workers use. */
    private static int scan(final float[] values, final int from, final int count)
    {
        return new TensorView.FloatArray(values, values).maxAbsBits(from, count);
    }

    private static int definition(final float[] values, final int from, final int count)
    {
        int max = 0;
        for (int i = from; i < from + count; i++)
        {
            max = Math.max(max, Float.floatToIntBits(values[i]) & ABS_MASK);
        }
        return max;
    }
}
