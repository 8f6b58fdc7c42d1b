package io.switchml.protocol.telemetry;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.CountersReader;

import java.nio.charset.StandardCharsets;

/**
 * Type ids of the counters in the counters file, and the layout of their keys, so that a reader can
 * tell what each counter measures and whose it is without parsing its human-readable label.
 * <ul>
 *   <li>{@link #SYSTEM}: one per {@link SystemCounter}, allocated first, so counter id == enum id.</li>
 *   <li>{@link #SHARD}: one per metric per data-plane shard; owner id = shard id.</li>
 *   <li>{@link #JOB}: one per metric per job, allocated on admission and freed when the job ends;
 *   owner id = job id.</li>
 * </ul>
 * Key layout (native byte order, {@link CountersReader#MAX_KEY_LENGTH} = 112 bytes):
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |        Owner Id (system counter id, shard id or job id)       |
 *  +---------------------------------------------------------------+
 *  |                 Kind (0 counter, 1 gauge)                     |
 *  +---------------------------------------------------------------+
 *  |        Metric Name Length      (then up to 28 ASCII bytes)   ...
 *  +---------------------------------------------------------------+
 *  |        Tenant Length at 40     (then up to 32 UTF-8 bytes)   ...
 *  +---------------------------------------------------------------+
 *  |        Job Name Length at 76   (then up to 32 UTF-8 bytes)   ...
 *  +---------------------------------------------------------------+
 * </pre>
 * The metric name matches {@code [a-z][a-z0-9_]*}. Tenant and job name are set only for {@link #JOB}
 * counters and are truncated (on a character boundary) to fit; the label keeps them whole.
 */
public final class CounterTypes
{
    /** System-wide counters with fixed ids ({@link SystemCounter}). */
    public static final int SYSTEM = 0;
    /** Counters of one data-plane shard, written by that shard's thread only. */
    public static final int SHARD = 1;
    /** Counters of one job, allocated when it is admitted and freed when it ends. */
    public static final int JOB = 2;
    /**
     * Counters of an aggregation backend (the XDP program's drops and events; fallbacks at placement): the tenant
     * field holds the backend's name, the label the counter's description (for fallbacks, the reason).
     */
    public static final int BACKEND = 3;

    /** Kind of a monotonically increasing counter. */
    public static final int KIND_COUNTER = 0;
    /** Kind of a value that may go down (a level or a maximum). */
    public static final int KIND_GAUGE = 1;

    public static final int KEY_OWNER_ID_OFFSET = 0;
    public static final int KEY_KIND_OFFSET = 4;
    public static final int KEY_METRIC_NAME_OFFSET = 8;
    public static final int KEY_TENANT_OFFSET = 40;
    public static final int KEY_JOB_NAME_OFFSET = 76;
    /** Length of every key written by {@link #encodeKey}. */
    public static final int KEY_LENGTH = CountersReader.MAX_KEY_LENGTH;

    /** Longest metric name, in ASCII bytes. */
    public static final int MAX_METRIC_NAME_LENGTH = KEY_TENANT_OFFSET - KEY_METRIC_NAME_OFFSET - Integer.BYTES;
    /** Longest tenant or job name kept in a key, in UTF-8 bytes. */
    public static final int MAX_KEY_STRING_LENGTH = KEY_JOB_NAME_OFFSET - KEY_TENANT_OFFSET - Integer.BYTES;

    private CounterTypes()
    {
    }

    /**
     * @return whether the name is a valid metric name: {@code [a-z][a-z0-9_]*}, at most
     * {@link #MAX_METRIC_NAME_LENGTH} characters.
     */
    public static boolean isValidMetricName(final String name)
    {
        if (null == name || name.isEmpty() || name.length() > MAX_METRIC_NAME_LENGTH)
        {
            return false;
        }
        for (int i = 0; i < name.length(); i++)
        {
            final char c = name.charAt(i);
            final boolean valid = (c >= 'a' && c <= 'z') || (i > 0 && ((c >= '0' && c <= '9') || c == '_'));
            if (!valid)
            {
                return false;
            }
        }
        return true;
    }

