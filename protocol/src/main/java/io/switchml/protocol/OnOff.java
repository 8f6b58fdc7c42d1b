package io.switchml.protocol;

import java.util.function.Supplier;

/**
 * The values of an on/off switch in the appliance's options, its control protocol's fields and its backends'
 * options: "on" or "true", "off" or "false". Each caller names the switch in its own error, so the refusal is given.
 * (The worker's command-line switches take "on" and "off" only, as picocli's help lists them.)
 */
public final class OnOff
{
    private OnOff()
    {
    }

    /**
     * @param value   the value as given.
     * @param refusal the error for any other value, naming the switch.
     * @return true for "on" or "true", false for "off" or "false".
     * @throws E for any other value.
     */
    public static <E extends Exception> boolean parse(final String value, final Supplier<E> refusal) throws E
    {
        return switch (value)
        {
            case "on", "true" -> true;
            case "off", "false" -> false;
            default -> throw refusal.get();
        };
    }
}
