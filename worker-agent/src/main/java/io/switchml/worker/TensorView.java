package io.switchml.worker;

import io.switchml.protocol.quant.BlockFloatingPoint;

import java.nio.FloatBuffer;
import java.nio.IntBuffer;

/**
 * Source and destination of one all-reduce, seen chunk by chunk. Implementations cover heap
 * arrays and off-heap buffers of floats and ints; source and destination may be the same storage
 * (in place), since every chunk is quantized into its packet before any result is written.
 */
abstract class TensorView
{
    abstract int length();

    abstract boolean isFloat();

    /** Block exponent of a float chunk, see {@link BlockFloatingPoint#maxExponent}. */
    int maxExponent(final int from, final int count)
    {
        throw new UnsupportedOperationException();
    }

    /** Index of the first NaN or infinity in a float chunk, or -1. */
    int firstNonFinite(final int from, final int count)
    {
        throw new UnsupportedOperationException();
    }

    /** Quantize a float chunk, or copy an int chunk, into lanes. */
    abstract void toLanes(int from, int count, double scale, int limit, int[] lanes);

    /** Dequantize summed lanes into a float destination, or copy them into an int destination. */
    abstract void fromLanes(int[] lanes, int count, double multiplier, int to);

    static final class FloatArray extends TensorView
    {
        private final float[] src;
        private final float[] dst;

        FloatArray(final float[] src, final float[] dst)
        {
            this.src = src;
            this.dst = dst;
        }

        int length()
        {
            return src.length;
        }

        boolean isFloat()
        {
            return true;
        }

        int maxExponent(final int from, final int count)
        {
            return BlockFloatingPoint.maxExponent(src, from, count);
        }

        int firstNonFinite(final int from, final int count)
        {
            return BlockFloatingPoint.firstNonFinite(src, from, count);
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes)
        {
            BlockFloatingPoint.quantize(src, from, count, scale, limit, lanes, 0);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to)
        {
            BlockFloatingPoint.dequantize(lanes, 0, count, multiplier, dst, to);
        }
    }

    static final class IntArray extends TensorView
    {
        private final int[] src;
        private final int[] dst;

        IntArray(final int[] src, final int[] dst)
        {
            this.src = src;
            this.dst = dst;
        }

        int length()
        {
            return src.length;
        }

        boolean isFloat()
        {
            return false;
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes)
        {
            System.arraycopy(src, from, lanes, 0, count);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to)
        {
            System.arraycopy(lanes, 0, dst, to, count);
        }
    }

    /** Off-heap (or any) float buffers, staged through a heap chunk. */
    static final class FloatBufferView extends TensorView
    {
        private final FloatBuffer src;
        private final FloatBuffer dst;
        private final float[] stage;

        FloatBufferView(final FloatBuffer src, final FloatBuffer dst, final float[] stage)
        {
            this.src = src;
            this.dst = dst;
            this.stage = stage;
        }

        int length()
        {
            return src.remaining();
        }

        boolean isFloat()
        {
            return true;
        }

        int maxExponent(final int from, final int count)
        {
            src.get(src.position() + from, stage, 0, count);
            return BlockFloatingPoint.maxExponent(stage, 0, count);
        }

        int firstNonFinite(final int from, final int count)
        {
            src.get(src.position() + from, stage, 0, count);
            final int index = BlockFloatingPoint.firstNonFinite(stage, 0, count);
            return index < 0 ? -1 : from + index;
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes)
        {
            src.get(src.position() + from, stage, 0, count);
            BlockFloatingPoint.quantize(stage, 0, count, scale, limit, lanes, 0);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to)
        {
            BlockFloatingPoint.dequantize(lanes, 0, count, multiplier, stage, 0);
            dst.put(dst.position() + to, stage, 0, count);
        }
    }

    static final class IntBufferView extends TensorView
    {
        private final IntBuffer src;
        private final IntBuffer dst;

        IntBufferView(final IntBuffer src, final IntBuffer dst)
        {
            this.src = src;
            this.dst = dst;
        }

        int length()
        {
            return src.remaining();
        }

        boolean isFloat()
        {
            return false;
        }

        void toLanes(final int from, final int count, final double scale, final int limit, final int[] lanes)
        {
            src.get(src.position() + from, lanes, 0, count);
        }

        void fromLanes(final int[] lanes, final int count, final double multiplier, final int to)
        {
            dst.put(dst.position() + to, lanes, 0, count);
        }
    }
}
