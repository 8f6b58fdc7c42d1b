package io.switchml.protocol.security;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.TestSeed;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.SplittableRandom;

import static io.switchml.protocol.DataHeaderFlyweight.HEADER_LENGTH;
import static io.switchml.protocol.DataHeaderFlyweight.MAC_OFFSET;
import static io.switchml.protocol.DataHeaderFlyweight.packetLength;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class PacketMacTest
{
    /** Element counts: exponent-only, odd and even lane counts (packet lengths 4 and 0 mod 8), switch, jumbo, demo. */
    private static final int[] ELEMENT_COUNTS = { 0, 1, 2, 3, 5, 7, 16, 33, 64, 255, 256, 2233, 8192 };
    private static final int[] OFFSETS = { 0, 3, 8, 13 };
    /** Packets up to this length get every bit flipped; longer ones every header bit and a sample of the payload. */
    private static final int FLIP_EVERY_BIT_MAX_LENGTH = 1100;
    private static final int SAMPLED_PAYLOAD_BITS = 2_000;

    /** The golden packet of DataHeaderFlyweightTest: every field distinct, a garbage MAC field, 3 lanes. */
    private static final String GOLDEN_HEX =
        "534d0101" + "01020304" + "05060502" + "0a0b0c0d" + "1112131415161718" + "00030000" + "fffd0102" +
        "2122232425262728" + "31323334" + "41424344" + "c1c2c3c4";

    private final DataHeaderFlyweight header = new DataHeaderFlyweight();

    @Test
    void shouldEqualSipHashOverCopyWithZeroMacField()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final int elementCount : ELEMENT_COUNTS)
        {
            for (final int offset : OFFSETS)
            {
                final int length = packetLength(elementCount);
                final UnsafeBuffer buffer = new UnsafeBuffer(new byte[offset + length + 8]);
                writePacket(buffer, offset, elementCount, random);
                final String where = "elements " + elementCount + " offset " + offset + ", " + TestSeed.describe(seed);

                final byte[] copy = new byte[length];
                buffer.getBytes(offset, copy);
                Arrays.fill(copy, MAC_OFFSET, MAC_OFFSET + 8, (byte)0);
                final long k0 = random.nextLong();
                final long k1 = random.nextLong();
                final long expected = SipHash24.hash(k0, k1, copy, 0, length);

                assertEquals(expected, PacketMac.compute(k0, k1, buffer, offset, length), where);
                buffer.putLong(offset + MAC_OFFSET, random.nextLong());
                assertEquals(expected, PacketMac.compute(k0, k1, buffer, offset, length), "MAC field ignored, " + where);
            }
        }
    }

    @Test
    void shouldMatchReferenceOverGoldenPacket()
    {
        final byte[] golden = HexFormat.of().parseHex(GOLDEN_HEX);
        final byte[] zeroed = golden.clone();
        Arrays.fill(zeroed, MAC_OFFSET, MAC_OFFSET + 8, (byte)0);
        final long expected = SipHash24Test.reference(SipHash24Test.vectorKey(), zeroed);

        final UnsafeBuffer buffer = new UnsafeBuffer(golden);
        assertEquals(expected, PacketMac.compute(SipHash24Test.VECTOR_K0, SipHash24Test.VECTOR_K1, buffer, 0, golden.length));
        assertEquals(0x651694c2a0f9b2f5L, expected, "pinned MAC of the golden packet under key 00..0f");

        PacketMac.sign(SipHash24Test.VECTOR_K0, SipHash24Test.VECTOR_K1, buffer, 0, golden.length);
        assertEquals(expected, header.wrap(buffer, 0).mac(), "MAC written big-endian like every header field");
    }

    @Test
    void shouldSignOnlyTheMacFieldAndVerify()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final int elementCount : ELEMENT_COUNTS)
        {
            for (final int offset : OFFSETS)
            {
                final int length = packetLength(elementCount);
                final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(offset + length + 8));
                for (int i = 0; i < buffer.capacity(); i++)
                {
                    buffer.putByte(i, (byte)random.nextInt());
                }
                writePacket(buffer, offset, elementCount, random);
                final byte[] before = new byte[buffer.capacity()];
                buffer.getBytes(0, before);
                final long k0 = random.nextLong();
                final long k1 = random.nextLong();
                final String where = "elements " + elementCount + " offset " + offset + ", " + TestSeed.describe(seed);

                PacketMac.sign(k0, k1, buffer, offset, length);

                final byte[] after = new byte[buffer.capacity()];
                buffer.getBytes(0, after);
                for (int i = 0; i < after.length; i++)
                {
                    if (i < offset + MAC_OFFSET || i >= offset + MAC_OFFSET + 8)
                    {
                        assertEquals(before[i], after[i], "byte " + i + " outside the MAC field changed, " + where);
                    }
                }
                assertEquals(PacketMac.compute(k0, k1, buffer, offset, length), header.wrap(buffer, offset).mac(), where);
                assertEquals(PacketMac.compute(k0, k1, buffer, offset, length),
                    buffer.getLong(offset + MAC_OFFSET, ByteOrder.BIG_ENDIAN), where);
                assertTrue(PacketMac.verify(k0, k1, buffer, offset, length), where);
                assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, offset, length),
                    "test packet is well formed, " + where);
            }
        }
    }

    @Test
    void shouldFailVerifyWhenAnySingleBitIsFlipped()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final int elementCount : ELEMENT_COUNTS)
        {
            final int offset = OFFSETS[random.nextInt(OFFSETS.length)];
            final int length = packetLength(elementCount);
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[offset + length]);
            writePacket(buffer, offset, elementCount, random);
            final long k0 = random.nextLong();
            final long k1 = random.nextLong();
            PacketMac.sign(k0, k1, buffer, offset, length);
            final long mac = PacketMac.compute(k0, k1, buffer, offset, length);
            final String where = "elements " + elementCount + " offset " + offset + ", " + TestSeed.describe(seed);

            if (length <= FLIP_EVERY_BIT_MAX_LENGTH)
            {
                for (int bit = 0; bit < length * 8; bit++)
                {
                    assertFlipFails(buffer, offset, length, k0, k1, mac, bit, where);
                }
            }
            else
            {
                for (int bit = 0; bit < HEADER_LENGTH * 8; bit++)
                {
                    assertFlipFails(buffer, offset, length, k0, k1, mac, bit, where);
                }
                for (int bit = length * 8 - 64; bit < length * 8; bit++)
                {
                    assertFlipFails(buffer, offset, length, k0, k1, mac, bit, where);
                }
                for (int i = 0; i < SAMPLED_PAYLOAD_BITS; i++)
                {
                    final int bit = HEADER_LENGTH * 8 + random.nextInt((length - HEADER_LENGTH) * 8);
                    assertFlipFails(buffer, offset, length, k0, k1, mac, bit, where);
                }
            }
            assertTrue(PacketMac.verify(k0, k1, buffer, offset, length), "every flip was undone, " + where);
        }
    }

    @Test
    void shouldFailVerifyUnderAnyOtherKey()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final int elementCount : new int[]{ 0, 3, 256 })
        {
            final int length = packetLength(elementCount);
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[length]);
            writePacket(buffer, 0, elementCount, random);
            final long k0 = random.nextLong();
            final long k1 = random.nextLong();
            PacketMac.sign(k0, k1, buffer, 0, length);
            assertTrue(PacketMac.verify(k0, k1, buffer, 0, length));

            for (int bit = 0; bit < 64; bit++)
            {
                final String where = "key bit " + bit + " elements " + elementCount + ", " + TestSeed.describe(seed);
                assertFalse(PacketMac.verify(k0 ^ (1L << bit), k1, buffer, 0, length), "k0 " + where);
                assertFalse(PacketMac.verify(k0, k1 ^ (1L << bit), buffer, 0, length), "k1 " + where);
            }
            assertFalse(PacketMac.verify(k1, k0, buffer, 0, length), "swapped halves");
            assertFalse(PacketMac.verify(random.nextLong(), random.nextLong(), buffer, 0, length), "random key");
        }
    }

    @Test
    void shouldFailVerifyWhenPacketIsTruncatedOrExtended()
    {
        final SplittableRandom random = new SplittableRandom(7);
        final int length = packetLength(16);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[length + 8]);
        writePacket(buffer, 0, 16, random);
        PacketMac.sign(1, 2, buffer, 0, length);

        assertTrue(PacketMac.verify(1, 2, buffer, 0, length));
        assertFalse(PacketMac.verify(1, 2, buffer, 0, length - 4), "lane dropped");
        assertFalse(PacketMac.verify(1, 2, buffer, 0, length + 4), "zero lane appended");
        assertFalse(PacketMac.verify(1, 2, buffer, 0, length + 8), "zero word appended");
        assertFalse(PacketMac.verify(1, 2, buffer, 0, HEADER_LENGTH - 1), "shorter than a header");
        assertFalse(PacketMac.verify(1, 2, buffer, 0, length + 9), "beyond the buffer");
        assertFalse(PacketMac.verify(1, 2, buffer, -1, length), "negative offset");
        assertFalse(PacketMac.verify(1, 2, buffer, 0, -1), "negative length");

        assertThrows(IllegalArgumentException.class, () -> PacketMac.compute(1, 2, buffer, 0, HEADER_LENGTH - 1));
        assertThrows(IllegalArgumentException.class, () -> PacketMac.sign(1, 2, buffer, 0, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> PacketMac.compute(1, 2, buffer, 16, length));
        assertThrows(IndexOutOfBoundsException.class, () -> PacketMac.sign(1, 2, buffer, 16, length));
    }

    @Test
    void shouldNotAllocate()
    {
        final SplittableRandom random = new SplittableRandom(11);
        final int length = packetLength(256);
        final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
        writePacket(buffer, 0, 256, random);
        final long[] sink = new long[1];
        final Runnable burst = () ->
        {
            int verified = 0;
            for (int i = 0; i < 10_000; i++)
            {
                PacketMac.sign(i, 42, buffer, 0, length);
                verified += PacketMac.verify(i, 42, buffer, 0, length) ? 1 : 0;
            }
            sink[0] += verified;
        };

        assertEquals(0, SipHash24Test.allocatedBytes(burst, 5), "bytes allocated by 10,000 sign and verify");
        assertEquals(60_000, sink[0]);
    }

    @Test
    void shouldSplitKeyIntoLittleEndianHalves()
    {
        final long[] k = PacketMac.keyFromBytes(SipHash24Test.vectorKey());
        assertArrayEquals(new long[]{ 0x0706050403020100L, 0x0f0e0d0c0b0a0908L }, k);

        final byte[] key = HexFormat.of().parseHex("ff000000000000800100000000000000");
        assertArrayEquals(new long[]{ 0x80000000000000ffL, 1L }, PacketMac.keyFromBytes(key));

        assertThrows(IllegalArgumentException.class, () -> PacketMac.keyFromBytes(new byte[15]));
        assertThrows(IllegalArgumentException.class, () -> PacketMac.keyFromBytes(null));
    }

    @Test
    void shouldMakeRandomKeys()
    {
        final SecureRandom random = new SecureRandom();
        final byte[] a = PacketMac.randomKey(random);
        final byte[] b = PacketMac.randomKey(random);
        assertEquals(SipHash24.KEY_LENGTH, a.length);
        assertEquals(SipHash24.KEY_LENGTH, b.length);
        assertFalse(Arrays.equals(a, b), "two random 128-bit keys are distinct");
        assertArrayEquals(a, PacketMac.fromHex(PacketMac.toHex(a)));
    }

    @Test
    void shouldEncodeAndDecodeHexKeys()
    {
        assertEquals("000102030405060708090a0b0c0d0e0f", PacketMac.toHex(SipHash24Test.vectorKey()));
        assertArrayEquals(SipHash24Test.vectorKey(), PacketMac.fromHex("000102030405060708090a0b0c0d0e0f"));
        assertArrayEquals(HexFormat.of().parseHex("abcdef0123456789abcdef0123456789"),
            PacketMac.fromHex("ABCDEF0123456789abcdef0123456789"));

        final SplittableRandom random = new SplittableRandom(3);
        for (int i = 0; i < 100; i++)
        {
            final byte[] key = new byte[SipHash24.KEY_LENGTH];
            random.nextBytes(key);
            final String hex = PacketMac.toHex(key);
            assertEquals(HexFormat.of().formatHex(key), hex);
            assertArrayEquals(key, PacketMac.fromHex(hex));
        }

        assertThrows(IllegalArgumentException.class, () -> PacketMac.toHex(new byte[17]));
        assertThrows(IllegalArgumentException.class, () -> PacketMac.toHex(null));
    }

    @Test
    void shouldRejectBadHexKeysNamingTheProblem()
    {
        final String good = "000102030405060708090a0b0c0d0e0f";
        assertMessageContains(null, "missing");
        assertMessageContains("", "got 0 characters");
        assertMessageContains(good.substring(1), "got 31 characters");
        assertMessageContains(good + "0", "got 33 characters");
        assertMessageContains(" " + good.substring(1), "index 0");
        assertMessageContains(good.substring(0, 5) + "g" + good.substring(6), "index 5: 'g'");
        assertMessageContains("0x" + good.substring(2), "index 1: 'x'");
        assertMessageContains(good.substring(0, 31) + "\uff11", "index 31"); // fullwidth digit one
        assertMessageContains(good.substring(0, 10) + "-" + good.substring(11), "not a hex digit");
    }

    private static void assertMessageContains(final String hex, final String expected)
    {
        final IllegalArgumentException ex = assertThrows(IllegalArgumentException.class, () -> PacketMac.fromHex(hex));
        assertTrue(ex.getMessage().contains(expected), () -> "'" + ex.getMessage() + "' should contain '" + expected + "'");
    }

    /**
     * Flip one bit of the packet, check the MAC no longer verifies, then flip it back. A bit inside the MAC field
     * leaves the computed MAC unchanged (the field is hashed as zero) yet still fails, because the stored tag changed.
     */
    private static void assertFlipFails(
        final UnsafeBuffer buffer,
        final int offset,
        final int length,
        final long k0,
        final long k1,
        final long mac,
        final int bit,
        final String where)
    {
        final int index = offset + (bit >>> 3);
        final byte original = buffer.getByte(index);
        buffer.putByte(index, (byte)(original ^ (1 << (bit & 7))));
        try
        {
            assertFalse(PacketMac.verify(k0, k1, buffer, offset, length), () -> "flipped bit " + bit + ", " + where);
            final boolean inMacField = (bit >>> 3) >= MAC_OFFSET && (bit >>> 3) < MAC_OFFSET + 8;
            if (inMacField)
            {
                assertEquals(mac, PacketMac.compute(k0, k1, buffer, offset, length), () -> "MAC bit " + bit + ", " + where);
            }
        }
        finally
        {
            buffer.putByte(index, original);
        }
    }

    /**
     * Write a well-formed packet with random header fields and lanes and a random (stale) MAC field.
     */
    private void writePacket(
        final MutableDirectBuffer buffer, final int offset, final int elementCount, final SplittableRandom random)
    {
        final boolean exponentOnly = elementCount == 0;
        final int flags = (exponentOnly ? DataHeaderFlyweight.FLAG_EXPONENT_ONLY : 0) |
            random.nextInt(2) * DataHeaderFlyweight.FLAG_POOL_VERSION |
            random.nextInt(2) * DataHeaderFlyweight.FLAG_RETRANSMIT;
        header.wrap(buffer, offset).writeHeader(
            random.nextBoolean() ? DataHeaderFlyweight.TYPE_UPDATE : DataHeaderFlyweight.TYPE_RESULT,
            random.nextInt(),
            random.nextInt(DataHeaderFlyweight.MAX_WORKERS),
            flags,
            ElementType.FLOAT32,
            random.nextInt(Integer.MAX_VALUE),
            random.nextLong(Long.MAX_VALUE),
            elementCount,
            random.nextInt(-126, 129),
            random.nextInt(-126, 129));
        header.mac(random.nextLong());
        for (int i = 0; i < elementCount; i++)
        {
            header.lane(i, random.nextInt());
        }
    }
}
