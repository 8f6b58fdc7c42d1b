package io.switchml.protocol;

import io.switchml.protocol.quant.BlockFloatingPoint;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The native lane kernels ({@link NativeLanes}, {@code switchml_lanes.c}) against the Java loops they replace, bit for
 * bit, at every level this CPU has (AVX-512, AVX2, the baseline): quantization with ties, values at and past the
 * limit, infinities, NaNs, subnormals and negative zeros; dequantization of every lane pattern class; the largest
 * magnitude with NaNs anywhere; the host agent's adds and scaling against Java's float and int arithmetic. Heap arrays and off-heap memory on the float side, odd lengths and offsets for the
 * vector tails. The library is built by this module, so its absence fails here rather than falling back unseen.
 */
class LanesNativeTest
{
    private static final int[] COUNTS = {0, 1, 3, 7, 8, 15, 16, 17, 31, 64, 255, 366, 2233, 8176};

    @AfterEach
    void restoreLevel()
    {
        NativeLanes.limitLevel(2);
    }

    @Test
    void theKernelsAreLoadedAndUsed()
    {
        assertTrue(NativeLanes.enabled(), "native lane kernels not in use: " + NativeLanes.description());
        assertTrue(NativeLanes.level() >= 0 && NativeLanes.level() <= 2, NativeLanes.description());
    }

    /** The level the library found is the widest this CPU's kernel enables, not a narrower one that also passes. */
    @Test
    void theLevelIsTheWidestTheCpusFlagsAllow() throws Exception
    {
        final java.util.Set<String> flags = CpuFlags.read();
        final int expected = flags.containsAll(java.util.List.of("avx512f", "avx512bw", "avx512dq", "avx512vl")) ? 2 :
            flags.contains("avx2") ? 1 : 0;
        assertEquals(expected, NativeLanes.level(), NativeLanes.description() + "; cpuinfo flags " + flags);
    }

