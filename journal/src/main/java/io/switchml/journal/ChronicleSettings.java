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
    /** Chronicle's working directory (its OS.TARGET; OS.TMP is its tmp subdirectory, created when Chronicle loads). */
    public static final String WORK_DIRECTORY_PROP = "project.build.directory";
    /** Name of Chronicle's working directory inside a journal's directory. */
    public static final String WORK_DIRECTORY = ".chronicle";

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

    /**
     * Keep Chronicle's working directory inside the journal's own: without this, Chronicle takes a {@code target}
     * directory under the working directory or creates {@code /tmp/target} (java.io.tmpdir) the first time it loads,
     * left behind by an appliance run by hand. Call before any Chronicle class loads; the first call in a JVM wins.
     *
     * @param journalDirectory the journal's directory.
     * @param create           true for the journal's writer, which owns the directory; a reader (the ops CLI, perhaps
     *                         another user) uses the writer's working directory only if it is already there, and so
     *                         never creates anything in the writer's directory.
     */
    public static void confine(final java.nio.file.Path journalDirectory, final boolean create)
    {
        final java.nio.file.Path work = journalDirectory.toAbsolutePath().normalize().resolve(WORK_DIRECTORY);
        if (create || java.nio.file.Files.isDirectory(work.resolve("tmp")))
        {
            setIfAbsent(WORK_DIRECTORY_PROP, work.toString());
        }
    }

    private static void setIfAbsent(final String name, final String value)
    {
        if (null == System.getProperty(name))
        {
            System.setProperty(name, value);
        }
    }
}
