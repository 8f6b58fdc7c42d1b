package io.switchml.protocol.security;

import io.switchml.protocol.DataHeaderFlyweight;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;
import java.security.SecureRandom;

import static io.switchml.protocol.security.SipHash24.FINAL_XOR;
import static io.switchml.protocol.security.SipHash24.INIT_V0;
import static io.switchml.protocol.security.SipHash24.INIT_V1;
import static io.switchml.protocol.security.SipHash24.INIT_V2;
import static io.switchml.protocol.security.SipHash24.INIT_V3;
import static io.switchml.protocol.security.SipHash24.KEY_LENGTH;

/**
 * Message authentication code of a SwitchML data packet: SipHash-2-4 ({@link SipHash24}) under a 128-bit job key
 * over the whole packet, header and payload, with the 8-byte MAC field at
 * {@link DataHeaderFlyweight#MAC_OFFSET} taken as zero. {@link #sign} writes the result into that field in network
 * byte order like every other header field, so {@link DataHeaderFlyweight#mac()} reads it back.
 * <p>
 * The packet is neither copied nor written while hashing: the message is streamed as three pieces, packet bytes
 * [0, 32), eight zero bytes, then packet bytes [40, length). Because the MAC field starts at a multiple of 8, the
 * zero bytes are exactly one whole SipHash word and every piece boundary falls on a word boundary, so the stream
 * needs no carry of partial words. The result equals {@link SipHash24#hash} over a copy of the packet whose MAC
 * field is zeroed. Hashing allocates nothing and takes no lock.
 * <p>
 * {@link #verify} compares the received and computed 64-bit tags with a plain {@code ==} and makes no attempt at a
 * constant-time comparison. None is needed here: the tag is one machine word, not a byte array compared with an
 * early exit, each packet is checked once and a mismatch is simply dropped, so timing tells a forger nothing that
 * helps with the next packet or about the key.
 * <p>
 * Keys travel in the text control protocol as 32 hexadecimal digits ({@link #toHex}, {@link #fromHex}).
 */
public final class PacketMac
{
    private static final int MAC_WORD = DataHeaderFlyweight.MAC_OFFSET >>> 3;
    private static final char[] HEX_DIGITS = "0123456789abcdef".toCharArray();

    static
    {
        if ((DataHeaderFlyweight.MAC_OFFSET & 7) != 0 || DataHeaderFlyweight.HEADER_LENGTH < DataHeaderFlyweight.MAC_OFFSET + 8)
        {
            throw new IllegalStateException("MAC field must be a whole aligned SipHash word inside the header");
        }
    }

    private PacketMac()
    {
    }

    /**
     * MAC of a packet: SipHash-2-4 over the packet with its MAC field taken as zero, whatever the field holds.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param packet buffer holding the packet.
     * @param offset of the packet in the buffer.
     * @param length of the packet in bytes, header included.
     * @return the 64-bit MAC.
     * @throws IllegalArgumentException  when length is shorter than a header.
     * @throws IndexOutOfBoundsException when the packet is not inside the buffer.
     */
    public static long compute(final long k0, final long k1, final DirectBuffer packet, final int offset, final int length)
    {
        if (length < DataHeaderFlyweight.HEADER_LENGTH)
        {
            throw new IllegalArgumentException(
                "packet length " + length + " is shorter than the header (" + DataHeaderFlyweight.HEADER_LENGTH + ")");
        }
        packet.boundsCheck(offset, length);
        return hashWithZeroMac(k0, k1, packet, offset, length);
    }

    /**
     * Compute the MAC of a packet and write it into the packet's MAC field in network byte order.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param packet buffer holding the packet; only its MAC field is written.
     * @param offset of the packet in the buffer.
     * @param length of the packet in bytes, header included.
     * @throws IllegalArgumentException  when length is shorter than a header.
     * @throws IndexOutOfBoundsException when the packet is not inside the buffer.
     */
    public static void sign(
        final long k0, final long k1, final MutableDirectBuffer packet, final int offset, final int length)
    {
        final long mac = compute(k0, k1, packet, offset, length);
        packet.putLong(offset + DataHeaderFlyweight.MAC_OFFSET, mac, ByteOrder.BIG_ENDIAN);
    }

    /**
     * Check the MAC field of a received packet. A packet shorter than a header or not inside the buffer fails
     * rather than throwing, so the data path can count it as a drop.
     * <p>
     * The comparison is a plain {@code ==} on 64-bit values, not constant time; see the class javadoc for why that
     * is acceptable for a tag checked once per packet.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param packet buffer holding the packet.
     * @param offset of the packet in the buffer.
     * @param length of the packet in bytes, header included.
     * @return true when the MAC field holds the MAC of the packet under the key.
     */
    public static boolean verify(
        final long k0, final long k1, final DirectBuffer packet, final int offset, final int length)
    {
        if (length < DataHeaderFlyweight.HEADER_LENGTH || offset < 0 || packet.capacity() - offset < length)
        {
            return false;
        }
        final long received = packet.getLong(offset + DataHeaderFlyweight.MAC_OFFSET, ByteOrder.BIG_ENDIAN);
        return received == hashWithZeroMac(k0, k1, packet, offset, length);
    }

