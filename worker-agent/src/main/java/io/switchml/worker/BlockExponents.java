package io.switchml.worker;

import io.switchml.protocol.ElementType;
import io.switchml.protocol.quant.BlockFloatingPoint;
import io.switchml.protocol.quant.HalfFloats;

import java.util.Arrays;

/**
 * This rank's block exponent of every chunk of one float tensor, each computed once, when first needed.
 * <p>
 * The submitting thread computes the first s chunks' ({@link #checkFirst}), so that a finite value a 16-bit element
 * type cannot carry there fails the call before anything is sent. A NaN or an infinity is carried, not refused: its
 * chunk's exponent is {@link BlockFloatingPoint#NON_FINITE}, which every rank learns from the look-ahead maximum. Each other chunk's is computed by the I/O agent that
 * sends the chunk: chunk j + s goes to the same slot, and so to the same agent, as chunk j, so each element is
 * computed, stored and read by one agent (the look-ahead of chunk j - s, an exponent-only round, the chunk's own
 * update), after the submitting thread published the tensor. A pass over the whole tensor before the first packet
 * read it from memory once more up front and held back the stream while it ran (skipping it cut the 100 MB TAT by
 * 24 ms at 1 Gbit/s and by 27 ms on loopback, docs/bench).
 */
final class BlockExponents
{
    /** Marks an exponent not computed yet: outside the range of every exponent. */
    private static final short NOT_COMPUTED = Short.MIN_VALUE + 1;

    private final TensorView tensor;
    private final byte elementType;
    private final boolean sixteenBit;
    private final int lanesPerSlot;
    private final short[] exponents;

    BlockExponents(final TensorView tensor, final byte elementType, final int lanesPerSlot)
    {
        this.tensor = tensor;
        this.elementType = elementType;
        this.sixteenBit = ElementType.isSixteenBit(elementType);
        this.lanesPerSlot = lanesPerSlot;
        this.exponents = new short[(tensor.length() + lanesPerSlot - 1) / lanesPerSlot];
        Arrays.fill(exponents, NOT_COMPUTED);
    }

    /**
     * Compute the exponents of the first chunks, on the submitting thread.
     *
     * @throws UnrepresentableValueException naming the element when one of them holds a finite value out of the
     * 16-bit element type's range; nothing was sent.
     */
    BlockExponents checkFirst(final int chunks, final int jobId, final int rank)
    {
        for (int chunk = 0, end = Math.min(chunks, exponents.length); chunk < end; chunk++)
        {
            if (of(chunk) == BlockFloatingPoint.OUT_OF_RANGE)
            {
                throw new UnrepresentableValueException(notRepresentable(chunk, jobId, rank) + "; nothing was sent");
            }
        }
        return this;
    }

    /**
     * @return the exponent of a chunk, {@link BlockFloatingPoint#NON_FINITE} when it holds NaN or an infinity, or
     * {@link BlockFloatingPoint#OUT_OF_RANGE} (not stored) when (16-bit types) a finite value rounds out of the
     * format's range.
     */
    int of(final int chunk)
    {
        final short stored = exponents[chunk];
        if (stored != NOT_COMPUTED)
        {
            return stored;
        }
        final int from = chunk * lanesPerSlot;
        final int maxAbsBits = tensor.maxAbsBits(from, Math.min(lanesPerSlot, tensor.length() - from));
        final int exponent = sixteenBit ?
            HalfFloats.blockExponent(elementType, maxAbsBits) : BlockFloatingPoint.exponentOfMagnitudeBits(maxAbsBits);
        if (exponent != BlockFloatingPoint.OUT_OF_RANGE)
        {
            exponents[chunk] = (short)exponent;
        }
        return exponent;
    }

    /**
     * @return "cannot all-reduce ... element at offset i (value) is outside the ... range" for a chunk whose
     * exponent is {@link BlockFloatingPoint#OUT_OF_RANGE}.
     */
    String notRepresentable(final int chunk, final int jobId, final int rank)
    {
        final int from = chunk * lanesPerSlot;
        final int index = tensor.firstOutOfRange(elementType, from, Math.min(lanesPerSlot, tensor.length() - from));
        return "cannot all-reduce " + tensor.describe() + " on job " + jobId + " rank " + rank + ": element at offset " +
            index + " (" + tensor.floatAt(index) + ") is outside the " + ElementType.name(elementType) +
            " range (largest finite " + HalfFloats.maxFinite(elementType) + ")";
    }
}
