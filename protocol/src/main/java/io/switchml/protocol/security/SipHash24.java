package io.switchml.protocol.security;

import org.agrona.DirectBuffer;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * SipHash-2-4 with a 64-bit output (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed
 * pseudorandom function, used here as a message authentication code.
 * <p>
 * The 128-bit key is read as two little-endian 64-bit halves: {@code k0} from key bytes 0..7 and {@code k1} from
 * bytes 8..15 (see {@link PacketMac#keyFromBytes(byte[])}). The state v0..v3 starts as k0, k1, k0, k1 XOR the
 * constants "somepseudorandomlygeneratedbytes". The message is read as little-endian 64-bit words m; each is
 * absorbed by {@code v3 ^= m; 2 x SipRound; v0 ^= m}. The last word holds the 0 to 7 trailing bytes in its low
 * bytes and the message length modulo 256 in its top byte, so even an empty message has one word. Finalization is
 * {@code v2 ^= 0xff; 4 x SipRound}, and the output is {@code v0 ^ v1 ^ v2 ^ v3}. Writing the output little-endian
 * gives the 8 bytes that the reference implementation and its published test vectors list.
 * <p>
 * The methods keep the state in locals: they allocate nothing, take no lock and may be called from any thread.
 */
public final class SipHash24
{
    /** Bytes in a key. */
    public static final int KEY_LENGTH = 16;

    /** "somepseu", XORed with k0 to start v0. */
    static final long INIT_V0 = 0x736f6d6570736575L;
    /** "dorandom", XORed with k1 to start v1. */
    static final long INIT_V1 = 0x646f72616e646f6dL;
    /** "lygenera", XORed with k0 to start v2. */
    static final long INIT_V2 = 0x6c7967656e657261L;
    /** "tedbytes", XORed with k1 to start v3. */
    static final long INIT_V3 = 0x7465646279746573L;
    /** XORed into v2 before the finalization rounds. */
    static final long FINAL_XOR = 0xffL;

    private static final VarHandle LONG_LE = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    private SipHash24()
    {
    }

    /**
     * SipHash-2-4 of a range of bytes of a buffer.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param buffer holding the message.
     * @param offset of the first message byte in the buffer.
     * @param length of the message in bytes.
     * @return the 64-bit hash.
     * @throws IndexOutOfBoundsException when the range is not inside the buffer.
     */
    public static long hash(final long k0, final long k1, final DirectBuffer buffer, final int offset, final int length)
    {
        if (length < 0)
        {
            throw new IndexOutOfBoundsException("negative length: " + length);
        }
        buffer.boundsCheck(offset, length);

        final int words = length >>> 3;
        final int tailIndex = offset + (words << 3);
        long last = ((long)length) << 56;
        for (int i = (length & 7) - 1; i >= 0; i--)
        {
            last |= (buffer.getByte(tailIndex + i) & 0xFFL) << (i << 3);
        }

        long v0 = k0 ^ INIT_V0;
        long v1 = k1 ^ INIT_V1;
        long v2 = k0 ^ INIT_V2;
        long v3 = k1 ^ INIT_V3;

        for (int word = 0; word <= words; word++)
        {
            final long m = word < words ? buffer.getLong(offset + (word << 3), ByteOrder.LITTLE_ENDIAN) : last;
            v3 ^= m;
            for (int round = 0; round < 2; round++)
            {
                v0 += v1;
                v1 = Long.rotateLeft(v1, 13);
                v1 ^= v0;
                v0 = Long.rotateLeft(v0, 32);
                v2 += v3;
                v3 = Long.rotateLeft(v3, 16);
                v3 ^= v2;
                v0 += v3;
                v3 = Long.rotateLeft(v3, 21);
                v3 ^= v0;
                v2 += v1;
                v1 = Long.rotateLeft(v1, 17);
                v1 ^= v2;
                v2 = Long.rotateLeft(v2, 32);
            }
            v0 ^= m;
        }

        v2 ^= FINAL_XOR;
        for (int round = 0; round < 4; round++)
        {
            v0 += v1;
            v1 = Long.rotateLeft(v1, 13);
            v1 ^= v0;
            v0 = Long.rotateLeft(v0, 32);
            v2 += v3;
            v3 = Long.rotateLeft(v3, 16);
            v3 ^= v2;
            v0 += v3;
            v3 = Long.rotateLeft(v3, 21);
            v3 ^= v0;
            v2 += v1;
            v1 = Long.rotateLeft(v1, 17);
            v1 ^= v2;
            v2 = Long.rotateLeft(v2, 32);
        }

        return v0 ^ v1 ^ v2 ^ v3;
    }

    /**
     * SipHash-2-4 of a range of an array, for callers that hold a {@code byte[]}. Allocation-free like
     * {@link #hash(long, long, DirectBuffer, int, int)}, and equal to it for the same bytes.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param data   holding the message.
     * @param offset of the first message byte in the array.
     * @param length of the message in bytes.
     * @return the 64-bit hash.
     * @throws IndexOutOfBoundsException when the range is not inside the array.
     */
    public static long hash(final long k0, final long k1, final byte[] data, final int offset, final int length)
    {
        Objects.checkFromIndexSize(offset, length, data.length);

        final int words = length >>> 3;
        final int tailIndex = offset + (words << 3);
        long last = ((long)length) << 56;
        for (int i = (length & 7) - 1; i >= 0; i--)
        {
            last |= (data[tailIndex + i] & 0xFFL) << (i << 3);
        }

        long v0 = k0 ^ INIT_V0;
        long v1 = k1 ^ INIT_V1;
        long v2 = k0 ^ INIT_V2;
        long v3 = k1 ^ INIT_V3;

        for (int word = 0; word <= words; word++)
        {
            final long m = word < words ? (long)LONG_LE.get(data, offset + (word << 3)) : last;
            v3 ^= m;
            for (int round = 0; round < 2; round++)
            {
                v0 += v1;
                v1 = Long.rotateLeft(v1, 13);
                v1 ^= v0;
                v0 = Long.rotateLeft(v0, 32);
                v2 += v3;
                v3 = Long.rotateLeft(v3, 16);
                v3 ^= v2;
                v0 += v3;
                v3 = Long.rotateLeft(v3, 21);
                v3 ^= v0;
                v2 += v1;
                v1 = Long.rotateLeft(v1, 17);
                v1 ^= v2;
                v2 = Long.rotateLeft(v2, 32);
            }
            v0 ^= m;
        }

        v2 ^= FINAL_XOR;
        for (int round = 0; round < 4; round++)
        {
            v0 += v1;
            v1 = Long.rotateLeft(v1, 13);
            v1 ^= v0;
            v0 = Long.rotateLeft(v0, 32);
            v2 += v3;
            v3 = Long.rotateLeft(v3, 16);
            v3 ^= v2;
            v0 += v3;
            v3 = Long.rotateLeft(v3, 21);
            v3 ^= v0;
            v2 += v1;
            v1 = Long.rotateLeft(v1, 17);
            v1 ^= v2;
            v2 = Long.rotateLeft(v2, 32);
        }

        return v0 ^ v1 ^ v2 ^ v3;
    }
}