    @Test
    void quantizeEqualsTheJavaLoopAtEveryLevel()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        for (int level = NativeLanes.level(); level >= 0; level--)
        {
            assertEquals(level, NativeLanes.limitLevel(level));
            for (final int count : COUNTS)
            {
                for (final int limit : new int[] {(1 << 27) - 1, 255, Integer.MAX_VALUE - 1})
                {
                    final int from = random.nextInt(5);
                    final float[] floats = floats(random, from + count + random.nextInt(3), limit);
                    final double scale = scaleFor(random, limit);
                    final UnsafeBuffer expected = packet(count);
                    final UnsafeBuffer actual = packet(count);
                    final int index = 32 + random.nextInt(3) * 4 + (random.nextBoolean() ? 2 : 0); // unaligned lanes too
                    Lanes.quantize(floats, from, count, scale, limit, expected, index);
                    Lanes.quantize(MemorySegment.ofArray(floats), from, count, scale, limit, actual, index);
                    assertBytes(expected, actual, "quantize level " + level + " count " + count + " limit " + limit + " " +
                        TestSeed.describe(seed));
                    try (Arena arena = Arena.ofConfined())
                    {
                        final MemorySegment offHeap = arena.allocate((long)floats.length * Float.BYTES, 4);
                        MemorySegment.copy(floats, 0, offHeap, ValueLayout.JAVA_FLOAT, 0, floats.length);
                        final UnsafeBuffer fromOffHeap = packet(count);
                        Lanes.quantize(offHeap, from, count, scale, limit, fromOffHeap, index);
                        assertBytes(expected, fromOffHeap, "quantize off-heap level " + level + " count " + count);
                    }
                }
            }
        }
    }

    @Test
    void dequantizeEqualsTheJavaLoopAtEveryLevel()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        for (int level = NativeLanes.level(); level >= 0; level--)
        {
            NativeLanes.limitLevel(level);
            for (final int count : COUNTS)
            {
                final UnsafeBuffer packet = packet(count);
                final int index = 32 + (random.nextBoolean() ? 2 : 0);
                for (int i = 0; i < count; i++)
                {
                    final int lane = switch (random.nextInt(5))
                    {
                        case 0 -> Integer.MIN_VALUE + random.nextInt(3);
                        case 1 -> Integer.MAX_VALUE - random.nextInt(3);
                        case 2 -> random.nextInt(2001) - 1000;
                        default -> random.nextInt();
                    };
                    packet.putInt(index + i * 4, lane, java.nio.ByteOrder.BIG_ENDIAN);
                }
                final double multiplier = random.nextBoolean() ? 1.0 / (1L << random.nextInt(40)) :
                    random.nextDouble() * Math.pow(2, random.nextInt(80) - 60);
                final int to = random.nextInt(4);
                final float[] expected = new float[to + count + 2];
                final float[] actual = new float[to + count + 2];
                expected[0] = actual[0] = -1f; // untouched outside [to, to + count)
                Lanes.dequantize(packet, index, count, multiplier, expected, to);
                Lanes.dequantize(packet, index, count, multiplier, MemorySegment.ofArray(actual), to);
                assertArrayEquals(bits(expected), bits(actual), "dequantize level " + level + " count " + count + " " +
                    TestSeed.describe(seed));
            }
        }
    }

    @Test
    void maxAbsBitsEqualsTheJavaLoopAtEveryLevel()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        for (int level = NativeLanes.level(); level >= 0; level--)
        {
            NativeLanes.limitLevel(level);
            for (final int count : COUNTS)
            {
                for (int round = 0; round < 4; round++)
                {
                    final int from = random.nextInt(4);
                    final float[] floats = floats(random, from + count + 1, 1 << 20);
                    if (round == 1 && count > 0)
                    {
                        floats[from + random.nextInt(count)] = Float.intBitsToFloat(0xFF800001 + random.nextInt(1000)); // a NaN
                    }
                    if (round == 2)
                    {
                        java.util.Arrays.fill(floats, random.nextBoolean() ? 0f : -0f);
                    }
                    int expected = 0;
                    for (int i = from; i < from + count; i++)
                    {
                        expected = Math.max(expected, Float.floatToRawIntBits(floats[i]) & 0x7FFFFFFF);
                    }
                    expected = expected > 0x7F800000 ? 0x7FC00000 : expected;
                    assertEquals(expected, BlockFloatingPoint.maxAbsBits(MemorySegment.ofArray(floats), from, count),
                        "level " + level + " count " + count + " round " + round + " " + TestSeed.describe(seed));
                }
            }
        }
    }

    @Test
    void addAndScaleEqualTheJavaArithmeticAtEveryLevel()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        for (int level = NativeLanes.level(); level >= 0; level--)
        {
            assertEquals(level, NativeLanes.limitLevel(level));
            for (final int count : COUNTS)
            {
                final int from = random.nextInt(5);
                final int length = from + count + 1;
                final int[] sumBits = new int[length];
                final int[] addBits = new int[length];
                for (int i = 0; i < length; i++)
                {
                    sumBits[i] = anyFloatBits(random);
                    addBits[i] = random.nextInt(8) == 0 ? sumBits[i] ^ 0x80000000 : anyFloatBits(random);
                }
                final float factor = Float.intBitsToFloat(anyFloatBits(random));
                try (Arena arena = Arena.ofConfined())
                {
                    final MemorySegment sum = arena.allocate((long)length * 4 + 2, 4).asSlice(2); // unaligned too
                    final MemorySegment source = arena.allocate((long)length * 4, 4);
                    for (final boolean ints : new boolean[] {false, true})
                    {
                        MemorySegment.copy(sumBits, 0, sum, ValueLayout.JAVA_INT_UNALIGNED, 0, length);
                        MemorySegment.copy(addBits, 0, source, ValueLayout.JAVA_INT_UNALIGNED, 0, length);
                        NativeLanes.add(sum, (long)from * 4, source, (long)from * 4, count, ints);
                        for (int i = 0; i < length; i++)
                        {
                            final boolean inRange = i >= from && i < from + count;
                            final int expected = !inRange ? sumBits[i] : ints ? sumBits[i] + addBits[i] :
                                Float.floatToRawIntBits(Float.intBitsToFloat(sumBits[i]) + Float.intBitsToFloat(addBits[i]));
                            assertFloatBits(expected, sum.get(ValueLayout.JAVA_INT_UNALIGNED, (long)i * 4), ints,
                                (ints ? "add ints" : "add floats") + " level " + level + " count " + count + " element " +
                                i + " " + TestSeed.describe(seed));
                        }
                    }
                    MemorySegment.copy(sumBits, 0, sum, ValueLayout.JAVA_INT_UNALIGNED, 0, length);
                    NativeLanes.scale(sum, (long)from * 4, count, factor);
                    for (int i = 0; i < length; i++)
                    {
                        final boolean inRange = i >= from && i < from + count;
                        final int expected = !inRange ? sumBits[i] :
                            Float.floatToRawIntBits(Float.intBitsToFloat(sumBits[i]) * factor);
                        assertFloatBits(expected, sum.get(ValueLayout.JAVA_INT_UNALIGNED, (long)i * 4), false,
                            "scale level " + level + " count " + count + " factor " + factor + " element " + i + " " +
                            TestSeed.describe(seed));
                    }
                }
            }
        }
    }

    @Test
    void intAndShortCopiesEqualTheJavaLoopsAtEveryLevelAndOnHeapPackets()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        for (int level = NativeLanes.level(); level >= 0; level--)
        {
            assertEquals(level, NativeLanes.limitLevel(level));
            for (final int count : COUNTS)
            {
                final int from = random.nextInt(5);
                final int[] ints = new int[from + count + 1];
                final short[] shorts = new short[from + count + 1];
                for (int i = 0; i < ints.length; i++)
                {
                    ints[i] = random.nextInt();
                    shorts[i] = (short)random.nextInt();
                }
                final int index = 32 + random.nextInt(3) * 4 + (random.nextBoolean() ? 2 : 0);
                final String where = "level " + level + " count " + count + " " + TestSeed.describe(seed);
                // array to lanes: the Java loop over the array against the segment form, off-heap (native) and heap
                // (the segment form's own Java loop) packets
                final UnsafeBuffer expectedInts = packet(count);
                Lanes.write(ints, from, count, expectedInts, index);
                final UnsafeBuffer nativeInts = packet(count);
                Lanes.writeInts(MemorySegment.ofArray(ints), from, count, nativeInts, index);
                assertBytes(expectedInts, nativeInts, "writeInts " + where);
                final UnsafeBuffer heapInts = new UnsafeBuffer(new byte[64 + count * 4]);
                Lanes.writeInts(MemorySegment.ofArray(ints), from, count, heapInts, index);
                assertBytes(expectedInts, heapInts, "writeInts, heap packet " + where);
                final UnsafeBuffer expectedShorts = packet(count);
                Lanes.write(shorts, from, count, expectedShorts, index);
                final UnsafeBuffer nativeShorts = packet(count);
                Lanes.writeShorts(MemorySegment.ofArray(shorts), from, count, nativeShorts, index);
                assertBytes(expectedShorts, nativeShorts, "writeShorts " + where);
                final UnsafeBuffer heapShorts = new UnsafeBuffer(new byte[64 + count * 4]);
                Lanes.writeShorts(MemorySegment.ofArray(shorts), from, count, heapShorts, index);
                assertBytes(expectedShorts, heapShorts, "writeShorts, heap packet " + where);
                // lanes to array, into heap arrays and off-heap memory
                final int[] intsBack = new int[ints.length];
                Lanes.read(nativeInts, index, intsBack, from, count);
                for (final UnsafeBuffer packet : new UnsafeBuffer[] {nativeInts, heapInts})
                {
                    final int[] viaSegment = new int[ints.length];
                    Lanes.readInts(packet, index, MemorySegment.ofArray(viaSegment), from, count);
                    assertArrayEquals(intsBack, viaSegment, "readInts " + where);
                }
                final short[] shortsBack = new short[shorts.length];
                Lanes.read(nativeShorts, index, shortsBack, from, count);
                for (final UnsafeBuffer packet : new UnsafeBuffer[] {nativeShorts, heapShorts})
                {
                    final short[] viaSegment = new short[shorts.length];
                    Lanes.readShorts(packet, index, MemorySegment.ofArray(viaSegment), from, count);
                    assertArrayEquals(shortsBack, viaSegment, "readShorts " + where);
                }
                try (Arena arena = Arena.ofConfined())
                {
                    final MemorySegment offHeap = arena.allocate((long)ints.length * 4 + 2, 4).asSlice(2);
                    Lanes.readInts(nativeInts, index, offHeap, from, count);
                    for (int i = 0; i < ints.length; i++)
                    {
                        assertEquals(intsBack[i], offHeap.getAtIndex(ValueLayout.JAVA_INT_UNALIGNED, i), "readInts off-heap " + where);
                    }
                }
                assertEquals(java.util.Arrays.toString(java.util.Arrays.copyOfRange(ints, from, from + count)),
                    java.util.Arrays.toString(java.util.Arrays.copyOfRange(intsBack, from, from + count)), "round trip " + where);
            }
        }
        final UnsafeBuffer small = packet(4);
        assertThrows(IndexOutOfBoundsException.class, () -> Lanes.writeInts(MemorySegment.ofArray(new int[3]), 0, 4, small, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> Lanes.readShorts(small, 0, MemorySegment.ofArray(new short[3]), 1, 3));
    }

    /** Finite values of every magnitude, subnormals, zeros of both signs, infinities and NaNs. */
    private static int anyFloatBits(final Random random)
    {
        return switch (random.nextInt(10))
        {
            case 0 -> random.nextBoolean() ? 0x7f800000 : 0xff800000;
            case 1 -> 0x7fc00000 | random.nextInt(1 << 22);
            case 2 -> random.nextBoolean() ? 0 : 0x80000000;
            case 3 -> random.nextInt(1 << 23) | (random.nextBoolean() ? 0x80000000 : 0);
            case 4 -> random.nextInt();
            default -> Float.floatToRawIntBits((float)(random.nextGaussian() * Math.pow(2, random.nextInt(40) - 20)));
        };
    }

    /** Bit for bit; a NaN only as a NaN (which NaN the hardware returns for two NaN operands is not Java's to say). */
    private static void assertFloatBits(final int expected, final int actual, final boolean ints, final String message)
    {
        if (!ints && Float.isNaN(Float.intBitsToFloat(expected)))
        {
            assertTrue(Float.isNaN(Float.intBitsToFloat(actual)), message + ": expected a NaN, got " +
                Float.intBitsToFloat(actual));
            return;
        }
        assertEquals(expected, actual, message);
    }

    @Test
    void rangesOutsideTheFloatsAreRefusedBeforeAnyNativeCall()
    {
        final float[] floats = new float[100];
        final UnsafeBuffer packet = packet(100);
        assertThrows(IndexOutOfBoundsException.class, () ->
            Lanes.quantize(MemorySegment.ofArray(floats), 1, 100, 1.0, 255, packet, 32));
        assertThrows(IndexOutOfBoundsException.class, () ->
            Lanes.dequantize(packet, 32, 100, 1.0, MemorySegment.ofArray(floats), 1));
        assertThrows(IndexOutOfBoundsException.class, () ->
            Lanes.quantize(MemorySegment.ofArray(floats), 0, 100, 1.0, 255, packet, 68));
        assertThrows(IndexOutOfBoundsException.class, () ->
            BlockFloatingPoint.maxAbsBits(MemorySegment.ofArray(floats), 50, 51));
    }

    /** Floats that stress rounding and clamping once scaled: ties, limits, infinities, NaNs, subnormals, zeros. */
    private static float[] floats(final Random random, final int length, final int limit)
    {
        final float[] floats = new float[length];
        for (int i = 0; i < length; i++)
        {
            floats[i] = switch (random.nextInt(10))
            {
                case 0 -> (random.nextInt(2001) - 1000) + 0.5f; // a tie once scale is 1
                case 1 -> random.nextBoolean() ? Float.POSITIVE_INFINITY : Float.NEGATIVE_INFINITY;
                case 2 -> Float.intBitsToFloat(0x7FC00000 | random.nextInt(1 << 22)) * (random.nextBoolean() ? 1 : -1);
                case 3 -> Float.intBitsToFloat(random.nextInt(1 << 23)); // subnormal
                case 4 -> random.nextBoolean() ? 0f : -0f;
                case 5 -> (float)(limit * (random.nextBoolean() ? 1.0 : -1.0) * (0.999 + random.nextDouble() * 0.002));
                default -> (float)((random.nextDouble() * 2 - 1) * Math.pow(2, random.nextInt(60) - 30));
            };
        }
        return floats;
    }

    private static double scaleFor(final Random random, final int limit)
    {
        return switch (random.nextInt(3))
        {
            case 0 -> 1.0;
            case 1 -> Math.scalb(1.0, random.nextInt(40) - 20);
            default -> random.nextDouble() * limit;
        };
    }

    private static UnsafeBuffer packet(final int count)
    {
        return new UnsafeBuffer(ByteBuffer.allocateDirect(64 + count * 4));
    }

    private static void assertBytes(final UnsafeBuffer expected, final UnsafeBuffer actual, final String message)
    {
        final byte[] e = new byte[expected.capacity()];
        final byte[] a = new byte[actual.capacity()];
        expected.getBytes(0, e);
        actual.getBytes(0, a);
        assertArrayEquals(e, a, message);
    }

    private static int[] bits(final float[] floats)
    {
        final int[] bits = new int[floats.length];
        for (int i = 0; i < floats.length; i++)
        {
            bits[i] = Float.floatToRawIntBits(floats[i]);
        }
        return bits;
    }
}
