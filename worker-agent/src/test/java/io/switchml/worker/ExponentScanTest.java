package io.switchml.worker;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The block-exponent scan of every float view (array, heap buffer, direct buffer in native and in swapped byte
 * order) against its definition, floatToIntBits(max |x|) and 0x7FFFFFFF, on the values that make a max over floats
 * tricky: signed zeros, subnormals, infinities, NaNs with any payload and sign, and chunk bounds that are not
 * multiples of a vector length.
 */
class ExponentScanTest
{
    private static final int ABS_MASK = 0x7FFF_FFFF;
    private static final int LENGTH = 5000;

    @Test
    void everyViewMatchesTheDefinitionOnRandomChunksAtEveryAlignment()
    {
        final SplittableRandom random = new SplittableRandom(20261123L);
        final float[] values = new float[LENGTH];
        final FloatBuffer direct = ByteBuffer.allocateDirect(LENGTH * Float.BYTES).order(ByteOrder.nativeOrder()).asFloatBuffer();
        final ByteOrder swapped = ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN;
        final FloatBuffer directSwapped = ByteBuffer.allocateDirect(LENGTH * Float.BYTES).order(swapped).asFloatBuffer();
        for (int round = 0; round < 1000; round++)
        {
            final int kind = round % 4;
            for (int i = 0; i < LENGTH; i++)
            {
                values[i] = switch (kind)
                {
                    case 0 -> (float)random.nextGaussian() * 1e3f;
                    case 1 -> Float.intBitsToFloat(random.nextInt()); // every bit pattern: NaNs, infinities, subnormals
                    case 2 -> random.nextBoolean() ? -0.0f : Float.MIN_VALUE * random.nextInt(8);
                    default -> -(float)random.nextDouble();
                };
            }
            direct.clear().put(values);
            directSwapped.clear().put(values);
            final int from = random.nextInt(LENGTH);
            final int count = random.nextInt(LENGTH - from + 1);
            final int expected = definition(values, from, count);
            final String where = "kind " + kind + ", from " + from + ", count " + count;
            assertEquals(expected, new TensorView.FloatArray(values, values).maxAbsBits(from, count), "float[], " + where);
            assertEquals(expected, view(FloatBuffer.wrap(values)).maxAbsBits(from, count), "heap buffer, " + where);
            assertEquals(expected, view(direct.clear()).maxAbsBits(from, count), "direct buffer, " + where);
            assertEquals(expected, view(directSwapped.clear()).maxAbsBits(from, count), "swapped direct buffer, " + where);
        }
    }

    @Test
    void anyNanGivesTheCanonicalNanAndAnInfinityItsBits()
    {
        final float[] values = new float[100];
        Arrays.fill(values, -3.5f);
        values[97] = Float.NEGATIVE_INFINITY;
        assertEquals(0x7F80_0000, scan(values, 0, values.length));
        values[3] = Float.intBitsToFloat(0xFF80_0001); // a negative signalling NaN, early in the chunk
        assertEquals(Float.floatToIntBits(Float.NaN), scan(values, 0, values.length));
        assertEquals(0x7F80_0000, scan(values, 4, 96));
        values[99] = Float.intBitsToFloat(0x7FFF_FFFF); // the last element, past any whole vector
        assertEquals(Float.floatToIntBits(Float.NaN), scan(values, 4, 96));
        assertEquals(0, scan(values, 50, 0));
        assertEquals(0, scan(new float[]{-0.0f, 0.0f}, 0, 2));
        assertEquals(Float.floatToIntBits(3.5f), scan(values, 10, 20));
    }

    @Test
    void aBufferViewStartsAtTheBuffersPosition()
    {
        final float[] values = {100f, 1f, -2f, 3f};
        final FloatBuffer buffer = FloatBuffer.wrap(values).position(1);
        assertEquals(Float.floatToIntBits(3f), view(buffer).maxAbsBits(0, 3));
    }

    private static TensorView view(final FloatBuffer buffer)
    {
        return new TensorView.FloatBufferView(buffer, buffer);
    }

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
