package io.switchml.protocol;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The per-element kernels of {@link Lanes} and {@link io.switchml.protocol.quant.BlockFloatingPoint} in the project's
 * native library ({@code protocol/src/main/c/switchml_lanes.c}, {@link NativeLibrary}): a float chunk's largest
 * magnitude, its quantization into a packet's lanes and their dequantization, the copies of int32 and 16-bit lanes, and
 * the host agent's sums of one node's ranks (add, scale), vectorized for AVX-512, AVX2 or the baseline, chosen by CPUID. Equal to the Java loops bit for bit ({@code LanesNativeTest}).
 * <p>
 * Why: the Java loops run at full speed only once C2 has compiled them, and in C1's code they are about 120 times
 * slower (one rank's 100 MB: 1.0 s against 8.5 ms). A worker JVM whose host is busy (4 agent JVMs and the appliance
 * starting on two cores) got C2's code for them only during its first all-reduces. Native code needs no warm-up.
 * <p>
 * Every call is a critical downcall (no thread-state transition, so cheap next to the microseconds a chunk takes) that
 * may take a heap array's segment: the float side is a segment (a heap {@code float[]} or off-heap memory) and a byte offset
 * into it (no slice per call), the lanes' side an off-heap packet address. The callers check every range first. The system property {@code
 * switchml.lanes.native=false} keeps the Java loops.
 */
public final class NativeLanes
{
    /** int f(address, five 64-bit integers), the kernels' one shape (one stub). */
    private static final FunctionDescriptor SHAPE =
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
    private static final MethodHandle MAX_ABS_BITS;
    private static final MethodHandle QUANTIZE;
    private static final MethodHandle DEQUANTIZE;
    private static final MethodHandle SCALE;
    private static final MethodHandle SWAP;
    private static final MethodHandle LIMIT_LEVEL;
    private static final int LEVEL;
    private static final String DESCRIPTION;
    /** Whether the kernels are in use: a static final the JIT folds, so the Java loops cost nothing when they are. */
    static final boolean ENABLED;

    static
    {
        MethodHandle maxAbsBits = null;
        MethodHandle quantize = null;
        MethodHandle dequantize = null;
        MethodHandle scale = null;
        MethodHandle swap = null;
        MethodHandle limitLevel = null;
        int level = -1;
        String description = NativeLibrary.unavailable("switchml.lanes.native");
        if (description == null)
        {
            try
            {
                final SymbolLookup library = NativeLibrary.lookup();
                final Linker linker = Linker.nativeLinker();
                final Linker.Option critical = Linker.Option.critical(true);
                maxAbsBits = linker.downcallHandle(library.findOrThrow("switchml_lanes_max_abs_bits"), SHAPE, critical);
                quantize = linker.downcallHandle(library.findOrThrow("switchml_lanes_quantize"), SHAPE, critical);
                dequantize = linker.downcallHandle(library.findOrThrow("switchml_lanes_dequantize"), SHAPE, critical);
                scale = linker.downcallHandle(library.findOrThrow("switchml_lanes_scale"), SHAPE, critical);
                swap = linker.downcallHandle(library.findOrThrow("switchml_lanes_swap"), SHAPE, critical);
                limitLevel = NativeCalls.intCall(library.findOrThrow("switchml_lanes_limit_level"), Linker.Option.critical(false));
                level = (int)NativeCalls.intCall(library.findOrThrow("switchml_lanes_level"), Linker.Option.critical(false))
                    .invokeExact(0L, 0L, 0L, 0L, 0L, 0L);
                description = level == 2 ? "AVX-512" : level == 1 ? "AVX2" : "baseline";
            }
            catch (final Throwable ex)
            {
                maxAbsBits = null;
                quantize = null;
                dequantize = null;
                scale = null;
                swap = null;
                limitLevel = null;
                level = -1;
                description = "lane kernels not linked: " + ex;
            }
        }
        MAX_ABS_BITS = maxAbsBits;
        QUANTIZE = quantize;
        DEQUANTIZE = dequantize;
        SCALE = scale;
        SWAP = swap;
        LIMIT_LEVEL = limitLevel;
        LEVEL = level;
        DESCRIPTION = description;
        ENABLED = level >= 0;
    }

    private NativeLanes()
    {
    }

    /**
     * @return whether the native kernels are in use.
     */
    public static boolean enabled()
    {
        return ENABLED;
    }

    /**
     * @return the kernels in use ("AVX-512", "AVX2", "baseline"), or why the Java loops are used.
     */
    public static String description()
    {
        return DESCRIPTION;
    }

