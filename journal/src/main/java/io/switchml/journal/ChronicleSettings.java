package io.switchml.journal;

/**
 * System properties Chronicle reads when its classes load. The launcher and the tests pass the first two
 * with {@code -D}; setting them here as well (unless already set) keeps a JVM started without them from
 * reporting usage statistics to Chronicle's vendor, writing a client id file in {@code $HOME}, or
 * printing a banner.
 * <p>
 * Chronicle logs through SLF4J (slf4j-simple here). Its INFO messages are timings of file growth and disk
 * polls, so its loggers are set to WARN. Two WARNs are expected and set to ERROR: OpenHFT affinity saying
 * that JNA is missing (the appliance's pom leaves JNA out on purpose), and a reader, which cannot know the
 * journal's roll cycle before opening it, being told the roll cycle is taken from the journal's metadata.
 * A {@code -D} of the same property overrides any of them.
 */
public final class ChronicleSettings
{
    static final String ANALYTICS_DISABLE_PROP = "chronicle.analytics.disable";
    static final String ANNOUNCER_DISABLE_PROP = "chronicle.announcer.disable";
    static final String CHRONICLE_LOG_LEVEL_PROP = "org.slf4j.simpleLogger.log.net.openhft";
    static final String AFFINITY_LOG_LEVEL_PROP = "org.slf4j.simpleLogger.log.net.openhft.affinity";
    static final String ROLL_OVERRIDE_LOG_LEVEL_PROP =
        "org.slf4j.simpleLogger.log.net.openhft.chronicle.queue.impl.single.SCQMeta";

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
        setIfAbsent(CHRONICLE_LOG_LEVEL_PROP, "warn");
        setIfAbsent(AFFINITY_LOG_LEVEL_PROP, "error");
        setIfAbsent(ROLL_OVERRIDE_LOG_LEVEL_PROP, "error");
    }

    private static void setIfAbsent(final String name, final String value)
    {
        if (null == System.getProperty(name))
        {
            System.setProperty(name, value);
        }
    }
}
