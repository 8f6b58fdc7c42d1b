package io.switchml.appliance.engine;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.Lanes;
import io.switchml.protocol.quant.BlockFloatingPoint;
import io.switchml.protocol.quant.HalfFloats;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;

import static io.switchml.protocol.DataHeaderFlyweight.FLAG_EXPONENT_ONLY;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_POOL_VERSION;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_RETRANSMIT;
import static io.switchml.protocol.DataHeaderFlyweight.PAYLOAD_OFFSET;

/**
 * The aggregation state of one job: s slots of k int32 lanes, in two pool versions (the shadow
 * copies), with per-version seen bitmaps, counts and look-ahead exponents. This is Algorithm 3 of
 * the SwitchML paper ("switch logic with packet loss recovery"), plus consistency checks that a
 * switch cannot afford but a software appliance can: every contribution to a slot version must
 * carry the same chunk sequence number, element type, element count, scale exponent and exponent-only
 * flag as the first one, otherwise it is rejected without touching state. Chunk sequence numbers only
 * grow along a slot version's rounds, so a late copy of an earlier round's update (which Algorithm 3
 * alone would take as the first contribution of a new round, corrupting the shadow copy) is recognised
 * and dropped as {@link #STALE}.
 * <p>
 * The header's check field is not a rejection criterion: the pool keeps the byte-wise maximum over the
 * contributions and returns it in the result, so that every worker can see for itself that the ranks
 * put different tensors at the same point of their streams (see
 * {@link DataHeaderFlyweight#tensorCheckOf(int)}).
 * <p>
 * int32 and float32 lanes are summed as they arrive. float16 and bfloat16 lanes are decoded, scaled to
 * 32-bit fixed point with f = (2^31-1)/(n*2^m) from the packet's scale exponent m and clamped to
 * floor((2^31-1)/n) ({@link HalfFloats#toFixedPoint}), summed in int32, and encoded back to the 16-bit
 * format as sum / f when the result is written ({@link HalfFloats#fromFixedPoint}).
 * <p>
 * Pure logic: no sockets, no clock, no allocation after construction. One thread owns an instance.
 */
public final class SlotPool
{
    /** The update was aggregated and the slot still waits for other workers: send nothing. */
    public static final int ABSORBED = 0;
    /** The update completed the slot: the result packet was written, send it to every worker. */
    public static final int COMPLETED = 1;
    /** A retransmission into a completed slot: the result was written, send it to the sender only. */
    public static final int SHADOW_RESULT = 2;
    /** A duplicate of an update already aggregated into a slot that is still incomplete: drop. */
    public static final int DUPLICATE = 3;
    /** The update disagrees with the slot's chunk, element count, or exponent: drop and count. */
    public static final int MISMATCH = 4;
    /**
     * A late copy of an update for a round this slot version has already completed or moved past (a
     * network duplicate, or a retransmission overtaken by its result): drop without touching state.
     */
    public static final int STALE = 5;
    /**
     * A probe for an update the slot has, while it waits for other workers: a PENDING packet (header only) was
     * written, send it to the sender.
     */
    public static final int PROBE_PENDING = 6;
    /** A probe for an update the slot has not got: a NACK packet was written, send it to the sender. */
    public static final int NACK = 7;

    private static final ByteOrder ORDER = ByteOrder.BIG_ENDIAN;
    private static final int WORDS_PER_BITMAP = DataHeaderFlyweight.MAX_WORKERS / 64;

    private final int worldSize;
    private final int slotCount;
    private final int slotStride;
    private final int lanesPerSlot;

    private final int[] lanes;
    private final long[] seen;
    private final int[] count;
    private final long[] chunkSequence;
    private final int[] elementCount;
    private final short[] scaleExponent;
    private final short[] lookaheadExponent;
    private final boolean[] exponentOnly;
    private final byte[] elementType;
    private final int[] tensorCheck;
    private final long[] firstArrivalNs;
    private final int[] scratch;
    private final short[] halfScratch;
    private final int laneLimit;

    private long lastCompletionLatencyNs;

