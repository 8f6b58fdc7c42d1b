package io.switchml.protocol;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Bulk conversion between network-order int32 lanes in a buffer and an int array. The JDK's
 * byte-swapping memory copy runs several times faster than a loop of single big-endian reads.
 */
public final class Lanes
{
    private static final ValueLayout.OfInt BIG_ENDIAN_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private Lanes()
    {
    }

    private static MemorySegment segment(final DirectBuffer buffer)
    {
        final byte[] array = buffer.byteArray();
        if (array != null)
        {
            return MemorySegment.ofArray(array).asSlice(buffer.wrapAdjustment(), buffer.capacity());
        }
        return MemorySegment.ofAddress(buffer.addressOffset()).reinterpret(buffer.capacity());
    }

    /**
     * Read network-order lanes into an array.
     *
     * @param buffer holding the lanes.
     * @param index  of the first lane's first byte.
     * @param dst    destination.
     * @param from   first index in dst.
     * @param count  number of lanes.
     */
    public static void read(final DirectBuffer buffer, final int index, final int[] dst, final int from, final int count)
    {
        MemorySegment.copy(segment(buffer), BIG_ENDIAN_INT, index, dst, from, count);
    }

    /**
     * Write an array's values as network-order lanes.
     *
     * @param src    values.
     * @param from   first index in src.
     * @param count  number of lanes.
     * @param buffer destination.
     * @param index  of the first lane's first byte.
     */
    public static void write(final int[] src, final int from, final int count, final MutableDirectBuffer buffer, final int index)
    {
        MemorySegment.copy(src, from, segment(buffer), BIG_ENDIAN_INT, index, count);
    }
}
