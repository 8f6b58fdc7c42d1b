package io.switchml.worker;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Vector API block-exponent scan against its definition, floatToIntBits(max |x|) and 0x7FFFFFFF, on the
 * values that make a max over floats tricky: signed zeros, subnormals, infinities, NaNs with any payload and
 * sign, and chunk bounds that are not multiples of the vector length.
 */
class VectorScanTest
{
    private static final int ABS_MASK = 0x7FFF_FFFF;

    @Test
    void theTestJvmScansWithTheVectorApi()
    {
        assertTrue(TensorView.VECTOR_SCAN,
            "the build passes --add-modules=jdk.incubator.vector to test JVMs, so the vector scan must be the one tested");
    }

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
            assertEquals(definition(values, from, count), VectorScan.maxAbsBits(values, from, count),
                () -> "kind " + kind + ", from " + from + ", count " + count);
        }
    }

    @Test
    void anyNanGivesTheCanonicalNanAndAnInfinityItsBits()
    {
        final float[] values = new float[100];
        java.util.Arrays.fill(values, -3.5f);
        values[97] = Float.NEGATIVE_INFINITY;
        assertEquals(0x7F80_0000, VectorScan.maxAbsBits(values, 0, values.length));
        values[3] = Float.intBitsToFloat(0xFF80_0001); // a negative signalling NaN, in the vector part
        assertEquals(Float.floatToIntBits(Float.NaN), VectorScan.maxAbsBits(values, 0, values.length));
        assertEquals(0x7F80_0000, VectorScan.maxAbsBits(values, 4, 96));
        values[99] = Float.intBitsToFloat(0x7FFF_FFFF); // in the scalar tail
        assertEquals(Float.floatToIntBits(Float.NaN), VectorScan.maxAbsBits(values, 4, 96));
        assertEquals(0, VectorScan.maxAbsBits(values, 50, 0));
        assertEquals(0, VectorScan.maxAbsBits(new float[]{-0.0f, 0.0f}, 0, 2));
    }

    private static int definition(final float[] values, final int from, final int count)
    {
        float max = 0.0f;
        for (int i = from; i < from + count; i++)
        {
            max = Math.max(max, Math.abs(values[i]));
        }
        return Float.floatToIntBits(max) & ABS_MASK;
    }
}
