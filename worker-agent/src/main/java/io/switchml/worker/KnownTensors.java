package io.switchml.worker;

import io.switchml.protocol.ElementType;
import io.switchml.protocol.quant.BlockFloatingPoint;
import io.switchml.protocol.quant.HalfFloats;

/**
 * Tensors whose all-reduce result is known without gathering them: rank r holds
 * {@code (r + 1) * g(round, i)}, so the sum over n ranks is {@code g * n(n+1)/2} (exactly, for ints,
 * in wrap-around arithmetic). For floats g(round, i) is pseudo-random in [-1, 1) scaled by a power of
 * two that changes every 4096 elements, so chunks see different block exponents.
 * Verification checks every element against the exact sum within the quantization bound n/f of its
 * chunk plus half an ulp of the float result, or for the 16-bit wire formats within
 * {@link HalfFloats#errorBound} (input rounding, n/f, output rounding).
 */
public final class KnownTensors
{
    private KnownTensors()
    {
    }

    private static long mix(final long round, final int index)
    {
        long z = round * 0x9E37_79B9_7F4A_7C15L + index * 0xBF58_476D_1CE4_E5B9L + 0x94D0_49BB_1331_11EBL;
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
        return z ^ (z >>> 31);
    }

    private static double base(final long round, final int index)
    {
        final double unit = ((mix(round, index) >>> 40) - (1 << 23)) * 0x1.0p-23;
        return Math.scalb(unit, ((index >>> 12) & 15) - 8);
    }

    /**
     * @return the float element i of a rank's tensor in a round.
     */
    public static float floatValue(final int rank, final long round, final int index)
    {
        return (float)(base(round, index) * (rank + 1));
    }

    public static void fill(final float[] dst, final int rank, final long round)
    {
        for (int i = 0; i < dst.length; i++)
        {
            dst[i] = floatValue(rank, round, i);
        }
    }

    public static void fill(final int[] dst, final int rank, final long round)
    {
        for (int i = 0; i < dst.length; i++)
        {
            dst[i] = (int)mix(round, i) * (rank + 1);
        }
    }

    /**
     * Check an int sum bit for bit.
     *
     * @return a description of the first wrong element, or null when all are right.
     */
    public static String verifyIntSum(final int[] result, final int worldSize, final long round)
    {
        final int factor = worldSize * (worldSize + 1) / 2;
        for (int i = 0; i < result.length; i++)
        {
            final int expected = (int)mix(round, i) * factor;
            if (result[i] != expected)
            {
                return "element " + i + " is " + result[i] + ", expected " + expected;
            }
        }
        return null;
    }

    /**
     * Check a float sum or average within the quantization bound of each chunk.
     *
     * @param lanesPerChunk k, which fixes the chunk boundaries and so the block exponents.
     * @return a description of the first element out of bound, or null when all are within it.
     */
    public static String verifyFloat(
        final float[] result, final int worldSize, final long round, final int lanesPerChunk, final ReduceOp op)
    {
        final double divisor = op == ReduceOp.AVERAGE ? worldSize : 1.0;
        final int top = worldSize - 1;
        for (int from = 0; from < result.length; from += lanesPerChunk)
        {
            final int to = Math.min(result.length, from + lanesPerChunk);
            int maxBits = 0;
            for (int i = from; i < to; i++)
            {
                maxBits = Math.max(maxBits, Float.floatToRawIntBits(floatValue(top, round, i)) & 0x7FFF_FFFF);
            }
            final int exponent = BlockFloatingPoint.exponentOfMagnitudeBits(maxBits);
            final double bound = BlockFloatingPoint.errorBound(exponent, worldSize) / divisor;
            for (int i = from; i < to; i++)
            {
                double exact = 0;
                for (int rank = 0; rank < worldSize; rank++)
                {
                    exact += floatValue(rank, round, i);
                }
                exact /= divisor;
                final double error = Math.abs(result[i] - exact);
                if (!(error <= bound + Math.ulp((float)exact)))
                {
                    return "element " + i + " is " + result[i] + ", exact " + exact + ", error " + error +
                        " exceeds bound " + bound + " (n/f) + ulp";
                }
            }
        }
        return null;
    }

    /**
     * Check a float sum or average that travelled in a given element type: float32 as
     * {@link #verifyFloat(float[], int, long, int, ReduceOp)}, float16 and bfloat16 within
     * {@link HalfFloats#errorBound} of each element (divided by n for an average, plus the rounding of
     * that division).
     *
     * @return a description of the first element out of bound, or null when all are within it.
     */
    public static String verifyFloat(
        final float[] result, final int worldSize, final long round, final int lanesPerChunk, final ReduceOp op,
        final byte elementType)
    {
        if (!ElementType.isSixteenBit(elementType))
        {
            return verifyFloat(result, worldSize, round, lanesPerChunk, op);
        }
        final double divisor = op == ReduceOp.AVERAGE ? worldSize : 1.0;
        final int top = worldSize - 1;
        for (int from = 0; from < result.length; from += lanesPerChunk)
        {
            final int to = Math.min(result.length, from + lanesPerChunk);
            int maxBits = 0;
            for (int i = from; i < to; i++)
            {
                maxBits = Math.max(maxBits, Float.floatToRawIntBits(floatValue(top, round, i)) & 0x7FFF_FFFF);
            }
            final int exponent = HalfFloats.blockExponent(elementType, maxBits);
            for (int i = from; i < to; i++)
            {
                double exact = 0;
                double sumOfAbs = 0;
                for (int rank = 0; rank < worldSize; rank++)
                {
                    final float value = floatValue(rank, round, i);
                    exact += value;
                    sumOfAbs += Math.abs(value);
                }
                final double bound = HalfFloats.errorBound(elementType, worldSize, exponent, sumOfAbs, Math.abs(exact)) /
                    divisor + Math.ulp((float)(exact / divisor));
                final double error = Math.abs(result[i] - exact / divisor);
                if (!(error <= bound))
                {
                    return "element " + i + " is " + result[i] + ", exact " + exact / divisor + ", error " + error +
                        " exceeds the " + ElementType.name(elementType) + " bound " + bound;
                }
            }
        }
        return null;
    }
}
