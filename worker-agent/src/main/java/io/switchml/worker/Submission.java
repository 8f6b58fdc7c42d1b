package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.quant.BlockFloatingPoint;
import io.switchml.protocol.quant.HalfFloats;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One all-reduce call on its way through the stream: the tensor, its block exponents (the first s computed by
 * the submitting thread, each other one by the agent that sends its chunk, when first needed), its place in the stream of chunks, and the future its caller holds.
 * <p>
 * Every shard's agent sees every submission in stream order. Chunk j of the tensor is stream chunk
 * {@code firstChunk + j}, which goes to slot {@code (firstChunk + j) mod s} and so to the agent of shard
 * {@code slot mod S}. Each agent counts down its own share in {@link #pendingByShard}; the agent that
 * finishes the last share completes the future.
 */
final class Submission
{
    private static final AtomicIntegerFieldUpdater<Submission> PENDING_SHARDS =
        AtomicIntegerFieldUpdater.newUpdater(Submission.class, "pendingShards");

    final long ordinal;
    final TensorView tensor;
    final ReduceOp op;
    final float divisor;
    final int length;
    final int chunks;
    /** Marks an exponent of {@link #exponents} that no thread has computed yet: outside every exponent's range. */
    static final short NOT_COMPUTED = Short.MIN_VALUE + 1;

    /** Block exponents per chunk, {@link #NOT_COMPUTED} until computed; null for int tensors. */
    final short[] exponents;
    private final byte elementType;
    private final boolean sixteenBit;
    private final int lanesPerSlot;
    final CompletableFuture<Void> future = new CompletableFuture<>();
    private final long checkSeed;

    /** Stream chunk of chunk 0; set once, by the publishing thread, before any agent sees this. */
    long firstChunk;
    /** Stream chunk after the last one. */
    long endChunk;
    /** Chunks not yet completed per shard; element h is written only by shard h's agent. */
    int[] pendingByShard;
    private volatile int pendingShards;
    /** First data error of this tensor (a sum out of the 16-bit range); written by agents, read at completion. */
    private volatile String dataError;

    Submission(
        final long ordinal, final TensorView tensor, final ReduceOp op, final int worldSize, final int lanesPerSlot,
        final short[] exponents, final byte elementType, final boolean sixteenBit)
    {
        this.elementType = elementType;
        this.sixteenBit = sixteenBit;
        this.lanesPerSlot = lanesPerSlot;
        this.ordinal = ordinal;
        this.tensor = tensor;
        this.op = op;
        this.divisor = op == ReduceOp.AVERAGE ? worldSize : 1.0f;
        this.length = tensor.length();
        this.chunks = (length + lanesPerSlot - 1) / lanesPerSlot;
        this.exponents = exponents;
        this.checkSeed = mix(length * 0x9E37_79B9_7F4A_7C15L + op.ordinal());
    }

    /**
     * Place the tensor in the stream and count each shard's share of its chunks.
     *
     * @return the number of shards holding at least one chunk.
     */
    int place(final long firstChunk, final int slotCount, final int shardCount)
    {
        this.firstChunk = firstChunk;
        this.endChunk = firstChunk + chunks;
        final int[] pending = new int[shardCount];
        final long fullRounds = chunks / slotCount;
        final int remainder = chunks % slotCount;
        final int firstSlot = (int)(firstChunk % slotCount);
        for (int i = 0; i < slotCount; i++)
        {
            final int slot = (firstSlot + i) % slotCount;
            pending[slot % shardCount] += (int)(fullRounds + (i < remainder ? 1 : 0));
        }
        int shards = 0;
        for (final int count : pending)
        {
            shards += count > 0 ? 1 : 0;
        }
        pendingByShard = pending;
        pendingShards = shards;
        return shards;
    }

    /**
     * A shard's agent finished its share.
     *
     * @return true for the last shard: its agent completes the future.
     */
    boolean onShardDone()
    {
        return PENDING_SHARDS.decrementAndGet(this) == 0;
    }

    /**
     * The check field of chunk j's packets: a digest of the tensor length, the chunk index and the op.
     */
    int tensorCheck(final int chunk)
    {
        return DataHeaderFlyweight.tensorCheckOf((int)(mix(checkSeed + chunk * 0xBF58_476D_1CE4_E5B9L) >>> 56));
    }

    void onDataError(final String message)
    {
        if (dataError == null)
        {
            dataError = message;
        }
    }

    String dataError()
    {
        return dataError;
    }

    /** For messages: "tensor #3 (float[1000], SUM)". */
    String describe()
    {
        return "tensor #" + ordinal + " (" + tensor.describe() + ", " + op + ")";
    }

    /** For messages: where stream chunk g falls in this tensor. */
    String describeChunk(final long streamChunk)
    {
        return "stream chunk " + streamChunk + " (chunk " + (streamChunk - firstChunk) + " of " + chunks + " of " +
            describe() + ")";
    }

    private static long mix(final long seed)
    {
        long z = seed + 0x94D0_49BB_1331_11EBL;
        z = (z ^ (z >>> 30)) * 0xBF58_476D_1CE4_E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D0_49BB_1331_11EBL;
        return z ^ (z >>> 31);
    }

    /**
     * This rank's block exponent of chunk {@code index}, computed on first use. Chunk j + s goes to the same slot,
     * and so to the same agent, as chunk j: each chunk's exponent is computed, stored and read by the one agent
     * that sends the chunk (the look-ahead of chunk j - s, an exponent-only round, the chunk's own update), after
     * the submitting thread published the submission, so no element is shared between threads.
     *
     * @return the exponent, or {@link BlockFloatingPoint#NON_FINITE} when the chunk holds a value the element
     * type cannot carry (not stored).
     */
    int exponent(final int index)
    {
        final short stored = exponents[index];
        if (stored != NOT_COMPUTED)
        {
            return stored;
        }
        final int exponent = blockExponent(tensor, elementType, sixteenBit, lanesPerSlot, index);
        if (exponent != BlockFloatingPoint.NON_FINITE)
        {
            exponents[index] = (short)exponent;
        }
        return exponent;
    }

    /**
     * @return the block exponent of one chunk of a float tensor, {@link BlockFloatingPoint#NON_FINITE} when it holds
     * NaN, an infinity or (16-bit types) a value out of the format's range.
     */
    static int blockExponent(
        final TensorView tensor, final byte elementType, final boolean sixteenBit, final int lanesPerSlot, final int chunk)
    {
        final int from = chunk * lanesPerSlot;
        final int maxAbsBits = tensor.maxAbsBits(from, Math.min(lanesPerSlot, tensor.length() - from));
        return sixteenBit ?
            HalfFloats.blockExponent(elementType, maxAbsBits) : BlockFloatingPoint.exponentOfMagnitudeBits(maxAbsBits);
    }
}