    /**
     * @param worldSize    number of workers n, 1 to 256.
     * @param slotCount    pool size s.
     * @param lanesPerSlot lanes per slot k.
     */
    public SlotPool(final int worldSize, final int slotCount, final int lanesPerSlot)
    {
        this(worldSize, slotCount, lanesPerSlot, 1);
    }

    /**
     * A pool holding every stride-th slot of a job, for a data-plane shard: global slot index i is
     * held at local index i / stride by the shard i mod stride.
     *
     * @param worldSize    number of workers n, 1 to 256.
     * @param slotCount    slots held by this pool.
     * @param lanesPerSlot lanes per slot k.
     * @param slotStride   number of shards sharing the job's slots.
     */
    public SlotPool(final int worldSize, final int slotCount, final int lanesPerSlot, final int slotStride)
    {
        if (slotStride < 1)
        {
            throw new IllegalArgumentException("slotStride must be positive: " + slotStride);
        }
        this.slotStride = slotStride;
        if (worldSize < 1 || worldSize > DataHeaderFlyweight.MAX_WORKERS)
        {
            throw new IllegalArgumentException("worldSize must be in 1.." + DataHeaderFlyweight.MAX_WORKERS + ": " + worldSize);
        }
        if (slotCount < 1)
        {
            throw new IllegalArgumentException("slotCount must be positive: " + slotCount);
        }
        if (lanesPerSlot < 1 || lanesPerSlot > DataHeaderFlyweight.MAX_ELEMENTS)
        {
            throw new IllegalArgumentException("lanesPerSlot must be in 1.." + DataHeaderFlyweight.MAX_ELEMENTS + ": " + lanesPerSlot);
        }
        this.worldSize = worldSize;
        this.slotCount = slotCount;
        this.lanesPerSlot = lanesPerSlot;

        final int cells = 2 * slotCount;
        lanes = new int[Math.multiplyExact(cells, lanesPerSlot)];
        seen = new long[cells * WORDS_PER_BITMAP];
        count = new int[cells];
        chunkSequence = new long[cells];
        elementCount = new int[cells];
        scaleExponent = new short[cells];
        lookaheadExponent = new short[cells];
        exponentOnly = new boolean[cells];
        elementType = new byte[cells];
        tensorCheck = new int[cells];
        firstArrivalNs = new long[cells];
        java.util.Arrays.fill(chunkSequence, -1L);
        scratch = new int[lanesPerSlot];
        halfScratch = new short[lanesPerSlot];
        laneLimit = BlockFloatingPoint.laneLimit(worldSize);
    }

    public int worldSize()
    {
        return worldSize;
    }

    public int slotCount()
    {
        return slotCount;
    }

    public int lanesPerSlot()
    {
        return lanesPerSlot;
    }

    /**
     * Bytes of aggregator memory this pool holds, for admission control.
     *
     * @return lane and bookkeeping bytes.
     */
    public static long memoryBytes(final int slotCount, final int lanesPerSlot)
    {
        return 2L * slotCount * ((long)lanesPerSlot * Integer.BYTES + WORDS_PER_BITMAP * Long.BYTES + 32);
    }

    /**
     * @return nanoseconds from the first contribution to completion of the slot completed last.
     */
    public long lastCompletionLatencyNs()
    {
        return lastCompletionLatencyNs;
    }

