package io.switchml.protocol;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The control exchange between workers and the appliance: one line of UTF-8 text per message over a
 * TCP connection, a verb followed by {@code key=value} fields separated by spaces. Control traffic
 * is rare, so legibility wins over compactness; the data path uses {@link DataHeaderFlyweight}.
 * <pre>
 * worker    -&gt; JOIN job=7 world=4 rank=0 type=float32 k=256 s=64 port=40123
 * appliance -&gt; OK job=7 dataPort=7471 k=256 s=64 world=4        (once every rank has joined)
 *            | ERR message=...                                      (refused, with the reason)
 * worker    -&gt; LEAVE                                               (orderly goodbye)
 * appliance -&gt; ABORT job=7 reason=...                              (job ended abnormally)
 * any       -&gt; HEALTH | JOBS | STATS
 * </pre>
 * Values may not contain spaces except {@code message} and {@code reason}, which run to the end of
 * the line.
 */
public final class ControlProtocol
{
    public static final String JOIN = "JOIN";
    public static final String OK = "OK";
    public static final String ERR = "ERR";
    public static final String LEAVE = "LEAVE";
    public static final String ABORT = "ABORT";
    public static final String HEALTH = "HEALTH";
    public static final String JOBS = "JOBS";
    public static final String STATS = "STATS";
    public static final String END = "END";

    private ControlProtocol()
    {
    }

    /**
     * Parse a control line.
     *
     * @param line without the trailing newline.
     * @return verb under key "" followed by the fields in order.
     * @throws IllegalArgumentException for an empty line or a field without '='.
     */
    public static Map<String, String> parse(final String line)
    {
        final String trimmed = line.strip();
        if (trimmed.isEmpty())
        {
            throw new IllegalArgumentException("empty control message");
        }
        final Map<String, String> fields = new LinkedHashMap<>();
        final int verbEnd = trimmed.indexOf(' ');
        fields.put("", verbEnd < 0 ? trimmed : trimmed.substring(0, verbEnd));
        int position = verbEnd < 0 ? trimmed.length() : verbEnd + 1;
        while (position < trimmed.length())
        {
            final int equals = trimmed.indexOf('=', position);
            if (equals < 0)
            {
                throw new IllegalArgumentException("malformed control field at '" + trimmed.substring(position) + "'");
            }
            final String key = trimmed.substring(position, equals).strip();
            final int valueEnd;
            if ("message".equals(key) || "reason".equals(key))
            {
                valueEnd = trimmed.length();
            }
            else
            {
                final int space = trimmed.indexOf(' ', equals);
                valueEnd = space < 0 ? trimmed.length() : space;
            }
            fields.put(key, trimmed.substring(equals + 1, valueEnd));
            position = valueEnd + 1;
        }
        return fields;
    }

    /**
     * Read a required integer field.
     *
     * @throws IllegalArgumentException naming the missing or malformed field.
     */
    public static int intField(final Map<String, String> fields, final String key)
    {
        final String value = fields.get(key);
        if (value == null)
        {
            throw new IllegalArgumentException("missing field '" + key + "' in " + fields.get("") + " message");
        }
        try
        {
            return Integer.parseInt(value);
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("field '" + key + "' is not an integer: '" + value + "'");
        }
    }

    /**
     * Format a JOIN request.
     */
    public static String join(
        final int jobId, final int worldSize, final int rank, final byte elementType, final int lanes, final int slots,
        final int dataPort)
    {
        return String.format(Locale.ROOT, "%s job=%d world=%d rank=%d type=%s k=%d s=%d port=%d",
            JOIN, jobId, worldSize, rank, ElementType.name(elementType), lanes, slots, dataPort);
    }
}
