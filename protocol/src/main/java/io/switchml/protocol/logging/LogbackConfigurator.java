package io.switchml.protocol.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.LayoutWrappingEncoder;
import ch.qos.logback.core.spi.ContextAwareBase;

import java.nio.charset.StandardCharsets;

/**
 * Logback's configuration, in code and found through {@link java.util.ServiceLoader} (no XML to parse at start-up):
 * one console appender on stderr with {@link LineLayout}, the level from {@link Logging#LEVEL_PROP} or
 * {@link Logging#LEVEL_DEFAULT}.
 */
public final class LogbackConfigurator extends ContextAwareBase implements Configurator
{
    public ExecutionStatus configure(final LoggerContext context)
    {
        final LineLayout layout = new LineLayout(Logging.toJournal());
        layout.setContext(context);
        layout.start();
        final LayoutWrappingEncoder<ILoggingEvent> encoder = new LayoutWrappingEncoder<>();
        encoder.setContext(context);
        encoder.setLayout(layout);
        encoder.setCharset(StandardCharsets.UTF_8);
        encoder.start();
        final ConsoleAppender<ILoggingEvent> appender = new ConsoleAppender<>();
        appender.setContext(context);
        appender.setName("stderr");
        appender.setTarget("System.err");
        appender.setEncoder(encoder);
        appender.start();
        final Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
        root.detachAndStopAllAppenders();
        root.addAppender(appender);
        Level level;
        try
        {
            level = Logging.parse(System.getProperty(Logging.LEVEL_PROP, Logging.LEVEL_DEFAULT));
        }
        catch (final IllegalArgumentException ex)
        {
            addWarn(Logging.LEVEL_PROP + ": " + ex.getMessage());
            level = Logging.parse(Logging.LEVEL_DEFAULT);
        }
        Logging.apply(context, level);
        return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
    }
}