    /**
     * Apply one update packet (Algorithm 3). The caller has validated the packet with
     * {@link DataHeaderFlyweight#validate} and checked that rank &lt; n, that the slot belongs to this
     * pool (slot / stride &lt; slot count) and that count &lt;= k.
     *
     * @param update       the received update packet.
     * @param resultBuffer where a result packet is written on {@link #COMPLETED} or
     *                     {@link #SHADOW_RESULT}; must hold header plus k lanes of the update's element
     *                     type; the result is {@link #resultLength} bytes long.
     * @param resultOffset offset of the result packet in resultBuffer.
     * @param nowNs        time of arrival, only used for the completion latency.
     * @return one of {@link #ABSORBED}, {@link #COMPLETED}, {@link #SHADOW_RESULT},
     * {@link #DUPLICATE}, {@link #MISMATCH}, {@link #STALE}.
     */
    public int onUpdate(
        final DataHeaderFlyweight update,
        final MutableDirectBuffer resultBuffer,
        final int resultOffset,
        final long nowNs)
    {
        final DirectBuffer buffer = update.buffer();
        final int offset = update.offset();
        final int flags = update.flags();
        final int version = flags & FLAG_POOL_VERSION;
        final int slot = update.slotIndex() / slotStride;
        final int rank = update.workerRank();
        final int cell = version * slotCount + slot;
        final int otherCell = (version ^ 1) * slotCount + slot;
        final long sequence = update.chunkSequence();
        final int elements = update.elementCount();
        final boolean isExponentOnly = (flags & FLAG_EXPONENT_ONLY) != 0;
        final byte type = update.elementType();

        final int word = rank >>> 6;
        final long bit = 1L << (rank & 63);
        final int seenIndex = cell * WORDS_PER_BITMAP + word;

        if ((seen[seenIndex] & bit) == 0)
        {
            final boolean first = count[cell] == 0;
            if (isStale(cell, sequence))
            {
                return STALE;
            }
            if (!first && (chunkSequence[cell] != sequence ||
                elementCount[cell] != elements ||
                scaleExponent[cell] != update.scaleExponent() ||
                exponentOnly[cell] != isExponentOnly ||
                elementType[cell] != type))
            {
                return MISMATCH;
            }

            seen[seenIndex] |= bit;
            seen[otherCell * WORDS_PER_BITMAP + word] &= ~bit;

            final int laneBase = cell * lanesPerSlot;
            final int payload = offset + PAYLOAD_OFFSET;
            if (first)
            {
                chunkSequence[cell] = sequence;
                elementCount[cell] = elements;
                scaleExponent[cell] = update.scaleExponent();
                exponentOnly[cell] = isExponentOnly;
                elementType[cell] = type;
                lookaheadExponent[cell] = update.lookaheadExponent();
                tensorCheck[cell] = update.tensorCheck();
                firstArrivalNs[cell] = nowNs;
                if (ElementType.isSixteenBit(type))
                {
                    readHalfLanes(buffer, payload, type, update.scaleExponent(), elements, lanes, laneBase);
                }
                else
                {
                    Lanes.read(buffer, payload, lanes, laneBase, elements);
                }
            }
            else
            {
                lookaheadExponent[cell] = (short)Math.max(lookaheadExponent[cell], update.lookaheadExponent());
                tensorCheck[cell] = DataHeaderFlyweight.combineTensorChecks(tensorCheck[cell], update.tensorCheck());
                if (ElementType.isSixteenBit(type))
                {
                    final int[] incoming = scratch;
                    readHalfLanes(buffer, payload, type, update.scaleExponent(), elements, incoming, 0);
                    for (int i = 0; i < elements; i++)
                    {
                        lanes[laneBase + i] += incoming[i];
                    }
                }
                else
                {
                    Lanes.add(buffer, payload, lanes, laneBase, elements);
                }
            }

            final int newCount = count[cell] + 1;
            if (newCount == worldSize)
            {
                count[cell] = 0;
                lastCompletionLatencyNs = nowNs - firstArrivalNs[cell];
                writeResult(update, cell, flags & ~FLAG_RETRANSMIT, resultBuffer, resultOffset);
                return COMPLETED;
            }
            count[cell] = newCount;
            return ABSORBED;
        }

        if (count[cell] == 0)
        {
            if (sequence < chunkSequence[cell])
            {
                return STALE;
            }
            if (chunkSequence[cell] != sequence || exponentOnly[cell] != isExponentOnly)
            {
                return MISMATCH;
            }
            writeResult(update, cell, flags | FLAG_RETRANSMIT, resultBuffer, resultOffset);
            return SHADOW_RESULT;
        }
        return DUPLICATE;
    }

