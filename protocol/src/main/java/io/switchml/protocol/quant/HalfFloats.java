package io.switchml.protocol.quant;

import io.switchml.protocol.ElementType;

/**
 * The 16-bit wire formats: IEEE binary16 ({@link ElementType#FLOAT16}) and bfloat16
 * ({@link ElementType#BFLOAT16}), both rounded to nearest, ties to even.
 * <p>
 * Workers encode their float32 values into 16-bit lanes after agreeing each chunk's block exponent m
 * (of the 16-bit values, see {@link #blockExponent}); the appliance decodes a lane, scales it to 32-bit
 * fixed point with f = (2^31-1)/(n*2^m) ({@link #toFixedPoint}), sums the lanes in int32, and encodes
 * sum / f back into 16 bits ({@link #fromFixedPoint}). The error of an element against the exact sum of
 * the float32 inputs is at most
 * <pre>
 *   e1 = rel * sum|x_r| + n * tiny     (input rounding of the n contributions)
 *      + n / f                         (fixed point, Theorem 1; in fact n / 2f)
 *   e  = e1 + rel' * (|exact| + e1) + tiny   (output rounding)
 * </pre>
 * with rel = 2^-11 (float16) or 2^-8 (bfloat16), half an ulp relative; rel' = rel + 2^-24 because the
 * output goes through a float32 on its way to 16 bits; tiny = half the smallest subnormal step (2^-25
 * for float16, 2^-134 for bfloat16), the absolute error of values that round into the subnormal range.
 * {@link #errorBound} computes e.
 * <p>
 * A finite float32 may still be out of range: float16 holds magnitudes below 65520 (larger ones round to
 * infinity), bfloat16 magnitudes below 0x1.ffp127. Workers reject such inputs like NaN, naming the offset;
 * a sum that rounds out of range comes back as an infinity, which workers also report.
 */
public final class HalfFloats
{
    /** Largest finite float16, 65504. */
    public static final float FLOAT16_MAX = 65504.0f;
    /** Largest finite bfloat16, 0x1.fep127. */
    public static final float BFLOAT16_MAX = 0x1.fep127f;

    private static final int FLOAT_ABS_MASK = 0x7FFF_FFFF;
    private static final int FLOAT_INFINITY_BITS = 0x7F80_0000;
    private static final short BFLOAT16_NAN = (short)0x7FC0;

    private HalfFloats()
    {
    }

