package io.switchml.protocol.quant;

import io.switchml.protocol.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.math.BigDecimal;
import java.math.MathContext;
import java.util.Arrays;
import java.util.SplittableRandom;

import static io.switchml.protocol.quant.BlockFloatingPoint.NON_FINITE;
import static io.switchml.protocol.quant.BlockFloatingPoint.NO_EXPONENT;
import static io.switchml.protocol.quant.BlockFloatingPoint.dequantize;
import static io.switchml.protocol.quant.BlockFloatingPoint.errorBound;
import static io.switchml.protocol.quant.BlockFloatingPoint.exponentOfMagnitudeBits;
import static io.switchml.protocol.quant.BlockFloatingPoint.firstNonFinite;
import static io.switchml.protocol.quant.BlockFloatingPoint.laneLimit;
import static io.switchml.protocol.quant.BlockFloatingPoint.maxExponent;
import static io.switchml.protocol.quant.BlockFloatingPoint.maxOf;
import static io.switchml.protocol.quant.BlockFloatingPoint.quantize;
import static io.switchml.protocol.quant.BlockFloatingPoint.scale;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Simulates n workers and a switch: the workers agree on the block exponent, quantize, the switch adds the int32
 * lanes, and each result element is checked against the exact sum computed with {@link BigDecimal}.
 * <p>
 * Accepted error per element: Theorem 1's n/f, plus half an ulp for the final conversion to float32, plus
 * {@link #DOUBLE_ARITHMETIC_SLACK} times n*2^m. The slack covers the double arithmetic that Theorem 1, stated over
 * the reals, leaves out: x*f is rounded to double before rint (at most 2^-53*|x| per worker), and 1/f, the product
 * with the summed lanes and n/f itself are each rounded (2^-53 relative to a result of at most about n*2^m). That
 * is under 2^-51*n*2^m in all; the slack is 2^11 times larger, yet still at most 1/512 of the bound n/f, which is
 * about n^2*2^m*2^-31.
 */
class BlockFloatingPointTest
{
    private static final double DOUBLE_ARITHMETIC_SLACK = 0x1p-40;
    /** Smallest magnitude that float32 rounds to infinity: Float.MAX_VALUE plus half its ulp. */
    private static final BigDecimal FLOAT_OVERFLOW_THRESHOLD = new BigDecimal(0x1p128 - 0x1p103);
    private static final int SENTINEL_LANE = 0x5A5A5A5A;
    private static final int SENTINEL_FLOAT_BITS = 0x7FC0_5A5A;
    private static final int PAD = 3;

    // ---------------------------------------------------------------------------------------------------------
    // Exponents
    // ---------------------------------------------------------------------------------------------------------

    @Test
    void nonFiniteValuesHaveNoExponent()
    {
        final float negativeNaN = Float.intBitsToFloat(0xFFC0_0001);
        final float signallingNaN = Float.intBitsToFloat(0x7F80_0001);
        for (final float bad : new float[]{ Float.NaN, negativeNaN, signallingNaN, Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY })
        {
            assertEquals(NON_FINITE, maxExponent(new float[]{ bad }, 0, 1), () -> "alone: " + bad);
            final float[] mixed = { 1.0f, -3e38f, 0.0f, bad, Float.MIN_VALUE };
            assertEquals(NON_FINITE, maxExponent(mixed, 0, mixed.length), () -> "mixed: " + bad);
            assertEquals(3, firstNonFinite(mixed, 0, mixed.length), () -> "index: " + bad);
            assertEquals(3, firstNonFinite(mixed, 2, 3), () -> "index is absolute, not relative to from: " + bad);
            assertEquals(-1, firstNonFinite(mixed, 0, 3), () -> "range before it: " + bad);
            assertEquals(-1, firstNonFinite(mixed, 4, 1), () -> "range after it: " + bad);
            assertEquals(128, maxExponent(mixed, 0, 3), () -> "range before it: " + bad);
        }
        assertEquals(NON_FINITE, exponentOfMagnitudeBits(0x7F80_0000));
        assertEquals(NON_FINITE, exponentOfMagnitudeBits(0x7FFF_FFFF));
    }

    @Test
    void firstNonFiniteFindsTheFirstOfSeveral()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int iteration = 0; iteration < 1_000; iteration++)
        {
            final float[] values = gaussians(random, 1 + random.nextInt(64), 1.0f);
            int expected = -1;
            final int bad = random.nextInt(4);
            for (int b = 0; b < bad; b++)
            {
                final int index = random.nextInt(values.length);
                values[index] = switch (random.nextInt(3))
                {
                    case 0 -> Float.NaN;
                    case 1 -> Float.POSITIVE_INFINITY;
                    default -> Float.NEGATIVE_INFINITY;
                };
                expected = -1 == expected ? index : Math.min(expected, index);
            }
            final String context = Arrays.toString(values) + "; " + TestSeed.describe(seed);
            assertEquals(expected, firstNonFinite(values, 0, values.length), context);
            assertEquals(-1 == expected, NON_FINITE != maxExponent(values, 0, values.length), context);
        }
    }

    @Test
    void zerosHaveNoExponent()
    {
        assertEquals(NO_EXPONENT, maxExponent(new float[]{ -0.0f }, 0, 1));
        assertEquals(NO_EXPONENT, maxExponent(new float[]{ 0.0f }, 0, 1));
        assertEquals(NO_EXPONENT, maxExponent(new float[]{ -0.0f, 0.0f, -0.0f }, 0, 3));
        assertEquals(NO_EXPONENT, maxExponent(new float[]{ 1.0f }, 0, 0), "empty range");
        assertEquals(NO_EXPONENT, maxExponent(new float[]{ 5.0f, -0.0f, 7.0f }, 1, 1), "range holding only -0");
        assertEquals(NO_EXPONENT, exponentOfMagnitudeBits(0));
    }

    @Test
    void exponentBracketsTheLargestMagnitude()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int iteration = 0; iteration < 2_000; iteration++)
        {
            final float[] values = new float[1 + random.nextInt(32)];
            for (int i = 0; i < values.length; i++)
            {
                final int biasedExponent = 1 + random.nextInt(254);
                final int bits = random.nextInt(2) << 31 | biasedExponent << 23 | random.nextInt(1 << 23);
                values[i] = Float.intBitsToFloat(bits);
            }
            float max = 0.0f;
            for (final float value : values)
            {
                max = Math.max(max, Math.abs(value));
            }
            final int m = maxExponent(values, 0, values.length);
            final float largest = max;
            final String context = "max " + largest + " m " + m + "; " + TestSeed.describe(seed);
            assertTrue(m >= -125 && m <= 128, context);
            assertTrue(largest < Math.scalb(1.0, m), () -> "|x| < 2^m: " + context);
            assertTrue(largest >= Math.scalb(1.0, m - 1), () -> "|x| >= 2^(m-1): " + context);
        }
    }

    @Test
    void exponentAtPowersOfTwoAndTheEdgesOfTheFloatRange()
    {
        for (int k = -126; k <= 127; k++)
        {
            final float power = Math.scalb(1.0f, k);
            assertEquals(k + 1, maxExponent(new float[]{ power }, 0, 1), "2^" + k + " is not < 2^" + k);
            assertEquals(k + 1, maxExponent(new float[]{ -power }, 0, 1), "-2^" + k);
            if (k > -126)
            {
                assertEquals(k, maxExponent(new float[]{ Math.nextDown(power) }, 0, 1), "nextDown(2^" + k + ")");
            }
            if (k < 127)
            {
                assertEquals(k + 1, maxExponent(new float[]{ Math.nextUp(power) }, 0, 1), "nextUp(2^" + k + ")");
            }
        }
        assertEquals(128, maxExponent(new float[]{ Float.MAX_VALUE }, 0, 1));
        assertEquals(128, maxExponent(new float[]{ -Float.MAX_VALUE }, 0, 1));
        assertEquals(-125, maxExponent(new float[]{ Float.MIN_NORMAL }, 0, 1));
    }

    @Test
    void subnormalsShareTheSmallestExponent()
    {
        // Documented range is [-126, 128]: every subnormal gets m = -126, which still satisfies |x| < 2^m but is not
        // the smallest such m (Float.MIN_VALUE = 2^-149 would allow m = -148).
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        assertEquals(-126, maxExponent(new float[]{ Float.MIN_VALUE }, 0, 1));
        assertEquals(-126, maxExponent(new float[]{ -Float.MIN_VALUE, 0.0f }, 0, 2));
        assertEquals(-126, maxExponent(new float[]{ Math.nextDown(Float.MIN_NORMAL) }, 0, 1));
        for (int iteration = 0; iteration < 1_000; iteration++)
        {
            final float subnormal = Float.intBitsToFloat(random.nextInt(2) << 31 | (1 + random.nextInt(0x7F_FFFF)));
            assertEquals(-126, maxExponent(new float[]{ subnormal }, 0, 1), subnormal + "; " + TestSeed.describe(seed));
        }
    }

    @Test
    void maxOfIgnoresAbsentExponents()
    {
        assertEquals(NO_EXPONENT, maxOf(NO_EXPONENT, NO_EXPONENT));
        assertEquals(-126, maxOf(NO_EXPONENT, -126));
        assertEquals(-126, maxOf(-126, NO_EXPONENT));
        assertEquals(5, maxOf(5, -3));
        assertEquals(128, maxOf(128, 127));
    }

    // ---------------------------------------------------------------------------------------------------------
    // Scale, lane limit and bound
    // ---------------------------------------------------------------------------------------------------------

    @Test
    void laneLimitIsTheLargestThatCannotOverflowTheSum()
    {
        for (int n = 1; n <= 256; n++)
        {
            final long limit = laneLimit(n);
            assertTrue(limit * n <= Integer.MAX_VALUE, "n " + n);
            assertTrue((limit + 1) * n > Integer.MAX_VALUE, "n " + n);
        }
    }

    @Test
    void scaleAndBoundFollowTheFormula()
    {
        for (final int n : new int[]{ 1, 2, 3, 7, 100, 255, 256 })
        {
            for (int m = -126; m <= 128; m++)
            {
                final double f = scale(m, n);
                final double product = f * n * Math.scalb(1.0, m);
                assertEquals(Integer.MAX_VALUE, product, Integer.MAX_VALUE * 0x1p-50, "f*n*2^m for m " + m + " n " + n);
                assertEquals(n / f, errorBound(m, n), "n/f for m " + m + " n " + n);
                assertTrue(Double.isFinite(f) && f > 0.0, "m " + m + " n " + n);
            }
            assertEquals(1.0, scale(NO_EXPONENT, n));
            assertEquals(0.0, errorBound(NO_EXPONENT, n));
        }
    }

    @Test
    void largestInRangeValueNeverNeedsTheClampUpToMaxWorkers()
    {
        // float32 has 24 significant bits, so |x| < 2^m means |x| <= 2^m(1 - 2^-24) and x*f stays at least
        // 128/n below (2^31-1)/n: for n <= 256 rint never passes floor((2^31-1)/n). The clamp is a guard for a
        // stale or wrong exponent; inside the contract the error is rounding alone, at most n/(2f).
        for (int n = 1; n <= 256; n++)
        {
            for (final int m : new int[]{ -125, -1, 0, 1, 31, 127, 128 })
            {
                final float largest = Math.nextDown(Math.scalb(1.0f, m - 1) * 2.0f);
                final double scaled = Math.rint(largest * scale(m, n));
                assertTrue(scaled <= laneLimit(n), "n " + n + " m " + m + " scaled " + scaled);
            }
        }
    }

    @Test
    void clampKeepsTheSumInRangeWhenAValueReachesTwoToTheM()
    {
        // |x| = 2^m breaks the contract (the exponent was one too small); n = 2 is where rint then lands on
        // 2^30 = limit + 1, and two such lanes would overflow int32 without the clamp.
        for (int n = 1; n <= 256; n++)
        {
            for (final int m : new int[]{ -100, 0, 10, 127 })
            {
                final float edge = Math.scalb(1.0f, m);
                final int[] lanes = new int[2];
                quantize(new float[]{ edge, -edge }, 0, 2, scale(m, n), laneLimit(n), lanes, 0);
                assertEquals(laneLimit(n), lanes[0], "n " + n + " m " + m);
                assertEquals(-lanes[0], lanes[1], "n " + n);
                assertTrue((long)lanes[0] * n <= Integer.MAX_VALUE, "n " + n);
            }
        }
        final int[] lanes = new int[1];
        quantize(new float[]{ 1.0f }, 0, 1, scale(0, 2), laneLimit(2), lanes, 0);
        assertEquals(laneLimit(2), lanes[0], "rint(1073741823.5) = 2^30 clamped to 2^30 - 1");
    }

    // ---------------------------------------------------------------------------------------------------------
    // All-reduce simulations
    // ---------------------------------------------------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(ints = { 1, 2, 3, 256 })
    void typicalGradients(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int round = 0; round < rounds(n); round++)
        {
            final int k = 1 + random.nextInt(256);
            final float[][] chunks = new float[n][];
            for (int w = 0; w < n; w++)
            {
                chunks[w] = gaussians(random, k, 1e-3f);
            }
            allReduceAndCheck(chunks, false, "typical n " + n + " round " + round + "; " + TestSeed.describe(seed));
        }
    }

    @ParameterizedTest
    @ValueSource(ints = { 1, 2, 3, 256 })
    void zeroChunks(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final int k = 1 + random.nextInt(64);
        final float[][] chunks = new float[n][k];
        for (final float[] chunk : chunks)
        {
            for (int i = 0; i < k; i++)
            {
                chunk[i] = random.nextBoolean() ? -0.0f : 0.0f;
            }
            assertEquals(NO_EXPONENT, maxExponent(chunk, 0, k));
        }
        final float[] result = allReduceAndCheck(chunks, false, "zeros n " + n + "; " + TestSeed.describe(seed));
        for (final float value : result)
        {
            assertEquals(0.0f, value, 0.0f, TestSeed.describe(seed));
        }

        chunks[random.nextInt(n)] = gaussians(random, k, 1e-3f);
        allReduceAndCheck(chunks, false, "one non-zero worker n " + n + "; " + TestSeed.describe(seed));
    }

    @ParameterizedTest
    @ValueSource(ints = { 1, 2, 3, 256 })
    void subnormals(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int round = 0; round < rounds(n); round++)
        {
            final int k = 4 + random.nextInt(64);
            final boolean withNormals = random.nextBoolean();
            final float[][] chunks = new float[n][k];
            for (final float[] chunk : chunks)
            {
                for (int i = 0; i < k; i++)
                {
                    chunk[i] = Float.intBitsToFloat(random.nextInt(2) << 31 | random.nextInt(0x80_0000));
                }
                chunk[0] = Float.MIN_VALUE;
                chunk[1] = -Float.MIN_VALUE;
                chunk[2] = Math.nextDown(Float.MIN_NORMAL);
                if (withNormals)
                {
                    chunk[3] = -Float.MIN_NORMAL * (1 + random.nextInt(7));
                }
            }
            allReduceAndCheck(chunks, false, "subnormals n " + n + " round " + round + "; " + TestSeed.describe(seed));
        }
    }

    @ParameterizedTest
    @ValueSource(ints = { 1, 2, 3, 256 })
    void hugeDynamicRangeWithMixedSigns(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final float cap = Float.MAX_VALUE / n; // the exact sum stays inside the float range
        for (int round = 0; round < rounds(n); round++)
        {
            final int k = 2 + random.nextInt(128);
            final float[][] chunks = new float[n][k];
            for (final float[] chunk : chunks)
            {
                for (int i = 0; i < k; i++)
                {
                    final int exponent = random.nextInt(-100, 128); // 2^-100 is about 7.9e-31
                    final float magnitude = Math.min(cap, Math.scalb(1.0f + random.nextFloat(), exponent - 1));
                    chunk[i] = random.nextBoolean() ? magnitude : -magnitude;
                }
                chunk[0] = random.nextBoolean() ? cap : -cap;
                chunk[1] = 1e-30f;
            }
            allReduceAndCheck(chunks, false, "huge range n " + n + " round " + round + "; " + TestSeed.describe(seed));
        }
    }

    @ParameterizedTest
    @ValueSource(ints = { 1, 2, 3, 256 })
    void allNegative(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int round = 0; round < rounds(n); round++)
        {
            final int k = 1 + random.nextInt(128);
            final float magnitude = Math.scalb(1.0f, random.nextInt(-60, 60));
            final float[][] chunks = new float[n][k];
            for (final float[] chunk : chunks)
            {
                for (int i = 0; i < k; i++)
                {
                    chunk[i] = -Math.abs((float)random.nextGaussian()) * magnitude;
                }
                chunk[random.nextInt(k)] = -Math.nextDown(magnitude);
            }
            final float[] result = allReduceAndCheck(
                chunks, false, "all negative n " + n + " round " + round + "; " + TestSeed.describe(seed));
            for (final float value : result)
            {
                assertTrue(value <= 0.0f, () -> "sign of a negative sum " + value + "; " + TestSeed.describe(seed));
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = { 1, 2, 3, 256 })
    void valuesAtPowersOfTwo(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final int log2n = 32 - Integer.numberOfLeadingZeros(n - 1);
        for (int round = 0; round < rounds(n); round++)
        {
            final int power = random.nextInt(-126, 127 - log2n);
            final float x = Math.scalb(1.0f, power);
            final float[] pattern = { x, -x, Math.nextDown(x), -Math.nextDown(x), x / 2, Math.nextUp(x / 2), x / 3 };
            final float[][] chunks = new float[n][];
            for (int w = 0; w < n; w++)
            {
                chunks[w] = pattern.clone();
                if (random.nextBoolean())
                {
                    chunks[w][random.nextInt(pattern.length)] = Math.nextDown(x);
                }
            }
            assertEquals(power + 1, maxExponent(chunks[0], 0, pattern.length), TestSeed.describe(seed));
            allReduceAndCheck(chunks, false, "2^" + power + " n " + n + " round " + round + "; " + TestSeed.describe(seed));
        }
    }

    @Test
    void worstCaseRoundingAtTheMaximumWithTwoWorkers()
    {
        for (final int m : new int[]{ -126, -125, -1, 0, 1, 20, 127 })
        {
            final float largest = Math.nextDown(Math.scalb(1.0f, m - 1) * 2.0f);
            for (final float value : new float[]{ largest, -largest })
            {
                final float[][] chunks = { { value, value / 2 }, { value, -value } };
                assertEquals(m, maxExponent(chunks[0], 0, 2));
                allReduceAndCheck(chunks, false, "n 2, both workers at " + value);
            }
        }

        final float[][] atMaxValue = { { Float.MAX_VALUE }, { Float.MAX_VALUE } };
        final float[] result = allReduceAndCheck(atMaxValue, false, "n 2, both workers at Float.MAX_VALUE");
        assertEquals(Float.POSITIVE_INFINITY, result[0], "a sum past the float range rounds to infinity, as in IEEE");
        final float[] average = allReduceAndCheck(atMaxValue, true, "n 2, average of Float.MAX_VALUE");
        assertEquals(Float.MAX_VALUE, average[0], 0.0f);
    }

    @ParameterizedTest
    @ValueSource(ints = { 2, 3, 256 })
    void averageIsTheSumOverNWithinTheBoundOverN(final int n)
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int round = 0; round < rounds(n); round++)
        {
            final int k = 1 + random.nextInt(128);
            final float scaleOfValues = Math.scalb(1.0f, random.nextInt(-40, 40));
            final float[][] chunks = new float[n][];
            for (int w = 0; w < n; w++)
            {
                chunks[w] = gaussians(random, k, scaleOfValues);
            }
            allReduceAndCheck(chunks, true, "average n " + n + " round " + round + "; " + TestSeed.describe(seed));
        }
    }

    /**
     * One all-reduce of a chunk per worker. Checks lanes against the limit, partial sums against int32, the result
     * against the exact sum (or average), and that nothing outside the given ranges is read or written.
     *
     * @return the dequantized result.
     */
    private static float[] allReduceAndCheck(final float[][] chunks, final boolean average, final String context)
    {
        final int n = chunks.length;
        final int k = chunks[0].length;
        int m = NO_EXPONENT;
        for (final float[] chunk : chunks)
        {
            final int exponent = maxExponent(chunk, 0, k);
            assertNotEquals(NON_FINITE, exponent, context);
            m = maxOf(m, exponent);
        }
        final double f = scale(m, n);
        final int limit = laneLimit(n);

        final float[] src = new float[k + 2 * PAD];
        final int[] lanes = new int[k + 2];
        final long[] sums = new long[k];
        for (int w = 0; w < n; w++)
        {
            Arrays.fill(src, Float.MAX_VALUE); // would spoil the result if read
            System.arraycopy(chunks[w], 0, src, PAD, k);
            Arrays.fill(lanes, SENTINEL_LANE);
            quantize(src, PAD, k, f, limit, lanes, 1);
            assertEquals(SENTINEL_LANE, lanes[0], () -> "wrote before dstFrom; " + context);
            assertEquals(SENTINEL_LANE, lanes[k + 1], () -> "wrote past dstFrom + count; " + context);
            for (int i = 0; i < k; i++)
            {
                final int lane = lanes[1 + i];
                final double scaled = chunks[w][i] * f;
                final long sum = sums[i] + lane;
                sums[i] = sum;
                if (Math.abs(lane) > limit ||
                    !(Math.abs(lane - scaled) <= 0.5 || (Math.abs(lane) == limit && Math.abs(scaled) > limit)) ||
                    sum < Integer.MIN_VALUE || sum > Integer.MAX_VALUE)
                {
                    fail("lane " + lane + " (limit " + limit + ") is not x*f = " + scaled + " rounded to nearest or " +
                        "clamped, or the switch's int32 partial sum " + sum + " overflowed: worker " + w +
                        " element " + i + " x " + chunks[w][i] + "; " + context);
                }
            }
        }

        final int[] aggregated = new int[k];
        for (int i = 0; i < k; i++)
        {
            aggregated[i] = (int)sums[i];
        }
        final float[] out = new float[k + 2];
        Arrays.fill(out, Float.intBitsToFloat(SENTINEL_FLOAT_BITS));
        dequantize(aggregated, 0, k, average ? 1.0 / (n * f) : 1.0 / f, out, 1);
        assertEquals(SENTINEL_FLOAT_BITS, Float.floatToRawIntBits(out[0]), () -> "wrote before dstFrom; " + context);
        assertEquals(SENTINEL_FLOAT_BITS, Float.floatToRawIntBits(out[k + 1]), () -> "wrote past the end; " + context);
        final float[] result = Arrays.copyOfRange(out, 1, k + 1);

        if (NO_EXPONENT == m)
        {
            for (int i = 0; i < k; i++)
            {
                assertEquals(0.0f, result[i], 0.0f, "all-zero chunk; " + context);
            }
            return result;
        }

        final double bound = average ? errorBound(m, n) / n : errorBound(m, n);
        final double slack = DOUBLE_ARITHMETIC_SLACK * Math.scalb(average ? 1.0 : (double)n, m);
        final BigDecimal divisor = BigDecimal.valueOf(n);
        for (int i = 0; i < k; i++)
        {
            BigDecimal exact = BigDecimal.ZERO;
            for (final float[] chunk : chunks)
            {
                exact = exact.add(new BigDecimal(chunk[i]));
            }
            if (average)
            {
                exact = exact.divide(divisor, MathContext.DECIMAL128);
            }
            checkWithinBound(result[i], exact, bound, slack, context + " element " + i + " m " + m + " n " + n);
        }
        return result;
    }

    private static void checkWithinBound(
        final float actual, final BigDecimal exact, final double bound, final double slack, final String context)
    {
        if (Float.isInfinite(actual))
        {
            final boolean sameSign = (actual > 0) == (exact.signum() > 0);
            final BigDecimal reach = exact.abs().add(new BigDecimal(bound + slack));
            assertTrue(sameSign && reach.compareTo(FLOAT_OVERFLOW_THRESHOLD) >= 0,
                () -> "overflowed to " + actual + " though the exact value " + exact + " is in range; " + context);
            return;
        }
        assertTrue(Float.isFinite(actual), () -> "result " + actual + "; " + context);
        final float exactFloat = exact.floatValue();
        // half an ulp of the result: when the result crosses a binade from the exact value, its own ulp is the one
        // the final rounding uses
        final double halfUlp = 0.5 * Math.max(Math.ulp(exactFloat), Math.ulp(actual));
        final double allowed = bound + halfUlp + slack;
        final BigDecimal error = new BigDecimal(actual).subtract(exact).abs();
        if (error.compareTo(new BigDecimal(allowed)) > 0)
        {
            fail("error " + error.doubleValue() + " over " + allowed + " (bound " + bound + ", half ulp " + halfUlp +
                ", slack " + slack + "): result " + actual + " exact " + exact.doubleValue() + "; " + context);
        }
    }

    private static int rounds(final int n)
    {
        return n >= 256 ? 4 : 40;
    }

    private static float[] gaussians(final SplittableRandom random, final int count, final float sigma)
    {
        final float[] values = new float[count];
        for (int i = 0; i < count; i++)
        {
            values[i] = (float)random.nextGaussian() * sigma;
        }
        return values;
    }
}
