package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.quant.BlockFloatingPoint;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * Warms the data path up while the join waits for the other ranks, so that the JIT has compiled it before the first
 * all-reduce instead of during it: first a rehearsal of the whole per-packet path ({@link DataPathRehearsal}: a real
 * client and real loopback sockets, nothing sent to the appliance), then the per-chunk kernels (exponent scan,
 * quantize into a packet, dequantize out of one) at the job's own k on scratch data. No stream state changes.
 * <p>
 * Bounded by {@link #BUDGET_NS} of wall time and a fixed amount of work. Once the join has completed it has
 * {@link #JOIN_GRACE_NS} more at most, and the join waits for that grace. Since session 55 an agent whose readiness
 * gates a training process's own start-up ({@code worker serve}: {@link WorkerContext#warmUpUntilFirstCall}) is ready
 * as soon as the join completes instead: the warm-up goes on in the background through that grace, and the client's
 * first call stops it and waits until it has stopped (one rehearsal all-reduce or kernel chunk), so the two never
 * share the cores; {@value #UNTIL_FIRST_CALL_PROPERTY}=false turns that off. Measured on loopback
 * (docs/bench/startup-2026-11-29-s55.md): one agent (world 1, nothing to wait for) is ready 0.64-0.70 s after exec
 * instead of 0.86-0.98; its first all-reduce, when it comes at once, took 167-231 ms instead of 152-221, and 131-191
 * ms when it came 300 ms later, like the old 137-173. Programs that call at once after connecting ({@code worker
 * bench}, {@code run}, the Java API) keep the wait: with 4 bench processes on loopback their first call was 8-70 ms
 * slower without it. Before the JIT stopped at C1 (session 53), letting it run on until the first submission made
 * the first all-reduces slower (docs/bench/worker-transport-2026-11-25.md): it then ran beside the job. It runs on its
 * own daemon thread, once per process.
 */
final class DataPathWarmUp implements Runnable
{
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(DataPathWarmUp.class);
    /** Longest the warm-up runs, rehearsal and kernels together. */
    static final long BUDGET_NS = 1_000_000_000L;
    /** Longest the warm-up goes on once the join has completed (ms, system property). */
    static final String GRACE_PROPERTY = "switchml.worker.warmup.grace.ms";
    static final long JOIN_GRACE_NS = Math.max(0, Long.getLong(GRACE_PROPERTY, 300)) * 1_000_000L;
    /**
     * System property: false makes every join wait for the grace, also where the context asks for the warm-up to go on
     * until the first call ({@link WorkerContext#warmUpUntilFirstCall}).
     */
    static final String UNTIL_FIRST_CALL_PROPERTY = "switchml.worker.warmup.until.first.call";
    static final boolean UNTIL_FIRST_CALL = Boolean.parseBoolean(System.getProperty(UNTIL_FIRST_CALL_PROPERTY, "true"));
    /** Part of the time left to the kernels at the job's k, which run after the rehearsal. */
    static final long KERNEL_SHARE_NS = 100_000_000L;
    /** System property: false turns the warm-up off. */
    static final String PROPERTY = "switchml.worker.warmup";
    /** System property: false skips the rehearsal of the per-packet path. */
    static final String REHEARSAL_PROPERTY = "switchml.worker.rehearsal";
    private static final long ELEMENTS = 24_000_000L;
    private static final int BLOCKS = 8;
    private static final java.util.concurrent.atomic.AtomicBoolean STARTED = new java.util.concurrent.atomic.AtomicBoolean();

    private final WorkerContext context;
    private final byte elementType;
    private final int lanes;
    private final int worldSize;
    private volatile long deadlineNs;
    private Thread thread;

    DataPathWarmUp(final WorkerContext context)
    {
        this.context = context;
        this.elementType = context.elementType();
        this.lanes = context.lanes();
        this.worldSize = context.worldSize();
        this.deadlineNs = System.nanoTime() + BUDGET_NS;
    }

    /**
     * Start it on a daemon thread, once per process (the JIT's work is shared by every client of the JVM).
     *
     * @return the warm-up, or null when it ran already or is turned off.
     */
    static DataPathWarmUp maybeStart(final WorkerContext context)
    {
        if (!Boolean.parseBoolean(System.getProperty(PROPERTY, "true")) || !STARTED.compareAndSet(false, true))
        {
            return null;
        }
        return new DataPathWarmUp(context).start();
    }

    /**
     * Start it on its daemon thread.
     *
     * @return this.
     */
    DataPathWarmUp start()
    {
        thread = Thread.ofPlatform().daemon().name("switchml-warmup").start(this);
        return this;
    }

    /**
     * Wait until its thread has ended.
     *
     * @return whether it ended within {@code timeout}.
     */
    boolean awaitStopped(final java.time.Duration timeout)
    {
        try
        {
            return thread.join(timeout);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * @return whether its thread is still running.
     */
    boolean running()
    {
        return thread.isAlive();
    }

    /**
     * @return the {@link System#nanoTime()} by which it stops.
     */
    long deadlineNs()
    {
        return deadlineNs;
    }

    /**
     * Mark the process warm without starting a warm-up: a host agent warms itself up once, before any job
     * ({@link HostWarmUp}), and its jobs' joins must not start another.
     */
    static void markStarted()
    {
        STARTED.set(true);
    }

    /**
     * The join has completed: let the warm-up run {@link #JOIN_GRACE_NS} more at most, and wait until it stops.
     */
    void finish()
    {
        endAfterGrace();
        // it reads its deadline between the rehearsal's all-reduces and between kernel chunks: the margin covers one
        awaitStopped(java.time.Duration.ofNanos(JOIN_GRACE_NS + 200_000_000L));
    }

    /**
     * The join has completed: the warm-up ends {@link #JOIN_GRACE_NS} from now at the latest.
     */
    void endAfterGrace()
    {
        final long endNs = System.nanoTime() + JOIN_GRACE_NS;
        if (endNs - deadlineNs < 0)
        {
            deadlineNs = endNs;
        }
    }

    /**
     * The job's first call has come: stop now (at the next deadline check: between the rehearsal's all-reduces and
     * between kernel chunks) and wait until it has, 200 ms at most.
     */
    void stopForFirstCall()
    {
        final long startNs = System.nanoTime();
        deadlineNs = startNs;
        final boolean stopped = awaitStopped(java.time.Duration.ofMillis(200));
        if (LOG.isDebugEnabled())
        {
            LOG.debug("data path warm-up: the first call waited {} us for it to stop{}",
                (System.nanoTime() - startNs) / 1_000, stopped ? "" : "; it goes on beside the call");
        }
    }

    /**
     * The rehearsal ({@link DataPathRehearsal}) unless {@value #REHEARSAL_PROPERTY} is false, then the kernels at the
     * job's k with what is left.
     */
    public void run()
    {
        final long startNs = System.nanoTime();
        int rehearsed = -1;
        if (Boolean.parseBoolean(System.getProperty(REHEARSAL_PROPERTY, "true")))
        {
            rehearsed = new DataPathRehearsal(context).run(() -> deadlineNs - KERNEL_SHARE_NS);
        }
        final long rehearsalNs = System.nanoTime() - startNs;
        final long kernelRounds = kernels(() -> deadlineNs);
        if (LOG.isDebugEnabled())
        {
            LOG.debug("data path warm-up: rehearsal {} all-reduces in {} ms, kernels {} rounds, {} ms in all", rehearsed,
                rehearsalNs / 1_000_000, kernelRounds, (System.nanoTime() - startNs) / 1_000_000);
        }
    }

    /**
     * The kernels alone, for a budget.
     *
     * @return the rounds of work (one chunk through each kernel) done before the work or the budget ran out.
     */
    long run(final long budgetNs)
    {
        final long endNs = System.nanoTime() + budgetNs;
        return kernels(() -> endNs);
    }

    private long kernels(final java.util.function.LongSupplier deadline)
    {
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
        for (; round < rounds && System.nanoTime() - deadline.getAsLong() < 0; round++)
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
