package io.switchml.protocol.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The processes' logging: SLF4J with logback as its one backend (Chronicle Queue logs through it too), configured in
 * code by {@link LogbackConfigurator} to write one line per event to stderr with {@link LineLayout}; under systemd
 * stderr is the journal. {@code --log-level} ({@link LogLevelOption}) sets the level.
 * <p>
 * Libraries (Chronicle, Netty) log at WARN and above unless the level asked for is DEBUG or TRACE, so INFO shows
 * only this project's events; two expected library warnings only at DEBUG.
 */
public final class Logging
{
    /** System property with the level to start at, for processes that get no {@code --log-level}: "warn" etc. */
    public static final String LEVEL_PROP = "switchml.log.level";
    /** Levels {@code --log-level} accepts, most severe first. */
    public static final List<String> LEVELS = List.of("error", "warn", "info", "debug", "trace");
    /** Level when none is asked for. */
    public static final String LEVEL_DEFAULT = "info";

    private static final List<String> LIBRARIES = List.of("net.openhft", "io.netty", "io.prometheus");
    /**
     * Loggers whose warnings are expected, shown only at DEBUG: OpenHFT affinity saying that JNA is missing (the
     * appliance's pom leaves JNA out on purpose), and Chronicle telling a journal reader, which cannot know the roll
     * cycle before opening it, that the roll cycle is taken from the journal's metadata.
     */
    private static final List<String> EXPECTED_WARNINGS = List.of(
        "net.openhft.affinity", "net.openhft.chronicle.queue.impl.single.SCQMeta");

    private Logging()
    {
    }

    /**
     * Set the level of every logger of this process.
     *
     * @param name one of {@link #LEVELS}, any case.
     * @throws IllegalArgumentException naming the accepted levels when it is none of them.
     */
    public static void level(final String name)
    {
        final Level level = parse(name);
        if (LoggerFactory.getILoggerFactory() instanceof LoggerContext context)
        {
            apply(context, level);
        }
    }

    /**
     * Set the root level, and the libraries' to WARN unless the level is more verbose than INFO (at ERROR they
     * follow the root).
     */
    static void apply(final LoggerContext context, final Level level)
    {
        context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME).setLevel(level);
        final boolean quietLibraries = level.isGreaterOrEqual(Level.INFO) && !level.isGreaterOrEqual(Level.ERROR);
        for (final String library : LIBRARIES)
        {
            final Logger logger = context.getLogger(library);
            logger.setLevel(quietLibraries ? Level.WARN : null);
        }
        for (final String expected : EXPECTED_WARNINGS)
        {
            context.getLogger(expected).setLevel(level.isGreaterOrEqual(Level.INFO) ? Level.ERROR : null);
        }
    }

    /**
     * @return the logback level of a name in {@link #LEVELS}.
     * @throws IllegalArgumentException naming the accepted levels when it is none of them.
     */
    public static Level parse(final String name)
    {
        final String lower = null == name ? "" : name.strip().toLowerCase(Locale.ROOT);
        if (!LEVELS.contains(lower))
        {
            throw new IllegalArgumentException(
                "unknown log level '" + name + "': expected one of " + String.join(", ", LEVELS));
        }
        return Level.toLevel(lower.toUpperCase(Locale.ROOT));
    }

    /**
     * Report a failure that a command prints as a line on stdout for the process that started it (the Python client
     * reads {@code ERROR ...} there), and, under systemd, also as an error record on stderr, so that the journal files
     * it at priority err ({@code journalctl -p err}) and not at stdout's info.
     */
    public static void failureLine(final org.slf4j.Logger log, final String line)
    {
        System.out.println(line);
        System.out.flush();
        if (toJournal())
        {
            log.error("{}", line);
        }
    }

    /**
     * @return whether stderr is the systemd journal's stream: {@code JOURNAL_STREAM}, which systemd sets to the
     * "device:inode" of the stream it connects to a unit's output, names the file that fd 2 is (the check systemd.exec(5)
     * asks for, since a child whose stderr was redirected inherits the variable). Then lines carry a syslog priority
     * prefix instead of a timestamp.
     */
    public static boolean toJournal()
    {
        return isJournalStream(System.getenv("JOURNAL_STREAM"), Path.of("/proc/self/fd/2"));
    }

    /**
     * @param journalStream the value of {@code JOURNAL_STREAM}, or null.
     * @param stderr        the file stderr is (a link to it, such as {@code /proc/self/fd/2}).
     * @return whether the stream the variable names is that file.
     */
    static boolean isJournalStream(final String journalStream, final Path stderr)
    {
        if (null == journalStream || journalStream.isEmpty())
        {
            return false;
        }
        final int colon = journalStream.indexOf(':');
        if (colon < 0)
        {
            return false;
        }
        try
        {
            final Map<String, Object> attributes = Files.readAttributes(stderr, "unix:dev,ino");
            return journalStream.substring(0, colon).equals(String.valueOf(attributes.get("dev"))) &&
                journalStream.substring(colon + 1).equals(String.valueOf(attributes.get("ino")));
        }
        catch (final IOException | UnsupportedOperationException | IllegalArgumentException ex)
        {
            return false;
        }
    }

    /**
     * Log an exception that escaped a thread (a bug) with its stack trace, instead of the JVM's bare print.
     */
    public static void logUncaughtExceptions()
    {
        Thread.setDefaultUncaughtExceptionHandler((thread, ex) ->
            LoggerFactory.getLogger(Logging.class).error("bug: uncaught exception in thread {}", thread.getName(), ex));
    }
}