    /**
     * Answer a probe ({@link DataHeaderFlyweight#TYPE_PROBE}): a worker suspects that its update for the
     * probe's slot version and chunk, or the result of it, was lost. Validated as for {@link #onUpdate}.
     * Changes no state.
     *
     * @param probe        the received probe.
     * @param resultBuffer where a result ({@link #SHADOW_RESULT}), a NACK ({@link #NACK}) or a PENDING
     *                     ({@link #PROBE_PENDING}; both header only) is written; must hold header plus k lanes.
     * @param resultOffset offset of that packet in resultBuffer.
     * @return {@link #SHADOW_RESULT} when the slot version completed that chunk (the worker lost the result),
     * {@link #NACK} when it has not got the worker's update, {@link #PROBE_PENDING} when it has and waits for
     * others, {@link #STALE} for a probe about a round that is over, {@link #MISMATCH} for one that disagrees
     * with the slot's chunk.
     */
    public int onProbe(final DataHeaderFlyweight probe, final MutableDirectBuffer resultBuffer, final int resultOffset)
    {
        final int flags = probe.flags();
        final int version = flags & FLAG_POOL_VERSION;
        final int slot = probe.slotIndex() / slotStride;
        final int rank = probe.workerRank();
        final int cell = version * slotCount + slot;
        final long sequence = probe.chunkSequence();
        final boolean isExponentOnly = (flags & FLAG_EXPONENT_ONLY) != 0;
        final boolean seenRank = (seen[cell * WORDS_PER_BITMAP + (rank >>> 6)] & (1L << (rank & 63))) != 0;
        final boolean first = count[cell] == 0;

        if (seenRank)
        {
            if (chunkSequence[cell] != sequence || exponentOnly[cell] != isExponentOnly)
            {
                return sequence < chunkSequence[cell] ? STALE : MISMATCH;
            }
            if (first)
            {
                writeResult(probe, cell, flags | FLAG_RETRANSMIT, resultBuffer, resultOffset);
                return SHADOW_RESULT;
            }
            writeAnswer(probe, DataHeaderFlyweight.TYPE_PENDING, resultBuffer, resultOffset);
            return PROBE_PENDING;
        }
        if (isStale(cell, sequence))
        {
            return STALE;
        }
        if (!first && (chunkSequence[cell] != sequence || exponentOnly[cell] != isExponentOnly))
        {
            return MISMATCH;
        }
        writeAnswer(probe, DataHeaderFlyweight.TYPE_NACK, resultBuffer, resultOffset);
        return NACK;
    }

    /**
     * A header-only answer to a probe: the probe's header with another type and MAC zero.
     */
    private static void writeAnswer(
        final DataHeaderFlyweight probe, final byte type, final MutableDirectBuffer resultBuffer, final int resultOffset)
    {
        resultBuffer.putBytes(resultOffset, probe.buffer(), probe.offset(), DataHeaderFlyweight.HEADER_LENGTH);
        resultBuffer.putByte(resultOffset + DataHeaderFlyweight.TYPE_OFFSET, type);
        resultBuffer.putLong(resultOffset + DataHeaderFlyweight.MAC_OFFSET, 0L, ORDER);
    }

    /**
     * A contribution (or a probe about one) from a rank the slot version has not seen belongs to a round
     * that is over: a chunk the version already completed (or moved past), or an older one than the
     * version is aggregating.
     */
    private boolean isStale(final int cell, final long sequence)
    {
        return count[cell] == 0 ? sequence <= chunkSequence[cell] : sequence < chunkSequence[cell];
    }

    /**
     * Find a slot version that has some but not all contributions and received its first one at or
     * before a deadline: a worker stopped sending.
     *
     * @param deadlineNs first-arrival time at or before which an incomplete slot counts as expired.
     * @return the cell (version * slotCount + slot) of the first expired slot, or -1.
     */
    public int findExpired(final long deadlineNs)
    {
        for (int cell = 0, cells = count.length; cell < cells; cell++)
        {
            if (count[cell] != 0 && firstArrivalNs[cell] - deadlineNs <= 0)
            {
                return cell;
            }
        }
        return -1;
    }

    /**
     * Find a slot version that has some contributions but not this rank's: it waits for the rank.
     *
     * @return the cell (version * slotCount + slot) of the first such slot, or -1.
     */
    public int findWaitingFor(final int rank)
    {
        final int word = rank >>> 6;
        final long bit = 1L << (rank & 63);
        for (int cell = 0, cells = count.length; cell < cells; cell++)
        {
            if (count[cell] != 0 && (seen[cell * WORDS_PER_BITMAP + word] & bit) == 0)
            {
                return cell;
            }
        }
        return -1;
    }

