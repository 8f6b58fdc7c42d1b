package io.switchml.worker.bridge;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import io.switchml.protocol.NativeLanes;

/**
 * The element loops of a {@link LocalGroup}: adding the host's other ranks' ranges into one, and scaling it while it
 * is copied back. They work on the shared memory in place, in blocks that stay in the core's cache while every rank's
 * block is added (or copied), so each range is read from memory once. The adds and the scaling run in the project's
 * native library ({@link NativeLanes}) when it is loaded and the ranges are off-heap (the ranks' shared memory): so they
 * are at full speed from the first call in a JVM whose JIT stops at C1 (the launcher's default for worker commands,
 * packaging/bin/switchml). Otherwise plain loops over constant layouts, which C2 vectorises.
 */
final class LocalSum
{
    /** Bytes added from every source before the next block: well inside a core's L1 and L2. */
    static final int BLOCK_BYTES = 16 << 10;
    /**
     * The native kernels' block: larger, so that a call's fixed cost (its two segments' scopes acquired and released,
     * the stub run in C1's code) stays small beside the block's work, and still well inside a core's L2.
     */
    static final int NATIVE_BLOCK_BYTES = 256 << 10;

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
        final boolean direct = NativeLanes.enabled() && sum.isNative() && allNative(sources);
        final int blockBytes = direct ? NATIVE_BLOCK_BYTES : BLOCK_BYTES;
        for (long block = 0; block < bytes; block += blockBytes)
        {
            final long end = Math.min(bytes, block + blockBytes);
            for (final MemorySegment source : sources)
            {
                if (direct)
                {
                    NativeLanes.add(sum, block, source, block, (int)((end - block) / Float.BYTES), ints);
                }
                else if (ints)
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

    private static boolean allNative(final MemorySegment[] segments)
    {
        for (final MemorySegment segment : segments)
        {
            if (!segment.isNative())
            {
                return false;
            }
        }
        return true;
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
     * {@code result[i] *= factor}, float32, and the scaled result copied into each of {@code copies} (ranges of the same
     * size), block by block, so that the result is read from memory once rather than once to scale and again to copy.
     */
    static void scaleAndCopy(final MemorySegment result, final float factor, final MemorySegment[] copies)
    {
        final long bytes = result.byteSize();
        final boolean direct = NativeLanes.enabled() && result.isNative();
        for (long block = 0; block < bytes; block += BLOCK_BYTES)
        {
            final long end = Math.min(bytes, block + BLOCK_BYTES);
            if (direct)
            {
                NativeLanes.scale(result, block, (int)((end - block) / Float.BYTES), factor);
            }
            else
            {
                for (long i = block; i < end; i += Float.BYTES)
                {
                    result.set(FLOAT, i, result.get(FLOAT, i) * factor);
                }
            }
            for (final MemorySegment copy : copies)
            {
                MemorySegment.copy(result, block, copy, block, end - block);
            }
        }
    }

    private LocalSum()
    {
    }
}
