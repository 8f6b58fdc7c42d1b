package io.switchml.protocol.quant;

import io.switchml.protocol.ElementType;
import io.switchml.protocol.TestSeed;
import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HalfFloatsTest
{
    @Test
    void bfloat16RoundsToNearestEvenAgainstAnIndependentReference()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int i = 0; i < 200_000; i++)
        {
            final int bits = i < 1_000 ? (i << 15) ^ 0x3F80_0000 : random.nextInt();
            final float value = Float.intBitsToFloat(bits);
            if (Float.isNaN(value))
            {
                assertTrue(Float.isNaN(HalfFloats.bfloat16ToFloat(HalfFloats.toBfloat16Bits(value))));
                continue;
            }
            final float rounded = HalfFloats.bfloat16ToFloat(HalfFloats.toBfloat16Bits(value));
            assertEquals(referenceBfloat16(value), rounded, () -> "value " + value + " bits " +
                Integer.toHexString(bits) + "; " + TestSeed.describe(seed));
        }
    }

    /** The two bfloat16 neighbours by truncation, then the nearer one (the even one on a tie), in double. */
    private static float referenceBfloat16(final float value)
    {
        final int bits = Float.floatToRawIntBits(value);
        final float down = Float.intBitsToFloat(bits & 0xFFFF_0000);
        if (down == value)
        {
            return value;
        }
        final int upBits = (bits & 0xFFFF_0000) + 0x1_0000;
        final float up = Float.intBitsToFloat(upBits);
        final double toDown = Math.abs((double)value - down);
        final double toUp = Float.isInfinite(up) ? Math.abs((double)value - Math.copySign(0x1.0p128, value)) :
            Math.abs((double)value - up);
        if (toDown != toUp)
        {
            return toDown < toUp ? down : up;
        }
        return ((bits >>> 16) & 1) == 0 ? down : up;
    }

    @Test
    void rangeEdgesOfBothFormats()
    {
        assertTrue(HalfFloats.isRepresentable(ElementType.FLOAT16, 65504f));
        assertTrue(HalfFloats.isRepresentable(ElementType.FLOAT16, 65519.99f), "rounds down to 65504");
        assertFalse(HalfFloats.isRepresentable(ElementType.FLOAT16, 65520f), "rounds to infinity");
        assertFalse(HalfFloats.isRepresentable(ElementType.FLOAT16, -70000f));
        assertFalse(HalfFloats.isRepresentable(ElementType.FLOAT16, Float.NaN));
        assertTrue(HalfFloats.isRepresentable(ElementType.BFLOAT16, HalfFloats.BFLOAT16_MAX));
        assertTrue(HalfFloats.isRepresentable(ElementType.BFLOAT16, 1e38f));
        assertFalse(HalfFloats.isRepresentable(ElementType.BFLOAT16, Float.MAX_VALUE), "rounds to infinity");
        assertFalse(HalfFloats.isRepresentable(ElementType.BFLOAT16, Float.NEGATIVE_INFINITY));
        assertEquals(HalfFloats.FLOAT16_MAX, HalfFloats.maxFinite(ElementType.FLOAT16));
        assertEquals(0x1.0p-24f, HalfFloats.decode(ElementType.FLOAT16, (short)1), "smallest float16 subnormal");
        assertEquals(0x1.0p-133f, HalfFloats.decode(ElementType.BFLOAT16, (short)1), "smallest bfloat16 subnormal");
    }

    @Test
    void blockExponentIsThatOfTheRoundedMaximum()
    {
        final byte f16 = ElementType.FLOAT16;
        assertEquals(1, HalfFloats.blockExponent(f16, Float.floatToRawIntBits(0.9999f)), "0.9999 rounds to 1.0 in float16");
        assertEquals(0, BlockFloatingPoint.exponentOfMagnitudeBits(Float.floatToRawIntBits(0.9999f)), "but not in float32");
        assertEquals(16, HalfFloats.blockExponent(f16, Float.floatToRawIntBits(65504f)));
        assertEquals(BlockFloatingPoint.OUT_OF_RANGE, HalfFloats.blockExponent(f16, Float.floatToRawIntBits(65520f)),
            "finite, but rounds out of float16's range: refused, not carried as not finite");
        assertEquals(BlockFloatingPoint.NON_FINITE, HalfFloats.blockExponent(f16, Float.floatToRawIntBits(Float.NaN)));
        assertEquals(BlockFloatingPoint.NO_EXPONENT, HalfFloats.blockExponent(f16, Float.floatToRawIntBits(1e-9f)),
            "rounds to zero");
        assertEquals(-23, HalfFloats.blockExponent(f16, Float.floatToRawIntBits(0x1.0p-24f)));
        assertEquals(-126, HalfFloats.blockExponent(ElementType.BFLOAT16, Float.floatToRawIntBits(0x1.0p-130f)));
        assertEquals(BlockFloatingPoint.NO_EXPONENT,
            HalfFloats.blockExponent(ElementType.BFLOAT16, Float.floatToRawIntBits(0x1.0p-140f)), "below 2^-134");
    }

    @Test
    void fixedPointRoundTripStaysWithinTheBound()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final byte type : new byte[]{ ElementType.FLOAT16, ElementType.BFLOAT16 })
        {
            for (int trial = 0; trial < 20_000; trial++)
            {
                final int n = 1 + random.nextInt(16);
                final float[] x = new float[n];
                int maxBits = 0;
                for (int r = 0; r < n; r++)
                {
                    x[r] = (float)((random.nextDouble() * 2 - 1) * Math.scalb(1.0, random.nextInt(-20, 12)));
                    maxBits = Math.max(maxBits, Float.floatToRawIntBits(x[r]) & 0x7FFF_FFFF);
                }
                final int m = HalfFloats.blockExponent(type, maxBits);
                final double scale = BlockFloatingPoint.scale(m, n);
                final int limit = BlockFloatingPoint.laneLimit(n);
                int sum = 0;
                double exact = 0;
                double sumOfAbs = 0;
                for (int r = 0; r < n; r++)
                {
                    sum += HalfFloats.toFixedPoint(type, HalfFloats.encode(type, x[r]), scale, limit);
                    exact += x[r];
                    sumOfAbs += Math.abs(x[r]);
                }
                final float result = HalfFloats.decode(type, HalfFloats.fromFixedPoint(type, sum, scale));
                final double bound = HalfFloats.errorBound(type, n, m, sumOfAbs, Math.abs(exact));
                final String what = ElementType.name(type) + " n=" + n + " m=" + m + " exact=" + exact + " result=" +
                    result + " bound=" + bound + "; " + TestSeed.describe(seed);
                assertTrue(Math.abs(result - exact) <= bound, what);
            }
        }
    }

    @Test
    void fixedPointClampsWhatAMisbehavingSenderSends()
    {
        final int limit = BlockFloatingPoint.laneLimit(3);
        final double scale = BlockFloatingPoint.scale(0, 3);
        assertEquals(limit, HalfFloats.toFixedPoint(ElementType.FLOAT16, (short)0x7C00, scale, limit), "+infinity");
        assertEquals(-limit, HalfFloats.toFixedPoint(ElementType.FLOAT16, (short)0xFC00, scale, limit), "-infinity");
        assertEquals(0, HalfFloats.toFixedPoint(ElementType.FLOAT16, (short)0x7E00, scale, limit), "NaN");
        assertEquals(limit, HalfFloats.toFixedPoint(ElementType.BFLOAT16, HalfFloats.toBfloat16Bits(8f), scale, limit),
            "above 2^m");
    }
}
