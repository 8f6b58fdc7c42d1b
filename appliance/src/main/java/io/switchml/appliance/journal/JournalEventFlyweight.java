package io.switchml.appliance.journal;

import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalSeverity;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;

/**
 * Layout of one event in the journal's in-process ring buffer (the ring buffer's own record header,
 * which carries the length and the {@link JournalEvent#typeId()}, comes before it). Little-endian: the
 * record never leaves the process.
 * <pre>
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +---------------------------------------------------------------+
 * |                      Timestamp ms (64)                        |
 * +---------------------------------------------------------------+
 * |                            Job Id                             |
 * +---------------+---------------+-------------------------------+
 * |   Severity    |   Reserved    |      Tenant Length (16)       |
 * +---------------+---------------+-------------------------------+
 * |     Job Name Length (16)      |       Reserved (zero)         |
 * +-------------------------------+-------------------------------+
 * |                     Message Length (32)                       |
 * +---------------------------------------------------------------+
 * |   Tenant, Job Name, Message: UTF-8, back to back ...          |
 * </pre>
 * A length of -1 means the text is null. A {@link JournalEvent#HISTOGRAM_SNAPSHOT} has null texts and,
 * from {@link #SHARD_ID_OFFSET}, fixed fields instead:
 * <pre>
 * +---------------------------------------------------------------+
 * |                           Shard Id                            |
 * +---------------------------------------------------------------+
 * |                        Reserved (zero)                        |
 * +---------------------------------------------------------------+
 * |  Interval Start ms (64), Interval End ms (64), Count (64),    |
 * |  Min ns, P50 ns, P90 ns, P99 ns, P99.9 ns, Max ns (64 each)   |
 * +---------------------------------------------------------------+
 * </pre>
 */
final class JournalEventFlyweight
{
    static final ByteOrder BYTE_ORDER = ByteOrder.LITTLE_ENDIAN;

    static final int TIMESTAMP_MS_OFFSET = 0;
    static final int JOB_ID_OFFSET = 8;
    static final int SEVERITY_OFFSET = 12;
    static final int TENANT_LENGTH_OFFSET = 14;
    static final int JOB_NAME_LENGTH_OFFSET = 16;
    static final int MESSAGE_LENGTH_OFFSET = 20;
    static final int HEADER_LENGTH = 24;

    static final int SHARD_ID_OFFSET = HEADER_LENGTH;
    static final int INTERVAL_START_MS_OFFSET = SHARD_ID_OFFSET + 8;
    static final int INTERVAL_END_MS_OFFSET = INTERVAL_START_MS_OFFSET + 8;
    static final int COUNT_OFFSET = INTERVAL_END_MS_OFFSET + 8;
    static final int MIN_NS_OFFSET = COUNT_OFFSET + 8;
    static final int P50_NS_OFFSET = MIN_NS_OFFSET + 8;
    static final int P90_NS_OFFSET = P50_NS_OFFSET + 8;
    static final int P99_NS_OFFSET = P90_NS_OFFSET + 8;
    static final int P999_NS_OFFSET = P99_NS_OFFSET + 8;
    static final int MAX_NS_OFFSET = P999_NS_OFFSET + 8;
    static final int HISTOGRAM_LENGTH = MAX_NS_OFFSET + 8;

    /** Length of a null text. */
    static final int NULL_LENGTH = -1;

    private static final char REPLACEMENT = '\uFFFD';

    private JournalEventFlyweight()
    {
    }

    static void putHeader(
        final MutableDirectBuffer buffer,
        final int offset,
        final long timestampMs,
        final int jobId,
        final JournalSeverity severity,
        final int tenantLength,
        final int jobNameLength,
        final int messageLength)
    {
        buffer.putLong(offset + TIMESTAMP_MS_OFFSET, timestampMs, BYTE_ORDER);
        buffer.putInt(offset + JOB_ID_OFFSET, jobId, BYTE_ORDER);
        buffer.putByte(offset + SEVERITY_OFFSET, (byte)severity.ordinal());
        buffer.putByte(offset + SEVERITY_OFFSET + 1, (byte)0);
        buffer.putShort(offset + TENANT_LENGTH_OFFSET, (short)tenantLength, BYTE_ORDER);
        buffer.putShort(offset + JOB_NAME_LENGTH_OFFSET, (short)jobNameLength, BYTE_ORDER);
        buffer.putShort(offset + JOB_NAME_LENGTH_OFFSET + 2, (short)0, BYTE_ORDER);
        buffer.putInt(offset + MESSAGE_LENGTH_OFFSET, messageLength, BYTE_ORDER);
    }

    static long timestampMs(final DirectBuffer buffer, final int offset)
    {
        return buffer.getLong(offset + TIMESTAMP_MS_OFFSET, BYTE_ORDER);
    }

