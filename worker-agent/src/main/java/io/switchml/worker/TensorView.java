package io.switchml.worker;

import io.switchml.protocol.Lanes;
import io.switchml.protocol.NativeLanes;
import io.switchml.protocol.quant.BlockFloatingPoint;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import io.switchml.protocol.quant.HalfFloats;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.Arrays;

/**
 * Source and destination of one all-reduce, seen chunk by chunk. Implementations cover heap
 * arrays and off-heap buffers of floats and ints; source and destination may be the same storage
 * (in place), since every chunk is quantized into its packet before any result for it is written and
 * chunks do not overlap.
 * <p>
 * The block exponents ({@link #maxAbsBits}) of the first s chunks are computed on the submitting thread, the
 * others by the I/O agent that sends the chunk. The I/O agents quantize and dequantize with their own scratch
 * arrays, so one view may be worked on by several agents at once (they touch disjoint chunks).
 */
abstract class TensorView
{
    abstract int length();

    abstract boolean isFloat();

    /** For messages: "float[1000]", "IntBuffer[7]". */
    abstract String describe();

    /** {@code floatToIntBits(max |x|) & 0x7FFFFFFF} of a float chunk: any NaN gives the canonical NaN. */
    int maxAbsBits(final int from, final int count)
    {
        throw new UnsupportedOperationException();
    }

    /** A float element, for messages. */
    float floatAt(final int index)
    {
        throw new UnsupportedOperationException();
    }

    /** Quantize a float32 chunk, or copy an int chunk, into lanes. */
    abstract void toLanes(int from, int count, double scale, int limit, int[] lanes, float[] stage);

    /**
     * Quantize (float) or copy (int) a chunk straight into a packet's payload as network-order lanes.
     * This default stages through the agent's lanes array; views over heap arrays override it with one pass.
     */
    void toPacket(
        final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage,
        final MutableDirectBuffer packet, final int index)
    {
        toLanes(from, count, scale, limit, lanes, stage);
        Lanes.write(lanes, 0, count, packet, index);
    }

    /**
     * Dequantize (float) or copy (int) a result's network-order lanes straight from the packet. This
     * default stages through the agent's lanes array; views over heap arrays override it with one pass.
     */
    void fromPacket(
        final DirectBuffer packet, final int index, final int count, final double multiplier, final int to,
        final int[] lanes, final float[] stage)
    {
        Lanes.read(packet, index, lanes, 0, count);
        fromLanes(lanes, count, multiplier, to, stage);
    }

    /** Round a float chunk to a 16-bit format. */
    void toHalfLanes(final byte type, final int from, final int count, final short[] lanes, final float[] stage)
    {
        throw new UnsupportedOperationException();
    }

    /** Dequantize summed float32 lanes into a float destination, or copy them into an int destination. */
    abstract void fromLanes(int[] lanes, int count, double multiplier, int to, float[] stage);

    /**
     * Decode summed 16-bit lanes into a float destination, divided by a divisor.
     *
     * @return the index (relative to to) of the first non-finite result, or -1.
     */
    int fromHalfLanes(
        final byte type, final short[] lanes, final int count, final float divisor, final int to, final float[] stage)
    {
        throw new UnsupportedOperationException();
    }

    /**
     * @return the offset of the first element of a float chunk that is finite but rounds out of a 16-bit type's
     * range; -1 when there is none.
     */
    final int firstOutOfRange(final byte type, final int from, final int count)
    {
        for (int i = from, end = from + count; i < end; i++)
        {
            final float value = floatAt(i);
            if (Float.isFinite(value) && !HalfFloats.isRepresentable(type, value))
            {
                return i;
            }
        }
        return -1;
    }

    /**
     * Write NaN into elements [to, to + count) of a float destination: the result of a chunk whose sum is not
     * finite because a rank's chunk held a NaN or an infinity.
     */
    void fillNaN(final int to, final int count, final float[] stage)
    {
        throw new UnsupportedOperationException();
    }

    static final class FloatArray extends TensorView
    {
        private final float[] src;
        private final MemorySegment srcInts;
        private final float[] dst;
        private final MemorySegment dstFloats;

