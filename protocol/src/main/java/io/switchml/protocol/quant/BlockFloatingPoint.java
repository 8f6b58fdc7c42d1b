package io.switchml.protocol.quant;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.NativeLanes;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Block floating point quantization of float32 chunks to int32 lanes (SwitchML section 4.4 and
 * appendix E).
 * <p>
 * A chunk's <em>block exponent</em> m is the smallest integer with |x| &lt; 2^m for every element x
 * of the chunk, but never below -126: all subnormal chunks share m = -126. All workers agree on the maximum m of a chunk through the look-ahead exchange and
 * scale by f = (2^31-1) / (n * 2^m). Every quantized lane is clamped to
 * floor((2^31-1)/n) in magnitude, so the sum of n lanes never overflows int32 even when rounding goes
 * up at the extreme value. The error of the dequantized sum against the exact real sum is at most
 * n/f (Theorem 1). In fact float32 has 24 significant bits, so |x| &lt; 2^m keeps x*f at least 128/n below
 * the lane limit for n &lt;= 256 and the clamp never engages for inputs that respect their exponent;
 * the actual error is at most n/(2f) from round-to-nearest. The clamp guards against an exponent that
 * is too small (a protocol violation), turning it into a bounded error instead of an int32 overflow.
 * Converting the double result back to float32 adds at most half an ulp of the result.
 * <p>
 * NaN and infinities cannot be represented in a lane: {@link #maxExponent} reports a chunk holding one with
 * {@link #NON_FINITE}, which is also the look-ahead value on the wire
 * ({@link DataHeaderFlyweight#NON_FINITE_EXPONENT}): it wins the maximum, every worker sends the chunk as zeros and
 * writes NaN into its result, as an all-reduce under Gloo sums them into a non-finite result (what a loss scaler
 * such as PyTorch's {@code GradScaler} looks for to skip a step).
 */
public final class BlockFloatingPoint
{
    /** Exponent of an all-zero chunk. */
    public static final int NO_EXPONENT = DataHeaderFlyweight.NO_EXPONENT;
    /**
     * Result of {@link #maxExponent} for a chunk holding a NaN or an infinity: the wire's
     * {@link DataHeaderFlyweight#NON_FINITE_EXPONENT}, above every block exponent.
     */
    public static final int NON_FINITE = DataHeaderFlyweight.NON_FINITE_EXPONENT;
    /**
     * Result of {@code HalfFloats.blockExponent} for a chunk whose finite value rounds out of a 16-bit format's
     * range: the value is the caller's own and finite, so it is refused rather than carried as not finite.
     */
    public static final int OUT_OF_RANGE = Integer.MAX_VALUE;

    private static final double INT32_MAX = Integer.MAX_VALUE;
    private static final int ABS_MASK = 0x7FFF_FFFF;
    private static final int INFINITY_BITS = 0x7F80_0000;
    private static final int CANONICAL_NAN_BITS = 0x7FC0_0000;
    private static final ValueLayout.OfInt SWAPPED_INT = ValueLayout.JAVA_INT.withOrder(
        ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN);

    private BlockFloatingPoint()
    {
    }

    /**
     * Block exponent of a chunk: the smallest m with |x| &lt; 2^m for every element.
     *
     * @param src    values.
     * @param from   first index.
     * @param count  number of elements.
     * @return m in [-126, 128], {@link #NO_EXPONENT} when all elements are (signed) zero, or
     * {@link #NON_FINITE} when any is NaN or infinite.
     */
    public static int maxExponent(final float[] src, final int from, final int count)
    {
        return exponentOfMagnitudeBits(maxAbsBits(MemorySegment.ofArray(src), from, count));
    }

    /**
     * The largest magnitude bit pattern of a float32 chunk, {@code floatToIntBits(max |x|) & 0x7FFFFFFF}: the
     * scan behind every block exponent, run by a worker over each chunk it sends.
     * <p>
     * The floats are read as ints through a segment, and the loop is an int max of {@code bits & 0x7FFFFFFF},
     * which C2 vectorizes well. Neither obvious form does: {@code Float.floatToRawIntBits} in the loop (C2's
     * MoveF2I) has no vector form, so that loop stays scalar, and a float max over |x| (NaN and -0.0 semantics)
     * ran 9x slower in cache (docs/jmh/exponent-scan: 185 ns against 1666 ns per 8192 floats, 1665 against
     * 3200 ns streaming a 100 MB tensor). For non-negative floats the int order of the bits is the float order,
     * infinities above every finite value and NaNs above the infinities.
     *
     * @param floats a segment over float32 values, e.g. {@code MemorySegment.ofArray(float[])}.
     * @param from   index of the first float.
     * @param count  number of floats.
     * @return the bits, 0 for an all-zero chunk; any NaN gives the canonical NaN's 0x7FC00000.
     */
    public static int maxAbsBits(final MemorySegment floats, final long from, final int count)
    {
        if (NativeLanes.enabled())
        {
            java.util.Objects.checkFromIndexSize(from, count, floats.byteSize() / Float.BYTES);
            return NativeLanes.maxAbsBits(floats, from * Float.BYTES, count);
        }
        int max = 0;
        for (long i = from, end = from + count; i < end; i++)
        {
            max = Math.max(max, floats.getAtIndex(ValueLayout.JAVA_INT, i) & ABS_MASK);
        }
        return max > INFINITY_BITS ? CANONICAL_NAN_BITS : max;
    }

    /**
     * {@link #maxAbsBits(MemorySegment, long, int)} of floats stored in the given byte order, e.g. a
     * {@code FloatBuffer} over a big-endian {@code ByteBuffer}.
     */
    public static int maxAbsBits(final MemorySegment floats, final ByteOrder order, final long from, final int count)
    {
        if (order == ByteOrder.nativeOrder())
        {
            return maxAbsBits(floats, from, count);
        }
        int max = 0;
        for (long i = from, end = from + count; i < end; i++)
        {
            max = Math.max(max, floats.getAtIndex(SWAPPED_INT, i) & ABS_MASK);
        }
        return max > INFINITY_BITS ? CANONICAL_NAN_BITS : max;
    }

    /**
     * Block exponent from the largest absolute bit pattern of a chunk.
     *
     * @param maxAbsBits largest {@code floatToRawIntBits(x) & 0x7FFFFFFF} in the chunk.
     * @return as {@link #maxExponent(float[], int, int)}.
     */
    public static int exponentOfMagnitudeBits(final int maxAbsBits)
    {
        if (maxAbsBits == 0)
        {
            return NO_EXPONENT;
        }
        if (maxAbsBits >= INFINITY_BITS)
        {
            return NON_FINITE;
        }
        return Math.getExponent(Float.intBitsToFloat(maxAbsBits)) + 1;
    }

    /**
     * Index of the first NaN or infinite element, for error messages.
     *
     * @return the index, or -1 when every element is finite.
     */
    public static int firstNonFinite(final float[] src, final int from, final int count)
    {
        for (int i = from, end = from + count; i < end; i++)
        {
            if (!Float.isFinite(src[i]))
            {
                return i;
            }
        }
        return -1;
    }

    /**
     * Combine two exponents, treating {@link #NO_EXPONENT} as absent.
     *
     * @return the larger exponent.
     */
    public static int maxOf(final int a, final int b)
    {
        return Math.max(a, b); // NO_EXPONENT is the smallest short, so max() already ignores it
    }

    /**
     * Scale factor f = (2^31-1) / (n * 2^m).
     *
     * @param exponent   agreed block exponent m, or {@link #NO_EXPONENT} for an all-zero chunk.
     * @param worldSize  number of workers n.
     * @return f; 1.0 for an all-zero chunk, where any scale quantizes to zero.
     */
    public static double scale(final int exponent, final int worldSize)
    {
        if (exponent == NO_EXPONENT)
        {
            return 1.0;
        }
        return Math.scalb(INT32_MAX / worldSize, -exponent);
    }

    /**
     * Largest magnitude a quantized lane may take so that the sum of n lanes fits int32.
     *
     * @param worldSize number of workers n.
     * @return floor((2^31-1)/n).
     */
    public static int laneLimit(final int worldSize)
    {
        return Integer.MAX_VALUE / worldSize;
    }

    /**
     * Bound on the absolute error of one dequantized summed element against the exact sum, before
     * the final conversion to float32 (Theorem 1).
     *
     * @return n / f.
     */
    public static double errorBound(final int exponent, final int worldSize)
    {
        if (exponent == NO_EXPONENT)
        {
            return 0.0;
        }
        return worldSize / scale(exponent, worldSize);
    }

    /**
     * Quantize a chunk: dst[i] = clamp(rint(src[i] * scale), -limit, limit).
     *
     * @param src     values, all finite with |x| &lt; 2^m for the m that produced scale.
     * @param from    first index in src.
     * @param count   number of elements.
     * @param scale   f from {@link #scale(int, int)}.
     * @param limit   from {@link #laneLimit(int)}.
     * @param dst     lanes.
     * @param dstFrom first index in dst.
     */
    public static void quantize(
        final float[] src, final int from, final int count, final double scale, final int limit,
        final int[] dst, final int dstFrom)
    {
        // clamping the int after the saturating cast compiles to vector min/max instructions
        for (int i = 0; i < count; i++)
        {
            dst[dstFrom + i] = Math.max(-limit, Math.min(limit, (int)Math.rint(src[from + i] * scale)));
        }
    }

    /**
     * Dequantize summed lanes: dst[i] = (float)(src[i] * multiplier), with multiplier 1/f for a sum
     * or 1/(n*f) for an average.
     */
    public static void dequantize(
        final int[] src, final int from, final int count, final double multiplier,
        final float[] dst, final int dstFrom)
    {
        for (int i = 0; i < count; i++)
        {
            dst[dstFrom + i] = (float)(src[from + i] * multiplier);
        }
    }
}
