package io.switchml.protocol.security;

import io.switchml.protocol.TestSeed;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Checks {@link SipHash24} against the published SipHash-2-4 vectors and against {@link #reference}, an independent
 * byte-at-a-time implementation written from the paper's description.
 */
class SipHash24Test
{
    /** Key 00 01 .. 0f of the published vectors, as its little-endian halves. */
    static final long VECTOR_K0 = 0x0706050403020100L;
    static final long VECTOR_K1 = 0x0f0e0d0c0b0a0908L;

    /**
     * Published outputs (the reference implementation's vectors.h and the paper's appendix A) read as little-endian
     * 64-bit values: index is the message length. Length 0 lists 31 0e 0e dd 47 db 6f 72, length 1 lists
     * fd 67 dc 93 c5 39 f8 74, length 15 is the paper's worked example a129ca6149be45e5, and length 63 lists
     * 72 45 06 eb 4c 32 8a 95.
     */
    private static final int[] PUBLISHED_LENGTHS = { 0, 1, 15, 63 };
    private static final long[] PUBLISHED_OUTPUTS =
        { 0x726fdb47dd0e0e31L, 0x74f839c593dc67fdL, 0xa129ca6149be45e5L, 0x958a324ceb064572L };

    private static final int MAX_OFFSET = 9;

    @Test
    void referenceShouldMatchPublishedVectors()
    {
        final byte[] key = vectorKey();
        for (int i = 0; i < PUBLISHED_LENGTHS.length; i++)
        {
            final int length = PUBLISHED_LENGTHS[i];
            assertEquals(PUBLISHED_OUTPUTS[i], reference(key, vectorMessage(length)), "reference, length " + length);
        }
    }

    @Test
    void shouldMatchPublishedVectors()
    {
        for (int i = 0; i < PUBLISHED_LENGTHS.length; i++)
        {
            final int length = PUBLISHED_LENGTHS[i];
            final byte[] message = vectorMessage(length);
            assertEquals(PUBLISHED_OUTPUTS[i], SipHash24.hash(VECTOR_K0, VECTOR_K1, message, 0, length),
                "byte[], length " + length);
            assertEquals(PUBLISHED_OUTPUTS[i], SipHash24.hash(VECTOR_K0, VECTOR_K1, new UnsafeBuffer(message), 0, length),
                "buffer, length " + length);
        }
    }

    @Test
    void shouldMatchAll64VectorsAtEveryOffsetOfHeapAndDirectBuffers()
    {
        final byte[] key = vectorKey();
        final long[] halves = PacketMac.keyFromBytes(key);
        assertEquals(VECTOR_K0, halves[0]);
        assertEquals(VECTOR_K1, halves[1]);

        final SplittableRandom random = new SplittableRandom(64);
        for (int length = 0; length < 64; length++)
        {
            final byte[] message = vectorMessage(length);
            final long expected = reference(key, message);
            for (int offset = 0; offset <= MAX_OFFSET; offset++)
            {
                final byte[] heap = new byte[offset + length + MAX_OFFSET];
                random.nextBytes(heap);
                System.arraycopy(message, 0, heap, offset, length);
                final UnsafeBuffer direct = new UnsafeBuffer(ByteBuffer.allocateDirect(heap.length));
                direct.putBytes(0, heap);
                final ExpandableArrayBuffer expandable = new ExpandableArrayBuffer(heap.length);
                expandable.putBytes(0, heap);

                final String where = "length " + length + " offset " + offset;
                assertEquals(expected, SipHash24.hash(VECTOR_K0, VECTOR_K1, heap, offset, length), "byte[] " + where);
                assertEquals(expected, SipHash24.hash(VECTOR_K0, VECTOR_K1, new UnsafeBuffer(heap), offset, length),
                    "heap buffer " + where);
                assertEquals(expected, SipHash24.hash(VECTOR_K0, VECTOR_K1, direct, offset, length),
                    "direct buffer " + where);
                assertEquals(expected, SipHash24.hash(VECTOR_K0, VECTOR_K1, expandable, offset, length),
                    "expandable buffer " + where);
            }
        }
    }

    @Test
    void shouldMatchReferenceForRandomKeysAndMessages()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final UnsafeBuffer direct = new UnsafeBuffer(ByteBuffer.allocateDirect(40_000));
        for (int trial = 0; trial < 2_000; trial++)
        {
            final int length = trial < 1_000 ? trial % 300 : random.nextInt(direct.capacity() - MAX_OFFSET);
            final int offset = random.nextInt(MAX_OFFSET + 1);
            final byte[] key = new byte[SipHash24.KEY_LENGTH];
            random.nextBytes(key);
            final byte[] message = new byte[length];
            random.nextBytes(message);
            final long[] k = PacketMac.keyFromBytes(key);
            direct.putBytes(offset, message);

            final long expected = reference(key, message);
            final String where = "trial " + trial + " length " + length + " offset " + offset + ", " +
                TestSeed.describe(seed);
            assertEquals(expected, SipHash24.hash(k[0], k[1], message, 0, length), where);
            assertEquals(expected, SipHash24.hash(k[0], k[1], direct, offset, length), where);
        }
    }

    @Test
    void shouldDependOnEveryKeyBit()
    {
        final byte[] message = vectorMessage(40);
        final long expected = SipHash24.hash(VECTOR_K0, VECTOR_K1, message, 0, message.length);
        for (int bit = 0; bit < 64; bit++)
        {
            assertNotEquals(expected, SipHash24.hash(VECTOR_K0 ^ (1L << bit), VECTOR_K1, message, 0, message.length));
            assertNotEquals(expected, SipHash24.hash(VECTOR_K0, VECTOR_K1 ^ (1L << bit), message, 0, message.length));
        }
    }

    @Test
    void shouldRejectRangesOutsideTheBuffer()
    {
        final byte[] bytes = new byte[16];
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        assertThrows(IndexOutOfBoundsException.class, () -> SipHash24.hash(1, 2, bytes, 1, 16));
        assertThrows(IndexOutOfBoundsException.class, () -> SipHash24.hash(1, 2, bytes, -1, 4));
        assertThrows(IndexOutOfBoundsException.class, () -> SipHash24.hash(1, 2, bytes, 0, -1));
        assertThrows(IndexOutOfBoundsException.class, () -> SipHash24.hash(1, 2, buffer, 1, 16));
        assertThrows(IndexOutOfBoundsException.class, () -> SipHash24.hash(1, 2, buffer, -1, 4));
        assertThrows(IndexOutOfBoundsException.class, () -> SipHash24.hash(1, 2, buffer, 0, -1));
        assertEquals(SipHash24.hash(1, 2, bytes, 16, 0), SipHash24.hash(1, 2, buffer, 16, 0));
    }

    @Test
    void shouldNotAllocate()
    {
        final UnsafeBuffer heap = new UnsafeBuffer(new byte[1064]);
        final UnsafeBuffer direct = new UnsafeBuffer(ByteBuffer.allocateDirect(1064));
        final byte[] array = new byte[1064];
        final long[] sink = new long[1];
        final Runnable burst = () ->
        {
            long h = 0;
            for (int i = 0; i < 10_000; i++)
            {
                final int length = 1 + (i & 1023);
                h += SipHash24.hash(h, i, heap, i & 7, length);
                h += SipHash24.hash(h, i, direct, i & 7, length);
                h += SipHash24.hash(h, i, array, i & 7, length);
            }
            sink[0] += h;
        };

        final Object[] keep = new Object[1];
        assertNotEquals(0, allocatedBytes(() -> keep[0] = new long[128], 1), "the measurement must see allocation");
        assertEquals(0, allocatedBytes(burst, 5), "bytes allocated by 30,000 hash calls after warm-up");
    }

    /**
     * Bytes the current thread allocates while running a task once, after running it {@code warmUps} times, less
     * what the measurement itself allocates.
     */
    static long allocatedBytes(final Runnable task, final int warmUps)
    {
        final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        final long threadId = Thread.currentThread().threadId();
        for (int i = 0; i < warmUps; i++)
        {
            task.run();
        }
        final long baselineStart = threads.getThreadAllocatedBytes(threadId);
        final long baselineEnd = threads.getThreadAllocatedBytes(threadId);
        final long start = threads.getThreadAllocatedBytes(threadId);
        task.run();
        final long end = threads.getThreadAllocatedBytes(threadId);
        return (end - start) - (baselineEnd - baselineStart);
    }

    /** Key 00 01 02 .. 0f of the published vectors. */
    static byte[] vectorKey()
    {
        return vectorMessage(SipHash24.KEY_LENGTH);
    }

    /** Message 00 01 02 .. (length-1) of the published vectors. */
    static byte[] vectorMessage(final int length)
    {
        final byte[] message = new byte[length];
        for (int i = 0; i < length; i++)
        {
            message[i] = (byte)i;
        }
        return message;
    }

    /**
     * SipHash-2-4 written straight from the paper, deliberately unlike {@link SipHash24}: the key and output are
     * handled as bytes, the state lives in an array, and the message is padded as the paper describes (zero bytes up
     * to 7 mod 8, then the length mod 256) and fed one byte at a time, compressing every eighth byte.
     *
     * @param key     16 bytes.
     * @param message any bytes.
     * @return the 8 output bytes read as a little-endian value.
     */
    static long reference(final byte[] key, final byte[] message)
    {
        final long k0 = bytesToLongLittleEndian(key, 0);
        final long k1 = bytesToLongLittleEndian(key, 8);
        final long[] v =
        {
            k0 ^ 0x736f6d6570736575L, // "somepseu"
            k1 ^ 0x646f72616e646f6dL, // "dorandom"
            k0 ^ 0x6c7967656e657261L, // "lygenera"
            k1 ^ 0x7465646279746573L, // "tedbytes"
        };

        final int paddedLength = (message.length / 8 + 1) * 8;
        long word = 0;
        for (int i = 0; i < paddedLength; i++)
        {
            final int b;
            if (i < message.length)
            {
                b = message[i] & 0xFF;
            }
            else if (i < paddedLength - 1)
            {
                b = 0;
            }
            else
            {
                b = message.length & 0xFF;
            }
            word = (word >>> 8) | ((long)b << 56);
            if (i % 8 == 7)
            {
                v[3] ^= word;
                sipRound(v);
                sipRound(v);
                v[0] ^= word;
                word = 0;
            }
        }

        v[2] ^= 0xFF;
        for (int i = 0; i < 4; i++)
        {
            sipRound(v);
        }
        final long out = v[0] ^ v[1] ^ v[2] ^ v[3];

        final byte[] outBytes = new byte[8];
        for (int i = 0; i < 8; i++)
        {
            outBytes[i] = (byte)(out >>> (8 * i));
        }
        return bytesToLongLittleEndian(outBytes, 0);
    }

    private static void sipRound(final long[] v)
    {
        v[0] = v[0] + v[1];
        v[2] = v[2] + v[3];
        v[1] = (v[1] << 13) | (v[1] >>> 51);
        v[3] = (v[3] << 16) | (v[3] >>> 48);
        v[1] = v[1] ^ v[0];
        v[3] = v[3] ^ v[2];
        v[0] = (v[0] << 32) | (v[0] >>> 32);
        v[2] = v[2] + v[1];
        v[0] = v[0] + v[3];
        v[1] = (v[1] << 17) | (v[1] >>> 47);
        v[3] = (v[3] << 21) | (v[3] >>> 43);
        v[1] = v[1] ^ v[2];
        v[3] = v[3] ^ v[0];
        v[2] = (v[2] << 32) | (v[2] >>> 32);
    }

    private static long bytesToLongLittleEndian(final byte[] bytes, final int index)
    {
        long value = 0;
        for (int i = 0; i < 8; i++)
        {
            value |= (bytes[index + i] & 0xFFL) << (8 * i);
        }
        return value;
    }
}
