package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.quant.BlockFloatingPoint;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * Runs the per-chunk kernels of the data path (exponent scan, quantize into a packet, dequantize out of one) on
 * scratch data while the join waits for the other ranks, so that the JIT has compiled them before the first
 * all-reduce instead of during it. Local work only: nothing is sent, no stream state changes. Bounded by
 * {@link #BUDGET_NS} of wall time and a fixed amount of work; the agent waits for it at most that long.
 */
final class DataPathWarmUp implements Runnable
{
    /** Longest the warm-up runs. */
    static final long BUDGET_NS = 300_000_000L;
    private static final long ELEMENTS = 24_000_000L;
    private static final int BLOCKS = 8;

    private final byte elementType;
    private final int lanes;
    private final int worldSize;

    DataPathWarmUp(final WorkerContext context)
    {
        this.elementType = context.elementType();
        this.lanes = context.lanes();
        this.worldSize = context.worldSize();
    }

    /** System property: false turns the warm-up off. */
    static final String PROPERTY = "switchml.worker.warmup";
    private static final java.util.concurrent.atomic.AtomicBoolean STARTED = new java.util.concurrent.atomic.AtomicBoolean();

    /**
     * Start it on a daemon thread, once per process (the JIT's work is shared by every client of the JVM).
     *
     * @return the thread, or null when it ran already or is turned off.
     */
    static Thread maybeStart(final WorkerContext context)
    {
        if (!Boolean.parseBoolean(System.getProperty(PROPERTY, "true")) || !STARTED.compareAndSet(false, true))
        {
            return null;
        }
        return Thread.ofPlatform().daemon().name("switchml-warmup").start(new DataPathWarmUp(context));
    }

    public void run()
    {
        run(BUDGET_NS);
    }

    /**
     * @return the rounds of work (one chunk through each kernel) done before the work or the budget ran out.
     */
    long run(final long budgetNs)
    {
        final long deadlineNs = System.nanoTime() + budgetNs;
        final int length = lanes * BLOCKS;
        final TensorView[] views;
        if (elementType == ElementType.INT32)
        {
            final int[] values = new int[length];
            for (int i = 0; i < length; i++)
            {
                values[i] = i % 1000 - 500;
            }
            views = new TensorView[] {new TensorView.IntArray(values, values.clone())};
        }
        else
        {
            final float[] values = new float[length];
            final FloatBuffer direct = ByteBuffer.allocateDirect(length * Float.BYTES).order(ByteOrder.nativeOrder()).asFloatBuffer();
            for (int i = 0; i < length; i++)
            {
                values[i] = (i % 1000 - 500) * 0.001f;
                direct.put(i, values[i]);
            }
            views = new TensorView[] {new TensorView.FloatArray(values, values.clone()),
                new TensorView.FloatBufferView(direct, direct.duplicate())};
        }
        final UnsafeBuffer packet = new UnsafeBuffer(ByteBuffer.allocateDirect(DataHeaderFlyweight.packetLength(lanes)));
        final int[] laneScratch = new int[lanes];
        final short[] halves = new short[lanes];
        final float[] stage = new float[lanes];
        final boolean isFloat = ElementType.isFloat(elementType);
        final boolean sixteenBit = ElementType.isSixteenBit(elementType);
        final long rounds = rounds(lanes);
        long round = 0;
        for (; round < rounds && System.nanoTime() - deadlineNs < 0; round++)
        {
            final TensorView view = views[(int)(round % views.length)];
            final int from = (int)(round % BLOCKS) * lanes;
            if (sixteenBit)
            {
                view.maxAbsBits(from, lanes);
                view.toHalfLanes(elementType, from, lanes, halves, stage);
                view.fromHalfLanes(elementType, halves, lanes, 1.0f, from, stage);
            }
            else if (isFloat)
            {
                final int exponent = BlockFloatingPoint.exponentOfMagnitudeBits(view.maxAbsBits(from, lanes));
                view.toPacket(from, lanes, BlockFloatingPoint.scale(exponent, worldSize), BlockFloatingPoint.laneLimit(worldSize),
                    laneScratch, stage, packet, DataHeaderFlyweight.PAYLOAD_OFFSET);
                view.fromPacket(packet, DataHeaderFlyweight.PAYLOAD_OFFSET, lanes,
                    1.0 / BlockFloatingPoint.scale(exponent, worldSize), from, laneScratch, stage);
            }
            else
            {
                view.toPacket(from, lanes, 1.0, Integer.MAX_VALUE, laneScratch, stage, packet, DataHeaderFlyweight.PAYLOAD_OFFSET);
                view.fromPacket(packet, DataHeaderFlyweight.PAYLOAD_OFFSET, lanes, 1.0, from, laneScratch, stage);
            }
        }
        return round;
    }

    /**
     * @return the rounds the warm-up's fixed amount of work takes at {@code lanes} elements per chunk.
     */
    static long rounds(final int lanes)
    {
        return Math.max(BLOCKS, ELEMENTS / lanes);
    }
}