    /**
     * Ranks that have not contributed to an incomplete slot version.
     *
     * @param cell from {@link #findExpired(long)}.
     * @return the missing ranks in ascending order (allocates; for error reports only).
     */
    public int[] missingRanks(final int cell)
    {
        final int[] missing = new int[worldSize - count[cell]];
        int next = 0;
        for (int rank = 0; rank < worldSize && next < missing.length; rank++)
        {
            if ((seen[cell * WORDS_PER_BITMAP + (rank >>> 6)] & (1L << (rank & 63))) == 0)
            {
                missing[next++] = rank;
            }
        }
        return next == missing.length ? missing : java.util.Arrays.copyOf(missing, next);
    }

    /**
     * @return the chunk sequence number a cell is aggregating or last aggregated.
     */
    public long chunkSequence(final int cell)
    {
        return chunkSequence[cell];
    }

    /**
     * Length of the result packet a {@link #COMPLETED} or {@link #SHADOW_RESULT} wrote.
     *
     * @param result the result packet, wrapped.
     * @return header plus payload bytes for its element type and count.
     */
    public static int resultLength(final DataHeaderFlyweight result)
    {
        return DataHeaderFlyweight.packetLength(result.elementType(), result.elementCount());
    }

    private void readHalfLanes(
        final DirectBuffer buffer,
        final int payload,
        final byte type,
        final short exponent,
        final int elements,
        final int[] dst,
        final int dstFrom)
    {
        final short[] half = halfScratch;
        Lanes.read(buffer, payload, half, 0, elements);
        final double scale = BlockFloatingPoint.scale(exponent, worldSize);
        final int limit = laneLimit;
        for (int i = 0; i < elements; i++)
        {
            dst[dstFrom + i] = HalfFloats.toFixedPoint(type, half[i], scale, limit);
        }
    }

    private void writeResult(
        final DataHeaderFlyweight update,
        final int cell,
        final int flags,
        final MutableDirectBuffer resultBuffer,
        final int resultOffset)
    {
        final int elements = elementCount[cell];
        resultBuffer.putBytes(resultOffset, update.buffer(), update.offset(), PAYLOAD_OFFSET);
        final int laneBase = cell * lanesPerSlot;
        final int payload = resultOffset + PAYLOAD_OFFSET;
        final byte type = elementType[cell];
        if (ElementType.isSixteenBit(type))
        {
            final short[] half = halfScratch;
            final double scale = BlockFloatingPoint.scale(scaleExponent[cell], worldSize);
            for (int i = 0; i < elements; i++)
            {
                half[i] = HalfFloats.fromFixedPoint(type, lanes[laneBase + i], scale);
            }
            Lanes.write(half, 0, elements, resultBuffer, payload);
        }
        else
        {
            Lanes.write(lanes, laneBase, elements, resultBuffer, payload);
        }
        resultBuffer.putByte(resultOffset + DataHeaderFlyweight.TYPE_OFFSET, DataHeaderFlyweight.TYPE_RESULT);
        resultBuffer.putByte(resultOffset + DataHeaderFlyweight.FLAGS_OFFSET, (byte)flags);
        resultBuffer.putShort(resultOffset + DataHeaderFlyweight.SCALE_EXPONENT_OFFSET, scaleExponent[cell], ORDER);
        resultBuffer.putShort(resultOffset + DataHeaderFlyweight.LOOKAHEAD_EXPONENT_OFFSET, lookaheadExponent[cell], ORDER);
        resultBuffer.putLong(resultOffset + DataHeaderFlyweight.CHUNK_SEQUENCE_OFFSET, chunkSequence[cell], ORDER);
        resultBuffer.putShort(resultOffset + DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, (short)elements, ORDER);
        resultBuffer.putByte(resultOffset + DataHeaderFlyweight.ELEMENT_TYPE_OFFSET, type);
        resultBuffer.putShort(resultOffset + DataHeaderFlyweight.TENSOR_CHECK_OFFSET, (short)tensorCheck[cell], ORDER);
        resultBuffer.putLong(resultOffset + DataHeaderFlyweight.MAC_OFFSET, 0L, ORDER);
    }
}
