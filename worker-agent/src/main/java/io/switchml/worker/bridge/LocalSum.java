package io.switchml.worker.bridge;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The element loops of a {@link LocalGroup}: adding the host's other ranks' ranges into one, and scaling it. They work
 * on the shared memory in place, in blocks that stay in the core's cache while every rank's block is added, so each
 * range is read from memory once. Plain loops over constant layouts, which the JIT vectorises.
 */
final class LocalSum
{
    /** Bytes added from every source before the next block: well inside a core's L1 and L2. */
    static final int BLOCK_BYTES = 16 << 10;

    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;

    /**
     * {@code sum[i] += sources[0][i] + sources[1][i] + ...}, in native order.
     *
     * @param sum     the range that receives the sum.
     * @param sources ranges of the same size.
     * @param ints    int32 (wrapping) instead of float32 elements.
     */
    static void addInto(final MemorySegment sum, final MemorySegment[] sources, final boolean ints)
    {
        final long bytes = sum.byteSize();
        for (final MemorySegment source : sources)
        {
            if (source.byteSize() != bytes)
            {
                throw new IllegalArgumentException("ranges differ in size: " + source.byteSize() + " and " + bytes);
            }
        }
        for (long block = 0; block < bytes; block += BLOCK_BYTES)
        {
            final long end = Math.min(bytes, block + BLOCK_BYTES);
            for (final MemorySegment source : sources)
            {
                if (ints)
                {
                    addInts(sum, source, block, end);
                }
                else
                {
                    addFloats(sum, source, block, end);
                }
            }
        }
    }

    private static void addFloats(final MemorySegment sum, final MemorySegment source, final long from, final long to)
    {
        for (long i = from; i < to; i += Float.BYTES)
        {
            sum.set(FLOAT, i, sum.get(FLOAT, i) + source.get(FLOAT, i));
        }
    }

    private static void addInts(final MemorySegment sum, final MemorySegment source, final long from, final long to)
    {
        for (long i = from; i < to; i += Integer.BYTES)
        {
            sum.set(INT, i, sum.get(INT, i) + source.get(INT, i));
        }
    }

    /**
     * {@code range[i] *= factor}, float32.
     */
    static void scaleFloats(final MemorySegment range, final float factor)
    {
        final long bytes = range.byteSize();
        for (long i = 0; i < bytes; i += Float.BYTES)
        {
            range.set(FLOAT, i, range.get(FLOAT, i) * factor);
        }
    }

    private LocalSum()
    {
    }
}