        FloatArray(final float[] src, final float[] dst)
        {
            this.src = src;
            this.srcInts = MemorySegment.ofArray(src);
            this.dst = dst;
            this.dstFloats = dst == src ? srcInts : MemorySegment.ofArray(dst);
        }

        int length()
        {
            return src.length;
        }

        boolean isFloat()
        {
            return true;
        }

        String describe()
        {
            return "float[" + src.length + "]";
        }

        int maxAbsBits(final int from, final int count)
        {
            return BlockFloatingPoint.maxAbsBits(srcInts, from, count);
        }

        float floatAt(final int index)
        {
            return src[index];
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage)
        {
            BlockFloatingPoint.quantize(src, from, count, scale, limit, lanes, 0);
        }

        void toPacket(
            final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage,
            final MutableDirectBuffer packet, final int index)
        {
            if (NativeLanes.enabled())
            {
                Lanes.quantize(srcInts, from, count, scale, limit, packet, index);
            }
            else
            {
                Lanes.quantize(src, from, count, scale, limit, packet, index);
            }
        }

        void fromPacket(
            final DirectBuffer packet, final int index, final int count, final double multiplier, final int to,
            final int[] lanes, final float[] stage)
        {
            if (NativeLanes.enabled())
            {
                Lanes.dequantize(packet, index, count, multiplier, dstFloats, to);
            }
            else
            {
                Lanes.dequantize(packet, index, count, multiplier, dst, to);
            }
        }

        void toHalfLanes(final byte type, final int from, final int count, final short[] lanes, final float[] stage)
        {
            HalfFloats.encode(type, src, from, count, lanes);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to, final float[] stage)
        {
            BlockFloatingPoint.dequantize(lanes, 0, count, multiplier, dst, to);
        }

        int fromHalfLanes(
            final byte type, final short[] lanes, final int count, final float divisor, final int to, final float[] stage)
        {
            return HalfFloats.decode(type, lanes, count, divisor, dst, to);
        }

        void fillNaN(final int to, final int count, final float[] stage)
        {
            Arrays.fill(dst, to, to + count, Float.NaN);
        }
    }

    static final class IntArray extends TensorView
    {
        private final int[] src;
        private final int[] dst;
        /** The arrays as segments, made once (no allocation per packet): Lanes' segment copies pick native or Java. */
        private final MemorySegment srcSegment;
        private final MemorySegment dstSegment;

        IntArray(final int[] src, final int[] dst)
        {
            this.src = src;
            this.dst = dst;
            this.srcSegment = MemorySegment.ofArray(src);
            this.dstSegment = dst == src ? srcSegment : MemorySegment.ofArray(dst);
        }

        int length()
        {
            return src.length;
        }

        boolean isFloat()
        {
            return false;
        }

        String describe()
        {
            return "int[" + src.length + "]";
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage)
        {
            System.arraycopy(src, from, lanes, 0, count);
        }

        void toPacket(
            final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage,
            final MutableDirectBuffer packet, final int index)
        {
            Lanes.writeInts(srcSegment, from, count, packet, index);
        }

        void fromPacket(
            final DirectBuffer packet, final int index, final int count, final double multiplier, final int to,
            final int[] lanes, final float[] stage)
        {
            Lanes.readInts(packet, index, dstSegment, to, count);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to, final float[] stage)
        {
            System.arraycopy(lanes, 0, dst, to, count);
        }
    }

    /**
     * Off-heap (or any) float buffers, staged through the agent's heap chunk, or, with the native lane kernels and
     * buffers in the platform's byte order, quantized from and dequantized into the buffers themselves. Holds slices taken at
     * submission, so the caller's positions are neither used later nor changed.
     */
    static final class FloatBufferView extends TensorView
    {
        private final FloatBuffer src;
        private final MemorySegment srcInts;
        private final FloatBuffer dst;
        /** The floats as segments when in the platform's order: the native kernels then go without the staging. */
        private final MemorySegment srcFloats;
        private final MemorySegment dstFloats;

        FloatBufferView(final FloatBuffer src, final FloatBuffer dst)
        {
            this.src = src.slice();
            this.srcInts = MemorySegment.ofBuffer(this.src);
            this.dst = dst.slice();
            final boolean direct = NativeLanes.enabled() && this.src.order() == ByteOrder.nativeOrder() &&
                this.dst.order() == ByteOrder.nativeOrder() && !this.dst.isReadOnly();
            this.srcFloats = direct ? srcInts : null;
            this.dstFloats = direct ? MemorySegment.ofBuffer(this.dst) : null;
        }

