package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * One all-reduce call on its way through the stream: the tensor, its block exponents ({@link BlockExponents}),
 * its place in the stream of chunks, and the future its caller holds.
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
    /** Null for int tensors. */
    final BlockExponents exponents;
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
        final BlockExponents exponents)
    {
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
}
