package io.switchml.journal;

/**
 * System properties Chronicle reads when its classes load. The launcher and the tests pass the first two
 * with {@code -D}; setting them here as well (unless already set) keeps a JVM started without them from
 * reporting usage statistics to Chronicle's vendor, writing a client id file in {@code $HOME}, or
 * printing a banner.
 * <p>
 * Chronicle logs through SLF4J; its levels are set with everyone else's by
 * {@link io.switchml.protocol.logging.Logging} (WARN, and ERROR for its two expected warnings).
 */
public final class ChronicleSettings
{
    static final String ANALYTICS_DISABLE_PROP = "chronicle.analytics.disable";
    static final String ANNOUNCER_DISABLE_PROP = "chronicle.announcer.disable";

    private ChronicleSettings()
    {
    }

    /**
     * Set the properties that are not set; call before any Chronicle class loads.
     */
    public static void apply()
    {
        setIfAbsent(ANALYTICS_DISABLE_PROP, "true");
        setIfAbsent(ANNOUNCER_DISABLE_PROP, "true");
    }

    private static void setIfAbsent(final String name, final String value)
    {
        if (null == System.getProperty(name))
        {
            System.setProperty(name, value);
        }
    }
}
