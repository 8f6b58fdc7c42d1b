package io.switchml.protocol;

/**
 * Element type codes carried in the data header. The appliance always aggregates 32-bit integer
 * lanes; the element type says how a lane travels on the wire and how workers turn sums back into
 * values.
 * <ul>
 *   <li>{@link #INT32}: 4-byte lanes, summed exactly.</li>
 *   <li>{@link #FLOAT32}: 4-byte lanes of block fixed point, quantized by the workers.</li>
 *   <li>{@link #FLOAT16}, {@link #BFLOAT16}: 2-byte lanes holding the values themselves in the 16-bit
 *   format, half the bytes of float32 on the wire. The appliance converts each lane to 32-bit fixed
 *   point with the packet's block exponent, sums in int32, and converts the sums back to the 16-bit
 *   format in the result.</li>
 * </ul>
 */
public final class ElementType
{
    /** Signed 32-bit integers, aggregated exactly (wrapping on overflow like the switch). */
    public static final byte INT32 = 1;
    /** IEEE float32 quantized to block fixed point with a per-chunk exponent. */
    public static final byte FLOAT32 = 2;
    /** IEEE 754 binary16 lanes (11 significant bits, largest finite 65504), summed in 32-bit fixed point. */
    public static final byte FLOAT16 = 3;
    /** bfloat16 lanes (the top half of a float32: 8 significant bits, float32's range), summed in 32-bit fixed point. */
    public static final byte BFLOAT16 = 4;

    private ElementType()
    {
    }

    public static boolean isValid(final byte code)
    {
        return code >= INT32 && code <= BFLOAT16;
    }

    /**
     * @param code a valid element type.
     * @return true for every type that carries block exponents (all but {@link #INT32}).
     */
    public static boolean isFloat(final byte code)
    {
        return code != INT32;
    }

    /**
     * @param code a valid element type.
     * @return true for {@link #FLOAT16} and {@link #BFLOAT16}.
     */
    public static boolean isSixteenBit(final byte code)
    {
        return code == FLOAT16 || code == BFLOAT16;
    }

    /**
     * Bytes one element occupies on the wire.
     *
     * @param code a valid element type.
     * @return 2 for the 16-bit formats, else 4.
     */
    public static int laneBytes(final byte code)
    {
        return isSixteenBit(code) ? 2 : 4;
    }

    public static String name(final byte code)
    {
        return switch (code)
        {
            case INT32 -> "int32";
            case FLOAT32 -> "float32";
            case FLOAT16 -> "float16";
            case BFLOAT16 -> "bfloat16";
            default -> "unknown(" + code + ")";
        };
    }

    /**
     * Parse a configuration name.
     *
     * @param name such as "float32", "int32", "float16" or "bfloat16".
     * @return the code.
     * @throws IllegalArgumentException naming the accepted values.
     */
    public static byte parse(final String name)
    {
        return switch (name.toLowerCase(java.util.Locale.ROOT))
        {
            case "int32", "int" -> INT32;
            case "float32", "float" -> FLOAT32;
            case "float16", "fp16", "half" -> FLOAT16;
            case "bfloat16", "bf16" -> BFLOAT16;
            default -> throw new IllegalArgumentException(
                "unknown element type '" + name + "' (expected int32, float32, float16 or bfloat16)");
        };
    }
}
