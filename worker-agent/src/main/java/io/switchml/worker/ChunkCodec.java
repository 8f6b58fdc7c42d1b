package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.Lanes;
import io.switchml.protocol.quant.BlockFloatingPoint;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Moves one chunk of a tensor into an update's lanes and one result's lanes back into the tensor: int32 as is, float32
 * through block floating point at the slot's agreed exponent, float16 and bfloat16 as 16-bit lanes. A chunk whose
 * agreed exponent is {@link BlockFloatingPoint#NON_FINITE} (a rank's chunk held a NaN or an infinity) goes out as
 * zeros with no scale exponent and comes back as NaN. Owns the scratch arrays, so one codec serves one agent thread
 * and allocates nothing per packet.
 */
final class ChunkCodec
{
    private final byte elementType;
    private final boolean isFloat;
    private final boolean isSixteenBit;
    private final int worldSize;
    private final int[] lanes;
    private final short[] halves;
    /** {@link #halves} as a segment, made once (no allocation per packet): Lanes' segment copies pick native or Java. */
    private final java.lang.foreign.MemorySegment halvesSegment;
    private final float[] stage;

    ChunkCodec(final byte elementType, final int lanesPerSlot, final int worldSize)
    {
        this.elementType = elementType;
        this.isFloat = ElementType.isFloat(elementType);
        this.isSixteenBit = ElementType.isSixteenBit(elementType);
        this.worldSize = worldSize;
        lanes = new int[lanesPerSlot];
        halves = new short[lanesPerSlot];
        halvesSegment = java.lang.foreign.MemorySegment.ofArray(halves);
        stage = new float[lanesPerSlot];
    }

    /**
     * The scale exponent an update and its result carry for a chunk's agreed exponent: {@link
     * DataHeaderFlyweight#NO_EXPONENT} for a chunk that is not finite, whose lanes are zeros.
     */
    static int wireScaleExponent(final int agreedExponent)
    {
        return agreedExponent == BlockFloatingPoint.NON_FINITE ? DataHeaderFlyweight.NO_EXPONENT : agreedExponent;
    }

    /**
     * Write elements [from, from + count) of a tensor as lanes at {@code offset} of a packet.
     *
     * @param scaleExponent the chunk's agreed block exponent (float types only).
     */
    void encode(final TensorView tensor, final int from, final int count, final int scaleExponent,
        final UnsafeBuffer packet, final int offset)
    {
        if (scaleExponent == BlockFloatingPoint.NON_FINITE)
        {
            packet.setMemory(offset, count * ElementType.laneBytes(elementType), (byte)0);
        }
        else if (isSixteenBit)
        {
            tensor.toHalfLanes(elementType, from, count, halves, stage);
            Lanes.writeShorts(halvesSegment, 0, count, packet, offset);
        }
        else if (isFloat)
        {
            tensor.toPacket(from, count, BlockFloatingPoint.scale(scaleExponent, worldSize),
                BlockFloatingPoint.laneLimit(worldSize), lanes, stage, packet, offset);
        }
        else
        {
            tensor.toPacket(from, count, 1.0, Integer.MAX_VALUE, lanes, stage, packet, offset);
        }
    }

    /**
     * Write a result's lanes into elements [from, from + count) of the submission's output, divided by its divisor
     * (the world size for an average).
     *
     * @param scaleExponent the chunk's agreed block exponent (float types only); {@link
     *                      BlockFloatingPoint#NON_FINITE} writes NaN.
     * @return the index within the chunk of the first sum outside a 16-bit type's range (its other elements are
     * written), or -1.
     */
    int decode(final UnsafeBuffer packet, final int offset, final int count, final int scaleExponent,
        final Submission submission, final int from)
    {
        final TensorView tensor = submission.tensor;
        if (scaleExponent == BlockFloatingPoint.NON_FINITE)
        {
            tensor.fillNaN(from, count, stage);
        }
        else if (isSixteenBit)
        {
            Lanes.readShorts(packet, offset, halvesSegment, 0, count);
            return tensor.fromHalfLanes(elementType, halves, count, submission.divisor, from, stage);
        }
        else if (isFloat)
        {
            final double multiplier = 1.0 / (BlockFloatingPoint.scale(scaleExponent, worldSize) * submission.divisor);
            tensor.fromPacket(packet, offset, count, multiplier, from, lanes, stage);
        }
        else
        {
            tensor.fromPacket(packet, offset, count, 1.0, from, lanes, stage);
        }
        return -1;
    }
}
