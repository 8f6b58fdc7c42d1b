package io.switchml.worker.bridge;

import io.switchml.protocol.NativeLanes;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link LocalSum} on off-heap ranges (the ranks' shared memory: the native kernels) against the same sums on heap
 * ranges (the Java loops), bit for bit, over ranges that span several blocks and end inside one.
 */
class LocalSumTest
{
    @Test
    void nativeSumsEqualTheJavaLoops()
    {
        assertTrue(NativeLanes.enabled(), "native lane kernels not in use: " + NativeLanes.description());
        final long seed = System.nanoTime();
        final Random random = new Random(seed);
        final int elements = 3 * LocalSum.NATIVE_BLOCK_BYTES / Float.BYTES + 1 + random.nextInt(1000);
        final long bytes = (long)elements * Float.BYTES;
        for (final boolean ints : new boolean[] {false, true})
        {
            final int ranks = 2 + random.nextInt(3);
            final int[][] values = new int[ranks][elements];
            for (final int[] rank : values)
            {
                for (int i = 0; i < elements; i++)
                {
                    rank[i] = ints ? random.nextInt() :
                        Float.floatToRawIntBits((float)(random.nextGaussian() * Math.pow(2, random.nextInt(30) - 15)));
                }
            }
            try (Arena arena = Arena.ofConfined())
            {
                final MemorySegment[] offHeap = new MemorySegment[ranks];
                final MemorySegment[] heap = new MemorySegment[ranks];
                for (int r = 0; r < ranks; r++)
                {
                    offHeap[r] = arena.allocate(bytes, 4);
                    MemorySegment.copy(values[r], 0, offHeap[r], ValueLayout.JAVA_INT_UNALIGNED, 0, elements);
                    heap[r] = MemorySegment.ofArray(values[r].clone());
                }
                LocalSum.addInto(offHeap[0], java.util.Arrays.copyOfRange(offHeap, 1, ranks), ints);
                LocalSum.addInto(heap[0], java.util.Arrays.copyOfRange(heap, 1, ranks), ints);
                assertEquals(-1, offHeap[0].mismatch(heap[0]), "sum of " + ranks + " ranks, ints " + ints + ", seed " + seed);
                if (!ints)
                {
                    final float factor = 1.0f / ranks;
                    LocalSum.scaleAndCopy(offHeap[0], factor, java.util.Arrays.copyOfRange(offHeap, 1, ranks));
                    LocalSum.scaleAndCopy(heap[0], factor, java.util.Arrays.copyOfRange(heap, 1, ranks));
                    for (int r = 0; r < ranks; r++)
                    {
                        assertEquals(-1, offHeap[r].mismatch(heap[0]), "scaled copy " + r + ", seed " + seed);
                        assertEquals(-1, heap[r].mismatch(heap[0]), "heap scaled copy " + r + ", seed " + seed);
                    }
                }
            }
        }
    }

    /**
     * A rank's shared memory unmapped (its arena closed, as when the rank leaves) fails the sum with the segment API's
     * exception, which the group turns into the round's failure, instead of the native kernel reading unmapped memory.
     */
    @Test
    void aClosedSourceFailsTheSumInsteadOfTheProcess()
    {
        final long bytes = 3L * LocalSum.BLOCK_BYTES;
        try (Arena mine = Arena.ofShared())
        {
            final MemorySegment sum = mine.allocate(bytes, 4);
            final Arena theirs = Arena.ofShared();
            final MemorySegment gone = theirs.allocate(bytes, 4);
            theirs.close();
            final IllegalStateException refused = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
                () -> LocalSum.addInto(sum, new MemorySegment[] {gone}, false));
            assertTrue(refused.getMessage() != null && refused.getMessage().toLowerCase(java.util.Locale.ROOT).contains("closed"),
                refused.toString());
        }
    }
}