    /**
     * Split a 16-byte key into the little-endian halves that {@link SipHash24} and this class take.
     *
     * @param key16 the key.
     * @return {k0, k1}.
     * @throws IllegalArgumentException when the key is null or not 16 bytes.
     */
    public static long[] keyFromBytes(final byte[] key16)
    {
        checkKeyLength(key16);
        return new long[]{ littleEndianLong(key16, 0), littleEndianLong(key16, 8) };
    }

    /**
     * A fresh random 16-byte key.
     *
     * @param random source of randomness, e.g. {@code new SecureRandom()} held by the control thread.
     * @return the key.
     */
    public static byte[] randomKey(final SecureRandom random)
    {
        final byte[] key = new byte[KEY_LENGTH];
        random.nextBytes(key);
        return key;
    }

    /**
     * Encode a 16-byte key as 32 lower-case hexadecimal digits, key byte 0 first, for the text control protocol.
     *
     * @param key16 the key.
     * @return the hex text.
     * @throws IllegalArgumentException when the key is null or not 16 bytes.
     */
    public static String toHex(final byte[] key16)
    {
        checkKeyLength(key16);
        final char[] chars = new char[KEY_LENGTH * 2];
        for (int i = 0; i < KEY_LENGTH; i++)
        {
            chars[i * 2] = HEX_DIGITS[(key16[i] >>> 4) & 0xF];
            chars[i * 2 + 1] = HEX_DIGITS[key16[i] & 0xF];
        }
        return new String(chars);
    }

    /**
     * Decode a key written by {@link #toHex}: exactly 32 hexadecimal digits (either case), no prefix, separators
     * or white space.
     *
     * @param hex the text.
     * @return the 16-byte key.
     * @throws IllegalArgumentException naming the problem when the text is null, has the wrong length or holds a
     *                                  character that is not a hexadecimal digit.
     */
    public static byte[] fromHex(final CharSequence hex)
    {
        if (null == hex)
        {
            throw new IllegalArgumentException("key is missing: expected " + (KEY_LENGTH * 2) + " hex digits");
        }
        if (hex.length() != KEY_LENGTH * 2)
        {
            throw new IllegalArgumentException(
                "key must be " + (KEY_LENGTH * 2) + " hex digits (" + KEY_LENGTH + " bytes), got " + hex.length() +
                " characters");
        }
        final byte[] key = new byte[KEY_LENGTH];
        for (int i = 0; i < KEY_LENGTH; i++)
        {
            key[i] = (byte)((hexDigit(hex, i * 2) << 4) | hexDigit(hex, i * 2 + 1));
        }
        return key;
    }

    /**
     * SipHash-2-4 streamed over the three pieces of a packet: its bytes [0, 32), one all-zero word standing for the
     * MAC field, then its bytes [40, length) and the final word of trailing bytes and length. The caller has checked
     * that length covers the header and that the packet lies inside the buffer.
     */
    private static long hashWithZeroMac(
        final long k0, final long k1, final DirectBuffer packet, final int offset, final int length)
    {
        final int words = length >>> 3;
        final int tailIndex = offset + (words << 3);
        long last = ((long)length) << 56;
        for (int i = (length & 7) - 1; i >= 0; i--)
        {
            last |= (packet.getByte(tailIndex + i) & 0xFFL) << (i << 3);
        }

        long v0 = k0 ^ INIT_V0;
        long v1 = k1 ^ INIT_V1;
        long v2 = k0 ^ INIT_V2;
        long v3 = k1 ^ INIT_V3;

        for (int word = 0; word <= words; word++)
        {
            final long m;
            if (word == MAC_WORD)
            {
                m = 0L;
            }
            else if (word < words)
            {
                m = packet.getLong(offset + (word << 3), ByteOrder.LITTLE_ENDIAN);
            }
            else
            {
                m = last;
            }

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

    private static int hexDigit(final CharSequence hex, final int index)
    {
        final char c = hex.charAt(index);
        if (c >= '0' && c <= '9')
        {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f')
        {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F')
        {
            return c - 'A' + 10;
        }
        throw new IllegalArgumentException(
            "key has a character that is not a hex digit at index " + index + ": '" + c + "' (U+" +
            String.format("%04X", (int)c) + ")");
    }

    private static void checkKeyLength(final byte[] key16)
    {
        if (null == key16)
        {
            throw new IllegalArgumentException("key is missing: expected " + KEY_LENGTH + " bytes");
        }
        if (key16.length != KEY_LENGTH)
        {
            throw new IllegalArgumentException("key must be " + KEY_LENGTH + " bytes, got " + key16.length);
        }
    }

    private static long littleEndianLong(final byte[] bytes, final int index)
    {
        long value = 0;
        for (int i = 7; i >= 0; i--)
        {
            value = (value << 8) | (bytes[index + i] & 0xFFL);
        }
        return value;
    }
}