    /**
     * Write a complete key ({@link #KEY_LENGTH} bytes, unused bytes zeroed).
     *
     * @param key        buffer the key is written into, from offset 0.
     * @param ownerId    system counter id, shard id or job id.
     * @param kind       {@link #KIND_COUNTER} or {@link #KIND_GAUGE}.
     * @param metricName valid metric name, see {@link #isValidMetricName(String)}.
     * @param tenant     tenant of a job counter, or null.
     * @param jobName    name of a job counter's job, or null.
     * @return the key length.
     */
    public static int encodeKey(
        final MutableDirectBuffer key,
        final int ownerId,
        final int kind,
        final String metricName,
        final String tenant,
        final String jobName)
    {
        if (!isValidMetricName(metricName))
        {
            throw new IllegalArgumentException("invalid metric name (want [a-z][a-z0-9_]*, at most " +
                MAX_METRIC_NAME_LENGTH + " chars): " + metricName);
        }
        if (KIND_COUNTER != kind && KIND_GAUGE != kind)
        {
            throw new IllegalArgumentException("unknown kind: " + kind);
        }
        key.setMemory(0, KEY_LENGTH, (byte)0);
        key.putInt(KEY_OWNER_ID_OFFSET, ownerId);
        key.putInt(KEY_KIND_OFFSET, kind);
        key.putStringAscii(KEY_METRIC_NAME_OFFSET, metricName);
        putTruncatedUtf8(key, KEY_TENANT_OFFSET, tenant);
        putTruncatedUtf8(key, KEY_JOB_NAME_OFFSET, jobName);
        return KEY_LENGTH;
    }

    /**
     * @return the owner id of a key: system counter id, shard id or job id.
     */
    public static int ownerId(final DirectBuffer key)
    {
        return key.getInt(KEY_OWNER_ID_OFFSET);
    }

    /**
     * @return {@link #KIND_COUNTER} or {@link #KIND_GAUGE}.
     */
    public static int kind(final DirectBuffer key)
    {
        return key.getInt(KEY_KIND_OFFSET);
    }

    /**
     * @return the metric name of a key, or "" if the key holds none.
     */
    public static String metricName(final DirectBuffer key)
    {
        return getString(key, KEY_METRIC_NAME_OFFSET, MAX_METRIC_NAME_LENGTH);
    }

    /**
     * @return the (possibly truncated) tenant of a job counter's key, or "".
     */
    public static String tenant(final DirectBuffer key)
    {
        return getString(key, KEY_TENANT_OFFSET, MAX_KEY_STRING_LENGTH);
    }

    /**
     * @return the (possibly truncated) job name of a job counter's key, or "".
     */
    public static String jobName(final DirectBuffer key)
    {
        return getString(key, KEY_JOB_NAME_OFFSET, MAX_KEY_STRING_LENGTH);
    }

    /**
     * @return the longest prefix of the value, cut on a code point boundary, whose UTF-8 encoding fits
     * in maxBytes.
     */
    public static String truncateUtf8(final String value, final int maxBytes)
    {
        int bytes = 0;
        int i = 0;
        while (i < value.length())
        {
            final int codePoint = value.codePointAt(i);
            final int encodedLength = codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4;
            if (bytes + encodedLength > maxBytes)
            {
                break;
            }
            bytes += encodedLength;
            i += Character.charCount(codePoint);
        }
        return value.substring(0, i);
    }

    private static void putTruncatedUtf8(final MutableDirectBuffer key, final int offset, final String value)
    {
        if (null != value)
        {
            key.putStringUtf8(offset, truncateUtf8(value, MAX_KEY_STRING_LENGTH));
        }
    }

    private static String getString(final DirectBuffer key, final int offset, final int maxLength)
    {
        if (key.capacity() < offset + Integer.BYTES)
        {
            return "";
        }
        final int length = key.getInt(offset);
        if (length <= 0 || length > maxLength || key.capacity() < offset + Integer.BYTES + length)
        {
            return "";
        }
        final byte[] bytes = new byte[length];
        key.getBytes(offset + Integer.BYTES, bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
