package io.switchml.protocol.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.LoggingEvent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link LineLayout}'s lines and {@link Logging}'s levels, on logback's own event and logger classes.
 */
class LineLayoutTest
{
    private final LoggerContext context = new LoggerContext();
    private final Logger logger = context.getLogger("io.switchml.appliance.control.ControlServer");

    @Test
    void anEventIsOneLineWithTimestampLevelAndLoggerOutsideTheJournal()
    {
        final String line = new LineLayout(false).doLayout(event(Level.WARN, "accept failed:\nEMFILE", null));
        assertTrue(line.matches(
            "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d{3})?Z WARN  ControlServer: accept failed:\\\\nEMFILE\n"), line);
    }

    @Test
    void underTheJournalALineCarriesItsSyslogPriorityInsteadOfATimestamp()
    {
        assertEquals("<3>ERROR ControlServer: cannot start: Address already in use\n",
            new LineLayout(true).doLayout(event(Level.ERROR, "cannot start: Address already in use", null)));
        assertEquals("<6>INFO  ControlServer: ready\n", new LineLayout(true).doLayout(event(Level.INFO, "ready", null)));
        assertEquals("<7>DEBUG ControlServer: x\n", new LineLayout(true).doLayout(event(Level.DEBUG, "x", null)));
    }

    @Test
    void aBugIsFollowedByItsStackTraceEveryLineWithThePriority()
    {
        final List<String> lines = new LineLayout(true)
            .doLayout(event(Level.ERROR, "bug: the appliance failed", new IllegalStateException("slot pool corrupt")))
            .lines().toList();
        assertEquals("<3>ERROR ControlServer: bug: the appliance failed", lines.get(0));
        assertEquals("<3>java.lang.IllegalStateException: slot pool corrupt", lines.get(1));
        assertTrue(lines.size() > 3 && lines.stream().skip(2).allMatch((line) -> line.startsWith("<3>\tat ") ||
            line.startsWith("<3>\t... ")), lines::toString);
        assertTrue(lines.get(2).contains(LineLayoutTest.class.getName()), lines.get(2));
    }

    @Test
    void levelsByNameAndTheLibrariesQuietBelowDebug()
    {
        assertEquals(Level.DEBUG, Logging.parse(" Debug "));
        final IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> Logging.parse("loud"));
        assertEquals("unknown log level 'loud': expected one of error, warn, info, debug, trace", bad.getMessage());

        Logging.apply(context, Level.INFO);
        assertFalse(context.getLogger("net.openhft.chronicle.queue.X").isInfoEnabled());
        assertTrue(context.getLogger("net.openhft.chronicle.queue.X").isWarnEnabled());
        assertTrue(logger.isInfoEnabled());
        assertFalse(logger.isDebugEnabled());
        Logging.apply(context, Level.DEBUG);
        assertTrue(context.getLogger("net.openhft.chronicle.queue.X").isDebugEnabled());
        assertTrue(logger.isDebugEnabled());
        Logging.apply(context, Level.ERROR);
        assertFalse(logger.isWarnEnabled());
        assertFalse(context.getLogger("io.netty.channel.X").isWarnEnabled());
    }

    @Test
    void theProcessIsConfiguredByTheServiceLoadedConfigurator()
    {
        final org.slf4j.Logger root = LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        assertTrue(root instanceof Logger, "logback is the SLF4J backend: " + root.getClass());
        assertTrue(((Logger)root).getAppender("stderr") != null, "LogbackConfigurator's appender");
    }

    @Test
    void theJournalIsRecognisedByTheDeviceAndInodeOfStderr(@TempDir final Path dir)
        throws Exception
    {
        final Path stream = Files.createFile(dir.resolve("stream"));
        final Map<String, Object> id = Files.readAttributes(stream, "unix:dev,ino");
        assertTrue(Logging.isJournalStream(id.get("dev") + ":" + id.get("ino"), stream));
        assertFalse(Logging.isJournalStream(id.get("dev") + ":" + ((Long)id.get("ino") + 1), stream), "another stream");
        assertFalse(Logging.isJournalStream(null, stream));
        assertFalse(Logging.isJournalStream("garbage", stream));
    }

    @Test
    void theConfiguratorStartsAtTheLevelOfTheSystemProperty()
    {
        final String before = System.getProperty(Logging.LEVEL_PROP);
        try
        {
            System.setProperty(Logging.LEVEL_PROP, "warn");
            final LoggerContext warn = new LoggerContext();
            new LogbackConfigurator().configure(warn);
            assertFalse(warn.getLogger("io.switchml.X").isInfoEnabled());
            assertTrue(warn.getLogger("io.switchml.X").isWarnEnabled());

            System.setProperty(Logging.LEVEL_PROP, "chatty");
            final LoggerContext fallback = new LoggerContext();
            final LogbackConfigurator configurator = new LogbackConfigurator();
            configurator.setContext(fallback);
            configurator.configure(fallback);
            assertTrue(fallback.getLogger("io.switchml.X").isInfoEnabled(), "a bad value falls back to info");
            assertFalse(fallback.getLogger("io.switchml.X").isDebugEnabled());
        }
        finally
        {
            if (null == before)
            {
                System.clearProperty(Logging.LEVEL_PROP);
            }
            else
            {
                System.setProperty(Logging.LEVEL_PROP, before);
            }
        }
    }

    private LoggingEvent event(final Level level, final String message, final Throwable throwable)
    {
        return new LoggingEvent(Logger.class.getName(), logger, level, message, throwable, null);
    }
}
