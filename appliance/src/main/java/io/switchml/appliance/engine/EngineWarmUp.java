package io.switchml.appliance.engine;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * Runs {@link SlotPool#onUpdate} (Algorithm 3: lane sums of 32-bit and 16-bit lanes, completions, pool-version flips)
 * on a scratch pool of its own at start-up, so that the JIT has compiled the lane loops before the first job's
 * packets arrive instead of during its first all-reduce. The appliance is otherwise cold until a job runs: a 100 MB
 * all-reduce at k = 8192 is about 12,000 updates, about what C2 needs before it compiles the loop, so the first call
 * ran mostly interpreted. Local work only: no socket, no job, nothing shared with the shards. Bounded by
 * {@link #BUDGET_NS} of wall time and a fixed amount of work; it runs on a daemon thread beside the start-up.
 */
public final class EngineWarmUp implements Runnable
{
    /** Longest the warm-up runs. */
    public static final long BUDGET_NS = 300_000_000L;
    /** System property: false turns the warm-up off. */
    public static final String PROPERTY = "switchml.appliance.warmup";
    private static final int LANES = 2048;
    private static final int SLOTS = 16;
    private static final int WORLD = 2;
    private static final int ROUNDS_PER_TYPE = 12_000;
    private static final byte[] TYPES = {ElementType.INT32, ElementType.FLOAT16};

    /**
     * Start it on a daemon thread unless {@link #PROPERTY} is false.
     *
     * @return the thread, or null when turned off.
     */
    public static Thread maybeStart()
    {
        if (!Boolean.parseBoolean(System.getProperty(PROPERTY, "true")))
        {
            return null;
        }
        return Thread.ofPlatform().daemon().name("switchml-engine-warmup").start(new EngineWarmUp());
    }

    public void run()
    {
        run(BUDGET_NS);
    }

    /**
     * @return the slots completed; {@link #completions()} when the work ran out before the budget.
     */
    public long run(final long budgetNs)
    {
        final long deadlineNs = System.nanoTime() + budgetNs;
        final UnsafeBuffer packet = new UnsafeBuffer(ByteBuffer.allocateDirect(DataHeaderFlyweight.packetLength(LANES)));
        final UnsafeBuffer result = new UnsafeBuffer(ByteBuffer.allocateDirect(DataHeaderFlyweight.packetLength(LANES)));
        final DataHeaderFlyweight update = new DataHeaderFlyweight().wrap(packet, 0);
        long completed = 0;
        for (final byte type : TYPES)
        {
            final SlotPool pool = new SlotPool(WORLD, SLOTS, LANES);
            for (int round = 0; round < ROUNDS_PER_TYPE && System.nanoTime() - deadlineNs < 0; round++)
            {
                final int slot = round % SLOTS;
                final int version = (round / SLOTS) & 1;
                for (int rank = 0; rank < WORLD; rank++)
                {
                    update.writeHeader(DataHeaderFlyweight.TYPE_UPDATE, 1, rank, version, type, slot, round, LANES, 0, 0);
                    // a word every 128 bytes of the payload, inside it for 16-bit lanes as for 32-bit ones
                    for (int offset = 0; offset < LANES * Short.BYTES; offset += 128)
                    {
                        packet.putLong(DataHeaderFlyweight.PAYLOAD_OFFSET + offset, round * 31L + offset);
                    }
                    if (pool.onUpdate(update, result, 0, round) == SlotPool.COMPLETED)
                    {
                        completed++;
                    }
                }
            }
        }
        return completed;
    }

    /**
     * @return the slots the whole fixed amount of work completes.
     */
    public static long completions()
    {
        return (long)TYPES.length * ROUNDS_PER_TYPE;
    }
}
