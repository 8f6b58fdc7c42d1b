package io.switchml.protocol;

/**
 * Element type codes carried in the data header. The appliance always aggregates 32-bit integer
 * lanes; the element type tells workers how to turn them back into values.
 */
public final class ElementType
{
    /** Signed 32-bit integers, aggregated exactly (wrapping on overflow like the switch). */
    public static final byte INT32 = 1;
    /** IEEE float32 quantized to block fixed point with a per-chunk exponent. */
    public static final byte FLOAT32 = 2;

    private ElementType()
    {
    }

    public static boolean isValid(final byte code)
    {
        return code == INT32 || code == FLOAT32;
    }

    public static String name(final byte code)
    {
        return switch (code)
        {
            case INT32 -> "int32";
            case FLOAT32 -> "float32";
            default -> "unknown(" + code + ")";
        };
    }

    /**
     * Parse a configuration name.
     *
     * @param name such as "float32" or "int32".
     * @return the code.
     * @throws IllegalArgumentException naming the accepted values.
     */
    public static byte parse(final String name)
    {
        return switch (name.toLowerCase(java.util.Locale.ROOT))
        {
            case "int32", "int" -> INT32;
            case "float32", "float" -> FLOAT32;
            default -> throw new IllegalArgumentException("unknown element type '" + name + "' (expected int32 or float32)");
        };
    }
}
