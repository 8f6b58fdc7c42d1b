package io.switchml.worker;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The block-exponent scan, {@code floatToIntBits(max |x|) & 0x7FFFFFFF} of a float chunk, with the incubating
 * Vector API: two vector accumulators of the magnitude bits, reduced once at the end. C2 does not vectorize
 * the scalar loop's reduction well (it reduces across the vector every iteration); this form ran 7x faster on a
 * chunk in cache and 1.5x faster streaming a 100 MB tensor from memory (9.6 against 14.5 GB/s, AVX-512 Xeon).
 * <p>
 * Loaded only when the JVM resolved {@code jdk.incubator.vector} ({@code --add-modules jdk.incubator.vector},
 * which the launcher passes to workers); {@link TensorView} falls back to the scalar loop otherwise.
 */
final class VectorScan
{
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> INTS = IntVector.SPECIES_PREFERRED;
    private static final int ABS_MASK = 0x7FFF_FFFF;
    private static final int INFINITY_BITS = 0x7F80_0000;
    private static final int CANONICAL_NAN_BITS = 0x7FC0_0000;

    private VectorScan()
    {
    }

    /**
     * @return the magnitude bits of the largest |x| in src[from, from + count); any NaN gives the canonical NaN's
     * bits, as {@code Float.floatToIntBits} does.
     */
    static int maxAbsBits(final float[] src, final int from, final int count)
    {
        final int lanes = FLOATS.length();
        final int end = from + count;
        final int bound = from + (count / (2 * lanes)) * 2 * lanes;
        IntVector max0 = IntVector.zero(INTS);
        IntVector max1 = max0;
        int i = from;
        for (; i < bound; i += 2 * lanes)
        {
            max0 = max0.max(FloatVector.fromArray(FLOATS, src, i).reinterpretAsInts().and(ABS_MASK));
            max1 = max1.max(FloatVector.fromArray(FLOATS, src, i + lanes).reinterpretAsInts().and(ABS_MASK));
        }
        int max = max0.max(max1).reduceLanes(VectorOperators.MAX);
        for (; i < end; i++)
        {
            max = Math.max(max, Float.floatToRawIntBits(src[i]) & ABS_MASK);
        }
        return max > INFINITY_BITS ? CANONICAL_NAN_BITS : max;
    }
}
