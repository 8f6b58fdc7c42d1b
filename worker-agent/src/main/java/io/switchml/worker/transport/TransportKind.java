package io.switchml.worker.transport;

import io.switchml.protocol.udp.NativeUdp;

/**
 * Which {@link DatagramTransport} a worker uses: {@code native} (Linux, through FFM), {@code nio} (any platform), or
 * {@code auto}: native where it is available, else NIO with the reason reported at start-up.
 */
public enum TransportKind
{
    AUTO, NATIVE, NIO;

    /**
     * @return the kind to use here: AUTO resolved.
     * @throws IllegalStateException when NATIVE is asked for and unavailable, naming why.
     */
    public TransportKind resolve()
    {
        return switch (this)
        {
            case AUTO -> NativeUdp.isAvailable() ? NATIVE : NIO;
            case NATIVE ->
            {
                if (!NativeUdp.isAvailable())
                {
                    throw new IllegalStateException("--transport native requested but unavailable: " +
                        NativeUdp.unavailabilityCause());
                }
                yield NATIVE;
            }
            case NIO -> NIO;
        };
    }

    /**
     * @return why AUTO falls back to NIO here, or null when it does not.
     */
    public static String fallbackReason()
    {
        return NativeUdp.isAvailable() ? null : NativeUdp.unavailabilityCause();
    }

    /**
     * @throws IllegalArgumentException naming the option for any other text.
     */
    public static TransportKind parse(final String text)
    {
        return switch (text)
        {
            case "auto" -> AUTO;
            case "native" -> NATIVE;
            case "nio" -> NIO;
            default -> throw new IllegalArgumentException("--transport must be auto, native or nio: " + text);
        };
    }
}