    /**
     * Round a float to bfloat16, to nearest with ties to even. NaN stays a (quiet) NaN; values beyond
     * the largest finite bfloat16 become infinities.
     *
     * @return the bfloat16 bits.
     */
    public static short toBfloat16Bits(final float value)
    {
        final int bits = Float.floatToRawIntBits(value);
        if ((bits & FLOAT_ABS_MASK) > FLOAT_INFINITY_BITS)
        {
            return BFLOAT16_NAN;
        }
        return (short)((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
    }

    /**
     * @return the float value of bfloat16 bits (exact).
     */
    public static float bfloat16ToFloat(final short bits)
    {
        return Float.intBitsToFloat(bits << 16);
    }

    /**
     * Encode a float in a 16-bit format, rounding to nearest even.
     *
     * @param type {@link ElementType#FLOAT16} or {@link ElementType#BFLOAT16}.
     * @return the 16-bit pattern.
     */
    public static short encode(final byte type, final float value)
    {
        return type == ElementType.FLOAT16 ? Float.floatToFloat16(value) : toBfloat16Bits(value);
    }

    /**
     * Decode a 16-bit pattern (exact).
     *
     * @param type {@link ElementType#FLOAT16} or {@link ElementType#BFLOAT16}.
     */
    public static float decode(final byte type, final short bits)
    {
        return type == ElementType.FLOAT16 ? Float.float16ToFloat(bits) : bfloat16ToFloat(bits);
    }

    /**
     * Encode a chunk of floats.
     *
     * @param type  {@link ElementType#FLOAT16} or {@link ElementType#BFLOAT16}.
     * @param src   values.
     * @param from  first index in src.
     * @param count number of values.
     * @param dst   16-bit patterns, from index 0.
     */
    public static void encode(final byte type, final float[] src, final int from, final int count, final short[] dst)
    {
        if (type == ElementType.FLOAT16)
        {
            for (int i = 0; i < count; i++)
            {
                dst[i] = Float.floatToFloat16(src[from + i]);
            }
        }
        else
        {
            for (int i = 0; i < count; i++)
            {
                dst[i] = toBfloat16Bits(src[from + i]);
            }
        }
    }

    /**
     * Decode a chunk of 16-bit patterns, divided by a divisor (1 for a sum, n for an average).
     *
     * @return the index (relative to dstFrom) of the first infinity or NaN written, or -1.
     */
    public static int decode(
        final byte type, final short[] src, final int count, final float divisor, final float[] dst, final int dstFrom)
    {
        int firstNonFinite = -1;
        for (int i = 0; i < count; i++)
        {
            final float value = decode(type, src[i]) / divisor;
            dst[dstFrom + i] = value;
            if (firstNonFinite < 0 && !Float.isFinite(value))
            {
                firstNonFinite = i;
            }
        }
        return firstNonFinite;
    }

    /**
     * Block exponent of a chunk as the appliance will see it: the exponent of the largest magnitude after
     * rounding to the 16-bit format (rounding is monotonic, so this is the largest rounded element).
     *
     * @param type          {@link ElementType#FLOAT16} or {@link ElementType#BFLOAT16}.
     * @param maxAbsBits    largest {@code floatToRawIntBits(x) & 0x7FFFFFFF} of the chunk's float32 values.
     * @return m as {@link BlockFloatingPoint#exponentOfMagnitudeBits}, {@link BlockFloatingPoint#NO_EXPONENT}
     * when every element rounds to zero, {@link BlockFloatingPoint#NON_FINITE} when an element is NaN or
     * infinite, or {@link BlockFloatingPoint#OUT_OF_RANGE} when a finite element rounds out of the format's range.
     */
    public static int blockExponent(final byte type, final int maxAbsBits)
    {
        if (maxAbsBits >= FLOAT_INFINITY_BITS)
        {
            return BlockFloatingPoint.NON_FINITE;
        }
        final float rounded = decode(type, encode(type, Float.intBitsToFloat(maxAbsBits)));
        if (!Float.isFinite(rounded))
        {
            return BlockFloatingPoint.OUT_OF_RANGE;
        }
        return BlockFloatingPoint.exponentOfMagnitudeBits(Float.floatToRawIntBits(rounded) & FLOAT_ABS_MASK);
    }

    /**
     * @return true when a float encodes to a finite 16-bit value.
     */
    public static boolean isRepresentable(final byte type, final float value)
    {
        return Float.isFinite(value) && Float.isFinite(decode(type, encode(type, value)));
    }

    /**
     * Largest finite magnitude of a format.
     */
    public static float maxFinite(final byte type)
    {
        return type == ElementType.FLOAT16 ? FLOAT16_MAX : BFLOAT16_MAX;
    }

    /**
     * Relative error of rounding to the format, half an ulp: 2^-11 for float16, 2^-8 for bfloat16.
     */
    public static double relativeRounding(final byte type)
    {
        return type == ElementType.FLOAT16 ? 0x1.0p-11 : 0x1.0p-8;
    }

    /**
     * Absolute error of rounding a value into the subnormal range: half the smallest subnormal, 2^-25 for
     * float16, 2^-134 for bfloat16.
     */
    public static double subnormalRounding(final byte type)
    {
        return type == ElementType.FLOAT16 ? 0x1.0p-25 : 0x1.0p-134;
    }

    /**
     * Lane of 32-bit fixed point for a 16-bit value: clamp(rint(decode(bits) * scale), -limit, limit).
     * A NaN lane (only a misbehaving sender makes one) becomes 0, an infinity the limit.
     *
     * @param scale f from {@link BlockFloatingPoint#scale(int, int)}.
     * @param limit from {@link BlockFloatingPoint#laneLimit(int)}.
     */
    public static int toFixedPoint(final byte type, final short bits, final double scale, final int limit)
    {
        final double scaled = Math.rint(decode(type, bits) * scale);
        return (int)Math.max(-limit, Math.min(limit, scaled));
    }

    /**
     * 16-bit value of a summed fixed-point lane: encode(sum / f).
     *
     * @param scale f from {@link BlockFloatingPoint#scale(int, int)}.
     */
    public static short fromFixedPoint(final byte type, final int sum, final double scale)
    {
        return encode(type, (float)(sum / scale));
    }

    /**
     * Bound on the absolute error of one element of a 16-bit sum against the exact sum of the float32
     * inputs (see the class comment).
     *
     * @param type          {@link ElementType#FLOAT16} or {@link ElementType#BFLOAT16}.
     * @param worldSize     n.
     * @param exponent      the chunk's agreed block exponent m.
     * @param sumOfAbs      sum over workers of |x_r|.
     * @param exactAbs      |sum of x_r|.
     * @return e.
     */
    public static double errorBound(
        final byte type, final int worldSize, final int exponent, final double sumOfAbs, final double exactAbs)
    {
        final double rel = relativeRounding(type);
        final double tiny = subnormalRounding(type);
        final double e1 = rel * sumOfAbs + worldSize * tiny + BlockFloatingPoint.errorBound(exponent, worldSize);
        return e1 + (rel + 0x1.0p-24) * (exactAbs + e1) + tiny;
    }
}
