package io.switchml.protocol;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The control exchange between workers, operators and the appliance: one line of UTF-8 text per
 * message over a TCP connection, a verb followed by {@code key=value} fields separated by spaces.
 * Control traffic is rare, so legibility wins over compactness; the data path uses
 * {@link DataHeaderFlyweight}.
 * <pre>
 * worker    -&gt; CREATE name=resnet tenant=acme world=4 type=float32 k=256 s=64 [mac=on] [token=T]
 *              [slotTimeoutMs=2000] [joinTimeoutMs=30000] [ifAbsent=true] [backend=auto|software|xdp|...]
 * appliance -&gt; OK job=7 token=T shards=2 dataPorts=7471,7472 backend=xdp [fallback=...]
 *              (backend: where the job's slots live; fallback: every backend passed over, "name: reason; ...")
 * worker    -&gt; JOIN job=7 rank=0 token=T ports=40123,40124      (one local UDP port per shard)
 * appliance -&gt; OK job=7 world=4 type=float32 k=256 s=64 shards=2 dataPorts=7471,7472 mac=on key=HEX32 backend=xdp
 *              (once every rank has joined)
 *            | ERR message=...                                    (refused, with the reason)
 * worker    -&gt; LEAVE | ABORT reason=...                          (orderly goodbye, or give up)
 * appliance -&gt; ABORT job=7 reason=...                            (job ended abnormally)
 * operator  -&gt; HEALTH | JOBS | STATS | BACKENDS | ABORTJOB job=7 reason=...
 * </pre>
 * Values may not contain spaces except {@code message}, {@code reason} and {@code fallback}, which run to the
 * end of the line (so they come last).
 */
public final class ControlProtocol
{
    public static final String CREATE = "CREATE";
    public static final String JOIN = "JOIN";
    public static final String ABORT_JOB = "ABORTJOB";
    public static final String OK = "OK";
    public static final String ERR = "ERR";
    public static final String LEAVE = "LEAVE";
    public static final String ABORT = "ABORT";
    public static final String HEALTH = "HEALTH";
    public static final String JOBS = "JOBS";
    public static final String STATS = "STATS";
    /** The aggregation backends, one {@code BACKEND name=... up=1|0 [reason=...]} line each, then END. */
    public static final String BACKENDS = "BACKENDS";
    public static final String END = "END";
    /**
     * CREATE's {@code backend=} value, and its default, for "the first backend of the appliance's preference list
     * that can take the job"; never a backend's name.
     */
    public static final String BACKEND_AUTO = "auto";

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
            if ("message".equals(key) || "reason".equals(key) || "fallback".equals(key))
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
     * Read a required text field.
     *
     * @throws IllegalArgumentException naming the missing field.
     */
    public static String requiredField(final Map<String, String> fields, final String key)
    {
        final String value = fields.get(key);
        if (value == null || value.isEmpty())
        {
            throw new IllegalArgumentException("missing field '" + key + "' in " + fields.get("") + " message");
        }
        return value;
    }
}