    static int jobId(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + JOB_ID_OFFSET, BYTE_ORDER);
    }

    static JournalSeverity severity(final DirectBuffer buffer, final int offset)
    {
        final JournalSeverity severity = JournalSeverity.fromOrdinal(buffer.getByte(offset + SEVERITY_OFFSET));
        return null == severity ? JournalSeverity.ERROR : severity;
    }

    static int tenantLength(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + TENANT_LENGTH_OFFSET, BYTE_ORDER);
    }

    static int jobNameLength(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + JOB_NAME_LENGTH_OFFSET, BYTE_ORDER);
    }

    static int messageLength(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + MESSAGE_LENGTH_OFFSET, BYTE_ORDER);
    }

    /**
     * @return bytes that a text takes in the record ({@link #NULL_LENGTH} counts as 0).
     */
    static int storedLength(final int length)
    {
        return Math.max(length, 0);
    }

    /**
     * UTF-8 length of the longest prefix of {@code text} made of whole code points that fits in
     * {@code maxBytes}, without allocating. A lone surrogate counts as one byte (it is written as '?').
     *
     * @return the length in bytes, or {@link #NULL_LENGTH} when {@code text} is null.
     */
    static int utf8Length(final CharSequence text, final int maxBytes)
    {
        if (null == text)
        {
            return NULL_LENGTH;
        }
        int bytes = 0;
        final int length = text.length();
        for (int i = 0; i < length; i++)
        {
            final char c = text.charAt(i);
            final int charBytes;
            if (c < 0x80)
            {
                charBytes = 1;
            }
            else if (c < 0x800)
            {
                charBytes = 2;
            }
            else if (Character.isHighSurrogate(c) && i + 1 < length && Character.isLowSurrogate(text.charAt(i + 1)))
            {
                charBytes = 4;
            }
            else if (Character.isSurrogate(c))
            {
                charBytes = 1;
            }
            else
            {
                charBytes = 3;
            }
            if (bytes + charBytes > maxBytes)
            {
                break;
            }
            bytes += charBytes;
            if (4 == charBytes)
            {
                i++;
            }
        }
        return bytes;
    }

    /**
     * Write the UTF-8 prefix of {@code text} that {@link #utf8Length(CharSequence, int)} measured as
     * {@code lengthBytes}, without allocating. Never writes more than {@code lengthBytes}; zero-fills what a
     * text changed since it was measured leaves over.
     */
    static void putUtf8(final MutableDirectBuffer buffer, final int index, final CharSequence text, final int lengthBytes)
    {
        if (lengthBytes <= 0)
        {
            return;
        }
        int position = index;
        final int limit = index + lengthBytes;
        final int length = text.length();
        for (int i = 0; i < length; i++)
        {
            final char c = text.charAt(i);
            if (c < 0x80)
            {
                if (position + 1 > limit)
                {
                    break;
                }
                buffer.putByte(position++, (byte)c);
            }
            else if (c < 0x800)
            {
                if (position + 2 > limit)
                {
                    break;
                }
                buffer.putByte(position++, (byte)(0xC0 | (c >>> 6)));
                buffer.putByte(position++, (byte)(0x80 | (c & 0x3F)));
            }
            else if (Character.isHighSurrogate(c) && i + 1 < length && Character.isLowSurrogate(text.charAt(i + 1)))
            {
                if (position + 4 > limit)
                {
                    break;
                }
                final int codePoint = Character.toCodePoint(c, text.charAt(++i));
                buffer.putByte(position++, (byte)(0xF0 | (codePoint >>> 18)));
                buffer.putByte(position++, (byte)(0x80 | ((codePoint >>> 12) & 0x3F)));
                buffer.putByte(position++, (byte)(0x80 | ((codePoint >>> 6) & 0x3F)));
                buffer.putByte(position++, (byte)(0x80 | (codePoint & 0x3F)));
            }
            else if (Character.isSurrogate(c))
            {
                if (position + 1 > limit)
                {
                    break;
                }
                buffer.putByte(position++, (byte)'?');
            }
            else
            {
                if (position + 3 > limit)
                {
                    break;
                }
                buffer.putByte(position++, (byte)(0xE0 | (c >>> 12)));
                buffer.putByte(position++, (byte)(0x80 | ((c >>> 6) & 0x3F)));
                buffer.putByte(position++, (byte)(0x80 | (c & 0x3F)));
            }
        }
        if (position < limit)
        {
            buffer.setMemory(position, limit - position, (byte)0);
        }
    }

    /**
     * Decode {@code length} bytes of UTF-8 into {@code out} (cleared first), without allocating once
     * {@code out} has grown. Malformed input becomes U+FFFD.
     */
    static void getUtf8(final DirectBuffer buffer, final int index, final int length, final StringBuilder out)
    {
        out.setLength(0);
        final int limit = index + length;
        int i = index;
        while (i < limit)
        {
            final int b0 = buffer.getByte(i) & 0xFF;
            if (b0 < 0x80)
            {
                out.append((char)b0);
                i++;
                continue;
            }
            final int extra = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : b0 >= 0xC0 ? 1 : -1;
            if (extra < 0 || b0 > 0xF4 || i + extra >= limit)
            {
                out.append(REPLACEMENT);
                i++;
                continue;
            }
            int codePoint = b0 & (0x3F >>> extra);
            boolean valid = true;
            for (int k = 1; k <= extra; k++)
            {
                final int b = buffer.getByte(i + k) & 0xFF;
                if ((b & 0xC0) != 0x80)
                {
                    valid = false;
                    break;
                }
                codePoint = (codePoint << 6) | (b & 0x3F);
            }
            if (!valid || codePoint > Character.MAX_CODE_POINT)
            {
                out.append(REPLACEMENT);
                i++;
                continue;
            }
            out.appendCodePoint(codePoint);
            i += extra + 1;
        }
    }
}