    /**
     * Use at most this level from now on (2 AVX-512, 1 AVX2, 0 the baseline; the CPU's own caps it), for the tests
     * that compare each level this CPU has with the Java loops.
     *
     * @return the level now in use.
     */
    static int limitLevel(final int most)
    {
        try
        {
            return (int)LIMIT_LEVEL.invokeExact((long)most, 0L, 0L, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_lanes_limit_level failed", ex);
        }
    }

    /**
     * @return the level the CPU has (2, 1 or 0), or -1 when the kernels are not in use.
     */
    static int level()
    {
        return LEVEL;
    }

    public static int maxAbsBits(final MemorySegment floats, final long byteOffset, final int count)
    {
        try
        {
            return (int)MAX_ABS_BITS.invokeExact(floats, byteOffset, (long)count, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_lanes_max_abs_bits failed", ex);
        }
    }

    public static void quantize(
        final MemorySegment floats, final long byteOffset, final int count, final double scale, final int limit,
        final long lanesAddress)
    {
        try
        {
            final int ignore = (int)QUANTIZE.invokeExact(floats, byteOffset, (long)count, lanesAddress,
                Double.doubleToRawLongBits(scale), (long)limit);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_lanes_quantize failed", ex);
        }
    }

    public static void dequantize(
        final MemorySegment floats, final long byteOffset, final int count, final double multiplier, final long lanesAddress)
    {
        try
        {
            final int ignore = (int)DEQUANTIZE.invokeExact(floats, byteOffset, (long)count, lanesAddress,
                Double.doubleToRawLongBits(multiplier), 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_lanes_dequantize failed", ex);
        }
    }

    /**
     * {@code sum[i] += source[i]} for {@code count} elements in native order: float32, or wrapping int32 when {@code
     * ints}. The host agent's sum of one node's ranks ({@code LocalSum}). Both ranges go to the call as segments, so
     * that neither can be unmapped while it runs (a rank's shared memory is when the rank leaves).
     *
     * @param sum          the segment that receives the sum.
     * @param sumOffset    where in {@code sum} the range starts, in bytes.
     * @param source       the segment added into it.
     * @param sourceOffset where in {@code source} the range starts, in bytes.
     */
    public static void add(
        final MemorySegment sum, final long sumOffset, final MemorySegment source, final long sourceOffset, final int count,
        final boolean ints)
    {
        try
        {
            final int ignore = (int)Sums.ADD.invokeExact(sum, source, sumOffset, sourceOffset, (long)count, ints ? 1L : 0L);
        }
        catch (final Throwable ex)
        {
            throw ex instanceof RuntimeException runtime ? runtime : new IllegalStateException("switchml_lanes_add failed", ex);
        }
    }

    /**
     * The sums' downcall, of its own shape (two segments, four 64-bit integers), linked on first use: only a host agent
     * that sums a node's ranks spins its stub.
     */
    private static final class Sums
    {
        static final MethodHandle ADD = Linker.nativeLinker().downcallHandle(
            NativeLibrary.lookup().findOrThrow("switchml_lanes_add"),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG),
            Linker.Option.critical(true));
    }

    /**
     * {@code values[i] *= factor} for {@code count} float32 elements in native order.
     */
    public static void scale(final MemorySegment values, final long byteOffset, final int count, final float factor)
    {
        try
        {
            final int ignore = (int)SCALE.invokeExact(values, byteOffset, (long)count,
                (long)Float.floatToRawIntBits(factor), 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_lanes_scale failed", ex);
        }
    }

    /**
     * Copies {@code count} elements between an array in native order and a packet's network-order lanes.
     *
     * @param array        the segment of the array (heap or off-heap).
     * @param byteOffset   where in {@code array} the elements start.
     * @param lanesAddress the off-heap address of the first lane.
     * @param laneBytes    4 (int32) or 2 (the 16-bit formats).
     * @param toLanes      from the array into the lanes, else from the lanes into the array.
     */
    public static void swap(
        final MemorySegment array, final long byteOffset, final int count, final long lanesAddress, final int laneBytes,
        final boolean toLanes)
    {
        final long mode = (laneBytes == Integer.BYTES ? 0L : 2L) + (toLanes ? 0L : 1L);
        try
        {
            final int ignore = (int)SWAP.invokeExact(array, byteOffset, (long)count, lanesAddress, mode, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_lanes_swap failed", ex);
        }
    }
}