        int length()
        {
            return src.limit();
        }

        boolean isFloat()
        {
            return true;
        }

        String describe()
        {
            return "FloatBuffer[" + src.limit() + "]";
        }

        int maxAbsBits(final int from, final int count)
        {
            return BlockFloatingPoint.maxAbsBits(srcInts, src.order(), from, count);
        }

        float floatAt(final int index)
        {
            return src.get(index);
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage)
        {
            src.get(from, stage, 0, count);
            BlockFloatingPoint.quantize(stage, 0, count, scale, limit, lanes, 0);
        }

        void toPacket(
            final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage,
            final MutableDirectBuffer packet, final int index)
        {
            if (srcFloats != null)
            {
                Lanes.quantize(srcFloats, from, count, scale, limit, packet, index);
                return;
            }
            src.get(from, stage, 0, count);
            Lanes.quantize(stage, 0, count, scale, limit, packet, index);
        }

        void fromPacket(
            final DirectBuffer packet, final int index, final int count, final double multiplier, final int to,
            final int[] lanes, final float[] stage)
        {
            if (dstFloats != null)
            {
                Lanes.dequantize(packet, index, count, multiplier, dstFloats, to);
                return;
            }
            Lanes.dequantize(packet, index, count, multiplier, stage, 0);
            dst.put(to, stage, 0, count);
        }

        void toHalfLanes(final byte type, final int from, final int count, final short[] lanes, final float[] stage)
        {
            src.get(from, stage, 0, count);
            HalfFloats.encode(type, stage, 0, count, lanes);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to, final float[] stage)
        {
            BlockFloatingPoint.dequantize(lanes, 0, count, multiplier, stage, 0);
            dst.put(to, stage, 0, count);
        }

        int fromHalfLanes(
            final byte type, final short[] lanes, final int count, final float divisor, final int to, final float[] stage)
        {
            final int nonFinite = HalfFloats.decode(type, lanes, count, divisor, stage, 0);
            dst.put(to, stage, 0, count);
            return nonFinite;
        }

        void fillNaN(final int to, final int count, final float[] stage)
        {
            Arrays.fill(stage, 0, count, Float.NaN);
            dst.put(to, stage, 0, count);
        }
    }

    /** Int buffers, through slices taken at submission. */
    static final class IntBufferView extends TensorView
    {
        private final IntBuffer src;
        private final IntBuffer dst;

        /** The ints as segments when in the platform's order: the native copies then go without the staging. */
        private final MemorySegment srcSegment;
        private final MemorySegment dstSegment;

        IntBufferView(final IntBuffer src, final IntBuffer dst)
        {
            this.src = src.slice();
            this.dst = dst.slice();
            final boolean direct = NativeLanes.enabled() && this.src.order() == ByteOrder.nativeOrder() &&
                this.dst.order() == ByteOrder.nativeOrder() && !this.dst.isReadOnly();
            this.srcSegment = direct ? MemorySegment.ofBuffer(this.src) : null;
            this.dstSegment = direct ? MemorySegment.ofBuffer(this.dst) : null;
        }

        void toPacket(
            final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage,
            final MutableDirectBuffer packet, final int index)
        {
            if (srcSegment != null)
            {
                Lanes.writeInts(srcSegment, from, count, packet, index);
                return;
            }
            super.toPacket(from, count, scale, limit, lanes, stage, packet, index);
        }

        void fromPacket(
            final DirectBuffer packet, final int index, final int count, final double multiplier, final int to,
            final int[] lanes, final float[] stage)
        {
            if (dstSegment != null)
            {
                Lanes.readInts(packet, index, dstSegment, to, count);
                return;
            }
            super.fromPacket(packet, index, count, multiplier, to, lanes, stage);
        }

        int length()
        {
            return src.limit();
        }

        boolean isFloat()
        {
            return false;
        }

        String describe()
        {
            return "IntBuffer[" + src.limit() + "]";
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes, final float[] stage)
        {
            src.get(from, lanes, 0, count);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to, final float[] stage)
        {
            dst.put(to, lanes, 0, count);
        }
    }
}
