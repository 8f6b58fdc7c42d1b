package io.switchml.protocol;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.SplittableRandom;
import java.util.function.Consumer;

import static io.switchml.protocol.DataHeaderFlyweight.*;
import static java.nio.ByteOrder.BIG_ENDIAN;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DataHeaderFlyweightTest
{
    private static final int FLAGS_VERSION_RETRANSMIT = FLAG_POOL_VERSION | FLAG_RETRANSMIT;

    /**
     * The javadoc diagram, byte by byte: the header of {@link #writeGoldenPacket} and its 3 lanes. Every field holds
     * distinct bytes so that a shifted offset shows; the packet pins the layout only and is never validated (its rank
     * 0x0506 and look-ahead exponent 0x0102 are out of range).
     */
    private static final String GOLDEN_HEX =
        "534d" + "01" + "01" +          // magic, version, type UPDATE
        "01020304" +                    // job id
        "0506" + "05" + "02" +          // worker rank, flags (pool version | retransmit), element type FLOAT32
        "0a0b0c0d" +                    // slot index
        "1112131415161718" +            // chunk sequence number
        "0003" + "0000" +               // element count, check and check complement (zero: no check)
        "fffd" + "0102" +               // scale exponent -3, look-ahead exponent (layout only: out of range)
        "2122232425262728" +            // MAC
        "31323334" + "41424344" + "c1c2c3c4"; // lanes

    private static final int[] GOLDEN_LANES = { 0x31323334, 0x41424344, 0xC1C2C3C4 };

    private final DataHeaderFlyweight header = new DataHeaderFlyweight();

    @Test
    void shouldWriteGoldenBytesMatchingTheDiagram()
    {
        final int offset = 8;
        final byte[] bytes = new byte[offset + GOLDEN_HEX.length() / 2 + 8];
        Arrays.fill(bytes, (byte)0xEE); // dirty: reserved and MAC must be written, not assumed zero
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);

        writeGoldenPacket(buffer, offset);

        final byte[] expected = HexFormat.of().parseHex(GOLDEN_HEX);
        assertArrayEquals(expected, Arrays.copyOfRange(bytes, offset, offset + expected.length),
            () -> "got " + HexFormat.of().formatHex(bytes, offset, offset + expected.length));
        for (int i = 0; i < offset; i++)
        {
            assertEquals((byte)0xEE, bytes[i], "byte before the header was touched at " + i);
        }
        for (int i = offset + expected.length; i < bytes.length; i++)
        {
            assertEquals((byte)0xEE, bytes[i], "byte after the payload was touched at " + i);
        }
        assertEquals(expected.length, packetLength(3));
    }

    @Test
    void shouldReadGoldenBytesBackThroughGetters()
    {
        final byte[] golden = HexFormat.of().parseHex(GOLDEN_HEX);
        final int offset = 5;
        final byte[] bytes = new byte[offset + golden.length];
        System.arraycopy(golden, 0, bytes, offset, golden.length);
        header.wrap(new UnsafeBuffer(bytes), offset);

        assertEquals(offset, header.offset());
        assertEquals(TYPE_UPDATE, header.type());
        assertEquals(0x01020304, header.jobId());
        assertEquals(0x0506, header.workerRank());
        assertEquals(FLAGS_VERSION_RETRANSMIT, header.flags());
        assertEquals(1, header.poolVersion());
        assertFalse(header.isExponentOnly());
        assertEquals(ElementType.FLOAT32, header.elementType());
        assertEquals(0x0A0B0C0D, header.slotIndex());
        assertEquals(0x1112131415161718L, header.chunkSequence());
        assertEquals(3, header.elementCount());
        assertEquals((short)-3, header.scaleExponent());
        assertEquals((short)0x0102, header.lookaheadExponent());
        assertEquals(0x2122232425262728L, header.mac());
        assertEquals(0, header.tensorCheck());
        for (int i = 0; i < GOLDEN_LANES.length; i++)
        {
            assertEquals(GOLDEN_LANES[i], header.lane(i), "lane " + i);
        }
    }

    @Test
    void shouldReadUnsignedRankAndCountAndSignedExponents()
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[HEADER_LENGTH]);
        header.wrap(buffer, 0).writeHeader(
            TYPE_RESULT, -1, 0xFFFF, 0xFF, ElementType.INT32, -1, -1L, 0xFFFF, NO_EXPONENT, 0x7FFF);

        assertEquals(-1, header.jobId());
        assertEquals(0xFFFF, header.workerRank());
        assertEquals(0xFF, header.flags());
        assertEquals(1, header.poolVersion());
        assertTrue(header.isExponentOnly());
        assertEquals(0xFFFF, header.elementCount());
        assertEquals(NO_EXPONENT, header.scaleExponent());
        assertEquals(Short.MAX_VALUE, header.lookaheadExponent());
        assertEquals(0L, header.mac());
    }

    @Test
    void eachSetterShouldWriteOnlyItsOwnField()
    {
        assertSetterWrites(h -> h.type(TYPE_RESULT), TYPE_OFFSET, "02");
        assertSetterWrites(h -> h.jobId(0x7A7B7C7D), JOB_ID_OFFSET, "7a7b7c7d");
        assertSetterWrites(h -> h.workerRank(0xFE), WORKER_RANK_OFFSET, "00fe");
        assertSetterWrites(h -> h.flags(FLAG_EXPONENT_ONLY), FLAGS_OFFSET, "02");
        assertSetterWrites(h -> h.slotIndex(0x7F000001), SLOT_INDEX_OFFSET, "7f000001");
        assertSetterWrites(h -> h.scaleExponent(-126), SCALE_EXPONENT_OFFSET, "ff82");
        assertSetterWrites(h -> h.lookaheadExponent(128), LOOKAHEAD_EXPONENT_OFFSET, "0080");
        assertSetterWrites(h -> h.mac(0x0123456789ABCDEFL), MAC_OFFSET, "0123456789abcdef");
        assertSetterWrites(h -> h.tensorCheck(0xA15E), TENSOR_CHECK_OFFSET, "a15e");
        assertSetterWrites(h -> h.halfLane(1, (short)0xBEEF), PAYLOAD_OFFSET + 2, "beef");
        assertSetterWrites(h -> h.lane(1, -2), PAYLOAD_OFFSET + LANE_BYTES, "fffffffe");
    }

    @Test
    void shouldAcceptWellFormedPackets()
    {
        assertEquals(DropReason.NONE, validateGood(3));
        assertEquals(DropReason.NONE, validateGood(1));
        assertEquals(DropReason.NONE, validateGood(MAX_ELEMENTS));

        final UnsafeBuffer exponentOnly = goodPacket(0, 0);
        header.wrap(exponentOnly, 0).flags(FLAG_EXPONENT_ONLY | FLAG_POOL_VERSION);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(exponentOnly, 0, HEADER_LENGTH));

        final int offset = 13;
        final UnsafeBuffer atOffset = goodPacket(offset, 5);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(atOffset, offset, packetLength(5)));

        final UnsafeBuffer result = goodPacket(0, 2);
        header.wrap(result, 0).type(TYPE_RESULT).workerRank(MAX_WORKERS - 1);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(result, 0, packetLength(2)));

        final UnsafeBuffer int32 = goodPacket(0, 2);
        int32.putByte(ELEMENT_TYPE_OFFSET, ElementType.INT32);
        header.wrap(int32, 0).scaleExponent(NO_EXPONENT).lookaheadExponent(NO_EXPONENT);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(int32, 0, packetLength(2)));

        final UnsafeBuffer int32Good = goodInt32Packet(0, 4);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(int32Good, 0, packetLength(4)));

        final UnsafeBuffer int32ExponentOnly = goodInt32Packet(0, 0);
        header.wrap(int32ExponentOnly, 0).flags(FLAG_EXPONENT_ONLY);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(int32ExponentOnly, 0, HEADER_LENGTH));
    }

    @Test
    void shouldRejectOutOfRangeExponents()
    {
        // just outside [MIN_EXPONENT, MAX_EXPONENT], in either field
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, (short)129, BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, (short)-127, BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(LOOKAHEAD_EXPONENT_OFFSET, (short)129, BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(LOOKAHEAD_EXPONENT_OFFSET, (short)-127, BIG_ENDIAN));
        // far outside, and the neighbours of NO_EXPONENT
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(LOOKAHEAD_EXPONENT_OFFSET, (short)0x7FFD, BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, (short)0x7FFF, BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, (short)(NO_EXPONENT + 1), BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3,
            b -> b.putShort(LOOKAHEAD_EXPONENT_OFFSET, (short)(NO_EXPONENT + 1), BIG_ENDIAN));
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, (short)0x0102, BIG_ENDIAN));
        // an exponent-only packet carries exponents too
        final UnsafeBuffer exponentOnly = goodPacket(0, 0);
        header.wrap(exponentOnly, 0).flags(FLAG_EXPONENT_ONLY).lookaheadExponent(MAX_EXPONENT + 1);
        assertEquals(DropReason.BAD_EXPONENT, DataHeaderFlyweight.validate(exponentOnly, 0, HEADER_LENGTH));

        // integer data carries no exponent at all
        assertInt32Drop(h -> h.scaleExponent(0));
        assertInt32Drop(h -> h.lookaheadExponent(0));
        assertInt32Drop(h -> h.scaleExponent(MIN_EXPONENT));
        assertInt32Drop(h -> h.lookaheadExponent(MAX_EXPONENT));
        assertInt32Drop(h -> h.scaleExponent(-3).lookaheadExponent(5));
        assertInt32Drop(h -> h.lookaheadExponent(UNKNOWN_EXPONENT));
        final UnsafeBuffer float32Headed = goodPacket(0, 3);
        float32Headed.putByte(ELEMENT_TYPE_OFFSET, ElementType.INT32);
        assertEquals(DropReason.BAD_EXPONENT, DataHeaderFlyweight.validate(float32Headed, 0, packetLength(3)),
            "a float32 header with exponents relabelled as int32");

        // the boundaries and NO_EXPONENT are accepted in either field, alone or together
        for (final int exponent : new int[]{ MIN_EXPONENT, MIN_EXPONENT + 1, -1, 0, 1, MAX_EXPONENT - 1, MAX_EXPONENT,
            NO_EXPONENT })
        {
            assertAccepted(3, h -> h.scaleExponent(exponent), "scale exponent " + exponent);
            assertAccepted(3, h -> h.lookaheadExponent(exponent), "look-ahead exponent " + exponent);
            assertAccepted(3, h -> h.scaleExponent(exponent).lookaheadExponent(exponent), "both exponents " + exponent);
            assertAccepted(0, h -> h.flags(FLAG_EXPONENT_ONLY).scaleExponent(NO_EXPONENT).lookaheadExponent(exponent),
                "exponent-only packet with look-ahead exponent " + exponent);
        }

        // UNKNOWN_EXPONENT (the stream ran dry) is a look-ahead value only
        assertAccepted(3, h -> h.lookaheadExponent(UNKNOWN_EXPONENT), "unknown look-ahead");
        assertAccepted(0, h -> h.flags(FLAG_EXPONENT_ONLY).scaleExponent(NO_EXPONENT).lookaheadExponent(UNKNOWN_EXPONENT),
            "exponent-only packet with unknown look-ahead");
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, UNKNOWN_EXPONENT, BIG_ENDIAN));

        // NON_FINITE_EXPONENT (the sender's next chunk holds a NaN or an infinity) is a look-ahead value only, of floats
        assertTrue(NON_FINITE_EXPONENT > MAX_EXPONENT && NON_FINITE_EXPONENT < UNKNOWN_EXPONENT,
            "above every block exponent, so it wins their maximum; below UNKNOWN, so an exponent round resolves it");
        assertAccepted(3, h -> h.lookaheadExponent(NON_FINITE_EXPONENT), "non-finite look-ahead");
        assertAccepted(0, h -> h.flags(FLAG_EXPONENT_ONLY).scaleExponent(NO_EXPONENT).lookaheadExponent(NON_FINITE_EXPONENT),
            "exponent-only packet with a non-finite look-ahead");
        assertDrop(DropReason.BAD_EXPONENT, 3, b -> b.putShort(SCALE_EXPONENT_OFFSET, NON_FINITE_EXPONENT, BIG_ENDIAN));
        assertInt32Drop(h -> h.lookaheadExponent(NON_FINITE_EXPONENT));

        assertTrue(isValidExponent(MIN_EXPONENT));
        assertTrue(isValidExponent(MAX_EXPONENT));
        assertTrue(isValidExponent(NO_EXPONENT));
        assertFalse(isValidExponent((short)(MIN_EXPONENT - 1)));
        assertFalse(isValidExponent((short)(MAX_EXPONENT + 1)));
        assertFalse(isValidExponent((short)(NO_EXPONENT + 1)));
        assertFalse(isValidExponent(Short.MAX_VALUE));
        for (int value = Short.MIN_VALUE; value <= Short.MAX_VALUE; value++)
        {
            assertEquals(expectedValidExponent((short)value), isValidExponent((short)value), "exponent " + value);
        }
    }

    @Test
    void shouldRejectTruncatedPackets()
    {
        final UnsafeBuffer buffer = goodPacket(0, 0);
        header.wrap(buffer, 0).flags(FLAG_EXPONENT_ONLY);
        for (int length = -1; length < HEADER_LENGTH; length++)
        {
            assertEquals(DropReason.TRUNCATED, DataHeaderFlyweight.validate(buffer, 0, length), "length " + length);
        }

        final UnsafeBuffer shortBuffer = new UnsafeBuffer(new byte[packetLength(3) - 1]);
        final UnsafeBuffer full = goodPacket(0, 3);
        shortBuffer.putBytes(0, full, 0, shortBuffer.capacity());
        assertEquals(DropReason.TRUNCATED, DataHeaderFlyweight.validate(shortBuffer, 0, packetLength(3)),
            "buffer shorter than the claimed length");

        final UnsafeBuffer atOffset = goodPacket(7, 3);
        assertEquals(DropReason.TRUNCATED, DataHeaderFlyweight.validate(atOffset, 8, packetLength(3)),
            "claimed length runs past the end of the buffer from the offset");
        assertEquals(DropReason.TRUNCATED, DataHeaderFlyweight.validate(atOffset, atOffset.capacity() + 1, HEADER_LENGTH),
            "offset past the end of the buffer");
    }

    @Test
    void probesNacksAndPendingsAreHeaderOnly()
    {
        for (final byte type : new byte[]{
            DataHeaderFlyweight.TYPE_PROBE, DataHeaderFlyweight.TYPE_NACK, DataHeaderFlyweight.TYPE_PENDING })
        {
            final UnsafeBuffer buffer = goodPacket(0, 3);
            buffer.putByte(TYPE_OFFSET, type);
            buffer.putShort(ELEMENT_COUNT_OFFSET, (short)0, BIG_ENDIAN);
            assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, HEADER_LENGTH), "type " + type);
            assertEquals(DropReason.LENGTH_MISMATCH, DataHeaderFlyweight.validate(buffer, 0, HEADER_LENGTH + 4),
                "type " + type + " with trailing bytes");
        }
    }

    @Test
    void shouldRejectEachMalformedField()
    {
        assertDrop(DropReason.BAD_MAGIC, 3, b -> b.putShort(MAGIC_OFFSET, (short)0x534E, BIG_ENDIAN));
        assertDrop(DropReason.BAD_MAGIC, 3, b -> b.putShort(MAGIC_OFFSET, (short)0x4D53, BIG_ENDIAN));
        assertDrop(DropReason.BAD_VERSION, 3, b -> b.putByte(VERSION_OFFSET, (byte)0));
        assertDrop(DropReason.BAD_VERSION, 3, b -> b.putByte(VERSION_OFFSET, (byte)2));
        assertDrop(DropReason.BAD_TYPE, 3, b -> b.putByte(TYPE_OFFSET, (byte)0));
        assertDrop(DropReason.BAD_TYPE, 3, b -> b.putByte(TYPE_OFFSET, (byte)6));
        // probes, NACKs and PENDINGs are header-only: with a payload they are malformed
        assertDrop(DropReason.BAD_ELEMENT_COUNT, 3, b -> b.putByte(TYPE_OFFSET, DataHeaderFlyweight.TYPE_PROBE));
        assertDrop(DropReason.BAD_ELEMENT_COUNT, 3, b -> b.putByte(TYPE_OFFSET, DataHeaderFlyweight.TYPE_NACK));
        assertDrop(DropReason.BAD_ELEMENT_COUNT, 3, b -> b.putByte(TYPE_OFFSET, DataHeaderFlyweight.TYPE_PENDING));
        assertDrop(DropReason.BAD_TYPE, 3, b -> b.putByte(TYPE_OFFSET, (byte)0x81));
        for (int bit = 3; bit < 8; bit++)
        {
            final int flag = 1 << bit;
            assertDrop(DropReason.BAD_FLAGS, 3, b -> b.putByte(FLAGS_OFFSET, (byte)(FLAG_POOL_VERSION | flag)));
        }
        assertDrop(DropReason.BAD_RANK, 3, b -> b.putShort(WORKER_RANK_OFFSET, (short)MAX_WORKERS, BIG_ENDIAN));
        assertDrop(DropReason.BAD_RANK, 3, b -> b.putShort(WORKER_RANK_OFFSET, (short)0xFFFF, BIG_ENDIAN));
        assertDrop(DropReason.BAD_ELEMENT_TYPE, 3, b -> b.putByte(ELEMENT_TYPE_OFFSET, (byte)0));
        assertDrop(DropReason.BAD_ELEMENT_TYPE, 3, b -> b.putByte(ELEMENT_TYPE_OFFSET, (byte)5));
        assertDrop(DropReason.BAD_ELEMENT_TYPE, 3, b -> b.putByte(ELEMENT_TYPE_OFFSET, (byte)-1));
        assertDrop(DropReason.BAD_SLOT, 3, b -> b.putInt(SLOT_INDEX_OFFSET, -1, BIG_ENDIAN));
        assertDrop(DropReason.BAD_SLOT, 3, b -> b.putInt(SLOT_INDEX_OFFSET, Integer.MIN_VALUE, BIG_ENDIAN));
        assertDrop(DropReason.BAD_SLOT, 3, b -> b.putLong(CHUNK_SEQUENCE_OFFSET, -1L, BIG_ENDIAN));
        assertDrop(DropReason.BAD_SLOT, 3, b -> b.putLong(CHUNK_SEQUENCE_OFFSET, Long.MIN_VALUE, BIG_ENDIAN));
    }

    @Test
    void shouldRejectBadElementCounts()
    {
        final UnsafeBuffer zeroCount = goodPacket(0, 0);
        assertEquals(DropReason.BAD_ELEMENT_COUNT, DataHeaderFlyweight.validate(zeroCount, 0, HEADER_LENGTH),
            "count 0 without the exponent-only flag");

        final UnsafeBuffer exponentOnlyWithLanes = goodPacket(0, 1);
        header.wrap(exponentOnlyWithLanes, 0).flags(FLAG_EXPONENT_ONLY);
        assertEquals(DropReason.BAD_ELEMENT_COUNT, DataHeaderFlyweight.validate(exponentOnlyWithLanes, 0, packetLength(1)),
            "exponent-only flag with count 1");

        final int tooMany = MAX_ELEMENTS + 1;
        final UnsafeBuffer oversized = goodPacket(0, tooMany);
        assertEquals(DropReason.BAD_ELEMENT_COUNT, DataHeaderFlyweight.validate(oversized, 0, packetLength(tooMany)),
            "count MAX_ELEMENTS + 1 with a consistent length");

        final UnsafeBuffer maxField = goodPacket(0, 3);
        maxField.putShort(ELEMENT_COUNT_OFFSET, (short)0xFFFF, BIG_ENDIAN);
        assertEquals(DropReason.BAD_ELEMENT_COUNT, DataHeaderFlyweight.validate(maxField, 0, packetLength(3)),
            "count 0xFFFF");
    }

    @Test
    void shouldRejectLengthNotMatchingElementCount()
    {
        final int count = 3;
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[packetLength(count) + 64]);
        writeGoodHeader(buffer, 0, count);
        for (final int length : new int[]{ packetLength(count) + 1, packetLength(count) + 4, packetLength(count) + 64,
            packetLength(count) - 1, packetLength(count) - 4, HEADER_LENGTH })
        {
            assertEquals(DropReason.LENGTH_MISMATCH, DataHeaderFlyweight.validate(buffer, 0, length), "length " + length);
        }

        final UnsafeBuffer exponentOnly = new UnsafeBuffer(new byte[HEADER_LENGTH + 4]);
        writeGoodHeader(exponentOnly, 0, 0);
        header.wrap(exponentOnly, 0).flags(FLAG_EXPONENT_ONLY);
        assertEquals(DropReason.LENGTH_MISMATCH, DataHeaderFlyweight.validate(exponentOnly, 0, HEADER_LENGTH + 4),
            "exponent-only packet with a payload");
    }

    @Test
    void packetSizeConstantsShouldFitTheirFrames()
    {
        final int jumboUdpPayload = 9000 - 20 - 8;
        assertTrue(packetLength(MAX_ELEMENTS_JUMBO) <= jumboUdpPayload);
        assertTrue(packetLength(MAX_ELEMENTS_JUMBO + 1) > jumboUdpPayload, "jumbo count is the largest that fits");

        final int standardUdpPayload = 1500 - 20 - 8;
        assertTrue(packetLength(MAX_ELEMENTS_STANDARD) <= standardUdpPayload);
        assertTrue(packetLength(MAX_ELEMENTS_STANDARD + 1) > standardUdpPayload, "standard count is the largest that fits");

        assertEquals(65_507, MAX_UDP_PAYLOAD);
        assertTrue(packetLength(MAX_ELEMENTS) <= MAX_UDP_PAYLOAD);
        assertTrue(packetLength(MAX_ELEMENTS + 1) > MAX_UDP_PAYLOAD, "MAX_ELEMENTS is the largest that fits");
        assertTrue(MAX_ELEMENTS <= 0xFFFF, "the element count field is 16 bits");
        assertTrue(MAX_WORKERS <= 0xFFFF + 1, "the rank field is 16 bits");

        assertEquals(40, HEADER_LENGTH);
        assertEquals(HEADER_LENGTH, PAYLOAD_OFFSET);
        assertEquals(HEADER_LENGTH, MAC_OFFSET + Long.BYTES);
    }

    @Test
    void sixteenBitTypesCarryTwoBytesPerLaneWithoutPadding()
    {
        for (final byte type : new byte[]{ ElementType.FLOAT16, ElementType.BFLOAT16 })
        {
            for (final int count : new int[]{ 1, 2, 3, 4, MAX_ELEMENTS })
            {
                assertEquals(HEADER_LENGTH + 2 * count, packetLength(type, count));
                final UnsafeBuffer buffer = new UnsafeBuffer(new byte[packetLength(count)]);
                header.wrap(buffer, 0).writeHeader(TYPE_UPDATE, 7, 3, 0, type, 11, 42L, count, -3, 5, tensorCheckOf(9));
                assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, packetLength(type, count)),
                    ElementType.name(type) + " count " + count);
                assertEquals(DropReason.LENGTH_MISMATCH, DataHeaderFlyweight.validate(buffer, 0, packetLength(count)),
                    ElementType.name(type) + " count " + count + " with 4-byte lanes");
                assertEquals(DropReason.LENGTH_MISMATCH,
                    DataHeaderFlyweight.validate(buffer, 0, packetLength(type, count) + 2),
                    ElementType.name(type) + " count " + count + " padded");
            }
            final UnsafeBuffer exponentOnly = new UnsafeBuffer(new byte[HEADER_LENGTH]);
            header.wrap(exponentOnly, 0).writeHeader(
                TYPE_UPDATE, 7, 3, FLAG_EXPONENT_ONLY, type, 11, 42L, 0, NO_EXPONENT, 5, tensorCheckOf(9));
            assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(exponentOnly, 0, HEADER_LENGTH));
        }
        assertEquals(packetLength(3), packetLength(ElementType.FLOAT32, 3));
        assertEquals(packetLength(3), packetLength(ElementType.INT32, 3));
    }

    @Test
    void tensorCheckShowsDisagreementInTheByteWiseMaximum()
    {
        for (int digest = 0; digest < 256; digest++)
        {
            final int check = tensorCheckOf(digest);
            assertEquals(digest, check >>> 8);
            assertEquals(255 - digest, check & 0xFF);
            assertEquals(check, combineTensorChecks(check, check), "agreeing contributions keep the check");
            assertEquals(check, tensorCheckOf(digest + 256), "only the low 8 bits count");
            for (int other = 0; other < 256; other++)
            {
                final int combined = combineTensorChecks(check, tensorCheckOf(other));
                assertEquals(Math.max(digest, other), combined >>> 8);
                assertEquals(255 - Math.min(digest, other), combined & 0xFF);
                if (other != digest)
                {
                    assertTrue(combined != check && combined != tensorCheckOf(other),
                        "a disagreement is visible to both sides: " + digest + " vs " + other);
                }
            }
        }
        final UnsafeBuffer buffer = goodPacket(0, 3);
        header.wrap(buffer, 0).tensorCheck(0xFFFF);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, packetLength(3)), "the check is not validated");
        assertEquals(0xFFFF, header.tensorCheck());
    }

    @Test
    void validateShouldNeverThrowOnRandomBytes()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final byte[] bytes = new byte[256];
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        final UnsafeBuffer window = new UnsafeBuffer(bytes);
        int accepted = 0;
        for (int iteration = 0; iteration < 20_000; iteration++)
        {
            random.nextBytes(bytes);
            final int capacity = random.nextInt(bytes.length + 1);
            window.wrap(bytes, 0, capacity);
            final int offset = random.nextInt(capacity + 2);
            int length = random.nextInt(-4, capacity - Math.min(offset, capacity) + 8);
            if (random.nextBoolean() && offset + HEADER_LENGTH <= capacity)
            {
                // give the deeper checks a chance: a plausible header, each field still sometimes random
                final int count = random.nextInt((capacity - offset - HEADER_LENGTH) / LANE_BYTES + 1);
                final int flags = (random.nextInt(8) & ~FLAG_EXPONENT_ONLY) | (0 == count ? FLAG_EXPONENT_ONLY : 0);
                buffer.putShort(offset + MAGIC_OFFSET, MAGIC, BIG_ENDIAN);
                buffer.putByte(offset + VERSION_OFFSET, CURRENT_VERSION);
                buffer.putByte(offset + TYPE_OFFSET, (byte)(TYPE_UPDATE + random.nextInt(4)));  // update, result, probe, NACK
                buffer.putByte(offset + FLAGS_OFFSET, (byte)(random.nextInt(16) == 0 ? random.nextInt(256) : flags));
                buffer.putShort(offset + TENSOR_CHECK_OFFSET, (short)random.nextInt(), BIG_ENDIAN);
                buffer.putByte(offset + WORKER_RANK_OFFSET, (byte)(random.nextInt(16) == 0 ? random.nextInt(256) : 0));
                final byte elementType = (byte)random.nextInt(6);
                buffer.putByte(offset + ELEMENT_TYPE_OFFSET, elementType);
                buffer.putShort(offset + ELEMENT_COUNT_OFFSET, (short)count, BIG_ENDIAN);
                buffer.putShort(offset + SCALE_EXPONENT_OFFSET, plausibleExponent(random, elementType), BIG_ENDIAN);
                buffer.putShort(offset + LOOKAHEAD_EXPONENT_OFFSET, plausibleExponent(random, elementType), BIG_ENDIAN);
                buffer.putByte(offset + SLOT_INDEX_OFFSET, (byte)(random.nextInt(16) == 0 ? 0x80 : random.nextInt(128)));
                buffer.putByte(offset + CHUNK_SEQUENCE_OFFSET, (byte)(random.nextInt(16) == 0 ? 0x80 : random.nextInt(128)));
                if (random.nextInt(4) != 0)
                {
                    length = ElementType.isValid(elementType) ? packetLength(elementType, count) : packetLength(count);
                }
            }
            if (checkValidateInvariants(window, offset, length, seed, "iteration " + iteration) == DropReason.NONE)
            {
                accepted++;
            }
        }
        final int acceptedCount = accepted;
        assertTrue(acceptedCount >= 100,
            () -> "the fuzz reached only " + acceptedCount + " accepted packets; " + TestSeed.describe(seed));
    }

    @Test
    void validateShouldNeverThrowOnMutatedOrTruncatedPackets()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        for (int iteration = 0; iteration < 20_000; iteration++)
        {
            final int count = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(32);
            final int offset = random.nextInt(5);
            final int slack = random.nextInt(5);
            final boolean int32 = random.nextInt(4) == 0;
            final byte[] bytes = new byte[offset + packetLength(count) + slack];
            final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
            if (int32)
            {
                writeGoodInt32Header(buffer, offset, count);
            }
            else
            {
                writeGoodHeader(buffer, offset, count);
            }
            if (0 == count)
            {
                header.wrap(buffer, offset).flags(FLAG_EXPONENT_ONLY);
            }
            for (int i = 0; i < count; i++)
            {
                header.lane(i, random.nextInt());
            }
            final String context = "iteration " + iteration + " count " + count + " offset " + offset
                + (int32 ? " int32" : " float32");
            assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, offset, packetLength(count)),
                () -> context + " unmutated; " + TestSeed.describe(seed));

            int length = packetLength(count);
            final int mutations = 1 + random.nextInt(3);
            boolean freeFieldsOnly = true;
            boolean freeOrExponentFieldsOnly = true;
            for (int m = 0; m < mutations; m++)
            {
                switch (random.nextInt(4))
                {
                    case 0, 1 ->
                    {
                        final int position = random.nextInt(bytes.length - offset);
                        bytes[offset + position] = (byte)random.nextInt(256);
                        freeFieldsOnly &= isFreeField(position);
                        freeOrExponentFieldsOnly &= isFreeField(position) || isExponentField(position);
                    }
                    case 2 ->
                    {
                        // a whole exponent field, often a boundary or just past one
                        final int position = random.nextBoolean() ? SCALE_EXPONENT_OFFSET : LOOKAHEAD_EXPONENT_OFFSET;
                        buffer.putShort(offset + position, interestingExponent(random), BIG_ENDIAN);
                        freeFieldsOnly = false;
                    }
                    default ->
                    {
                        length = random.nextInt(-1, bytes.length - offset + 3);
                        freeFieldsOnly &= length == packetLength(count);
                        freeOrExponentFieldsOnly &= length == packetLength(count);
                    }
                }
            }
            final DropReason reason = checkValidateInvariants(buffer, offset, length, seed, context);
            if (freeFieldsOnly)
            {
                assertEquals(DropReason.NONE, reason,
                    () -> context + ": changing job id, MAC or lanes must not make a packet invalid; "
                    + TestSeed.describe(seed));
            }
            else if (freeOrExponentFieldsOnly)
            {
                header.wrap(buffer, offset);
                final DropReason expected = expectedValidExponents(header) ? DropReason.NONE : DropReason.BAD_EXPONENT;
                assertEquals(expected, reason,
                    () -> context + ": with only exponents (and free fields) changed, scale " + header.scaleExponent()
                    + " look-ahead " + header.lookaheadExponent() + " must give " + expected + "; "
                    + TestSeed.describe(seed));
            }
        }
    }

    /**
     * Validate, never throwing, and when the packet is accepted read every field and check what validate promises.
     */
    private DropReason checkValidateInvariants(
        final UnsafeBuffer buffer, final int offset, final int length, final long seed, final String context)
    {
        final DropReason reason;
        try
        {
            reason = DataHeaderFlyweight.validate(buffer, offset, length);
        }
        catch (final RuntimeException ex)
        {
            throw new AssertionError("validate threw at " + context + " offset " + offset + " length " + length
                + " capacity " + buffer.capacity() + "; " + TestSeed.describe(seed), ex);
        }
        if (reason != DropReason.NONE)
        {
            return reason;
        }
        final String where = context + " offset " + offset + " length " + length + "; " + TestSeed.describe(seed);
        try
        {
            header.wrap(buffer, offset);
            final int count = header.elementCount();
            assertEquals(length, HEADER_LENGTH + ElementType.laneBytes(header.elementType()) * count, where);
            final byte type = header.type();
            final boolean headerOnlyType = type == DataHeaderFlyweight.TYPE_PROBE || type == DataHeaderFlyweight.TYPE_NACK ||
                type == DataHeaderFlyweight.TYPE_PENDING;
            assertTrue(type == TYPE_UPDATE || type == TYPE_RESULT || headerOnlyType, where);
            assertTrue(header.workerRank() < MAX_WORKERS, where);
            assertEquals(0, header.flags() & ~KNOWN_FLAGS, where);
            assertTrue(ElementType.isValid(header.elementType()), where);
            assertTrue(header.slotIndex() >= 0, where);
            assertTrue(header.chunkSequence() >= 0, where);
            assertTrue(count <= MAX_ELEMENTS, where);
            assertEquals(header.isExponentOnly() || headerOnlyType, count == 0, where);
            assertTrue(expectedValidExponents(header),
                () -> "accepted scale " + header.scaleExponent() + " look-ahead " + header.lookaheadExponent()
                + " element type " + header.elementType() + " at " + where);
            header.jobId();
            header.poolVersion();
            header.mac();
            for (int i = 0; i < count; i++)
            {
                header.lane(i);
            }
        }
        catch (final RuntimeException ex)
        {
            throw new AssertionError("reading an accepted packet threw at " + where, ex);
        }
        return reason;
    }

    /** Bytes (relative to the header) that validate must not judge: job id, check, MAC, lanes and beyond. */
    private static boolean isFreeField(final int position)
    {
        return (position >= JOB_ID_OFFSET && position < WORKER_RANK_OFFSET) ||
            (position >= TENSOR_CHECK_OFFSET && position < SCALE_EXPONENT_OFFSET) || position >= MAC_OFFSET;
    }

    /** Bytes (relative to the header) of the scale and look-ahead exponents: judged only by their value. */
    private static boolean isExponentField(final int position)
    {
        return position >= SCALE_EXPONENT_OFFSET && position < MAC_OFFSET;
    }

    /** The rule, written out independently of validate: NO_EXPONENT or within [-126, 128]. */
    private static boolean expectedValidExponent(final short exponent)
    {
        return exponent == Short.MIN_VALUE || (exponent >= -126 && exponent <= 128);
    }

    /** Both exponents in range (the look-ahead may also be unknown), and both NO_EXPONENT for integer data. */
    private static boolean expectedValidExponents(final DataHeaderFlyweight h)
    {
        final short scale = h.scaleExponent();
        final short lookahead = h.lookaheadExponent();
        // a look-ahead may also say "unknown" or "a non-finite value ahead" (DataHeaderFlyweight's two markers)
        return expectedValidExponent(scale) &&
            (expectedValidExponent(lookahead) || lookahead == Short.MAX_VALUE || lookahead == Short.MAX_VALUE - 1) &&
            (h.elementType() != ElementType.INT32 || (scale == Short.MIN_VALUE && lookahead == Short.MIN_VALUE));
    }

    /** An exponent a sender could write for an element type, and now and then any 16 bits. */
    private static short plausibleExponent(final SplittableRandom random, final byte elementType)
    {
        if (random.nextInt(16) == 0)
        {
            return (short)random.nextInt();
        }
        if (elementType == ElementType.INT32 || random.nextInt(8) == 0)
        {
            return NO_EXPONENT;
        }
        return (short)random.nextInt(MIN_EXPONENT, MAX_EXPONENT + 1);
    }

    /** An exponent value near the edges of the valid set, or any 16 bits. */
    private static short interestingExponent(final SplittableRandom random)
    {
        return switch (random.nextInt(10))
        {
            case 0 -> NO_EXPONENT;
            case 1 -> (short)(NO_EXPONENT + 1);
            case 2 -> MIN_EXPONENT;
            case 3 -> (short)(MIN_EXPONENT - 1);
            case 4 -> MAX_EXPONENT;
            case 5 -> (short)(MAX_EXPONENT + 1);
            case 6 -> Short.MAX_VALUE;
            case 7 -> (short)random.nextInt(MIN_EXPONENT, MAX_EXPONENT + 1);
            default -> (short)random.nextInt();
        };
    }

    private void assertDrop(final DropReason expected, final int count, final Consumer<UnsafeBuffer> corruption)
    {
        final UnsafeBuffer buffer = goodPacket(0, count);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, packetLength(count)));
        corruption.accept(buffer);
        assertEquals(expected, DataHeaderFlyweight.validate(buffer, 0, packetLength(count)),
            () -> "corrupted packet " + HexFormat.of().formatHex(buffer.byteArray(), 0, HEADER_LENGTH));
    }

    private void assertInt32Drop(final Consumer<DataHeaderFlyweight> corruption)
    {
        final int count = 3;
        final UnsafeBuffer buffer = goodInt32Packet(0, count);
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, packetLength(count)));
        corruption.accept(header.wrap(buffer, 0));
        assertEquals(DropReason.BAD_EXPONENT, DataHeaderFlyweight.validate(buffer, 0, packetLength(count)),
            () -> "int32 packet " + HexFormat.of().formatHex(buffer.byteArray(), 0, HEADER_LENGTH));
    }

    private void assertAccepted(final int count, final Consumer<DataHeaderFlyweight> change, final String what)
    {
        final UnsafeBuffer buffer = goodPacket(0, count);
        change.accept(header.wrap(buffer, 0));
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, packetLength(count)),
            () -> what + ": " + HexFormat.of().formatHex(buffer.byteArray(), 0, HEADER_LENGTH));
    }

    private void assertSetterWrites(
        final Consumer<DataHeaderFlyweight> setter, final int fieldOffset, final String fieldHex)
    {
        final byte[] golden = HexFormat.of().parseHex(GOLDEN_HEX);
        final byte[] bytes = golden.clone();
        setter.accept(header.wrap(new UnsafeBuffer(bytes), 0));

        final byte[] expected = golden.clone();
        final byte[] field = HexFormat.of().parseHex(fieldHex);
        System.arraycopy(field, 0, expected, fieldOffset, field.length);
        assertArrayEquals(expected, bytes, () -> "setter for offset " + fieldOffset + " wrote " + HexFormat.of().formatHex(bytes));
    }

    private DropReason validateGood(final int count)
    {
        return DataHeaderFlyweight.validate(goodPacket(0, count), 0, packetLength(count));
    }

    private UnsafeBuffer goodPacket(final int offset, final int count)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[offset + packetLength(count)]);
        writeGoodHeader(buffer, offset, count);
        return buffer;
    }

    private UnsafeBuffer goodInt32Packet(final int offset, final int count)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[offset + packetLength(count)]);
        writeGoodInt32Header(buffer, offset, count);
        return buffer;
    }

    /** A float32 update with exponents inside [MIN_EXPONENT, MAX_EXPONENT]. */
    private void writeGoodHeader(final UnsafeBuffer buffer, final int offset, final int count)
    {
        header.wrap(buffer, offset).writeHeader(
            TYPE_UPDATE, 7, 3, FLAG_POOL_VERSION, ElementType.FLOAT32, 11, 42L, count, -3, 5);
    }

    /** An int32 update: integer data carries NO_EXPONENT in both exponent fields. */
    private void writeGoodInt32Header(final UnsafeBuffer buffer, final int offset, final int count)
    {
        header.wrap(buffer, offset).writeHeader(
            TYPE_UPDATE, 7, 3, FLAG_POOL_VERSION, ElementType.INT32, 11, 42L, count, NO_EXPONENT, NO_EXPONENT);
    }

    private void writeGoldenPacket(final UnsafeBuffer buffer, final int offset)
    {
        header.wrap(buffer, offset)
            .writeHeader(
                TYPE_UPDATE,
                0x01020304,
                0x0506,
                FLAGS_VERSION_RETRANSMIT,
                ElementType.FLOAT32,
                0x0A0B0C0D,
                0x1112131415161718L,
                GOLDEN_LANES.length,
                -3,
                0x0102)
            .mac(0x2122232425262728L);
        for (int i = 0; i < GOLDEN_LANES.length; i++)
        {
            header.lane(i, GOLDEN_LANES[i]);
        }
    }
}
