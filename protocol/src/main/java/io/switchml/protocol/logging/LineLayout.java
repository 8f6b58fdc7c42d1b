package io.switchml.protocol.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.classic.spi.ThrowableProxyUtil;
import ch.qos.logback.core.LayoutBase;

import java.time.Instant;
import java.time.temporal.ChronoUnit;

/**
 * One line per event: {@code 2026-11-25T16:40:37.123Z WARN  ControlServer: message}, or under the journal
 * {@code <4>WARN  ControlServer: message}, where {@code <4>} is the syslog priority journald reads off the line
 * (sd-daemon(3)) and the journal keeps its own timestamp. Line breaks inside a message are written as {@code \n} so
 * that an event stays one line. An event with an exception (a bug) is followed by its stack trace, each of whose lines
 * carries the same priority under the journal so that {@code journalctl -p err} shows all of it.
 */
public final class LineLayout extends LayoutBase<ILoggingEvent>
{
    private final boolean journal;

    /**
     * @param journal whether lines go to the systemd journal.
     */
    public LineLayout(final boolean journal)
    {
        this.journal = journal;
    }

    public String doLayout(final ILoggingEvent event)
    {
        final StringBuilder line = new StringBuilder(128);
        final String prefix = journal ? "<" + priority(event.getLevel()) + ">" : "";
        line.append(prefix);
        if (!journal)
        {
            line.append(Instant.ofEpochMilli(event.getTimeStamp()).truncatedTo(ChronoUnit.MILLIS)).append(' ');
        }
        final String level = event.getLevel().toString();
        line.append(level).append(" ".repeat(Math.max(1, 6 - level.length())));
        final String logger = event.getLoggerName();
        line.append(logger, logger.lastIndexOf('.') + 1, logger.length()).append(": ");
        final String message = event.getFormattedMessage();
        line.append(null == message ? "" : message.replace("\r", "").replace("\n", "\\n")).append('\n');
        final IThrowableProxy throwable = event.getThrowableProxy();
        if (null != throwable)
        {
            for (final String traceLine : ThrowableProxyUtil.asString(throwable).split("\n"))
            {
                line.append(prefix).append(traceLine).append('\n');
            }
        }
        return line.toString();
    }

    /**
     * @return the syslog priority of a level: 3 error, 4 warning, 6 info, 7 debug.
     */
    static int priority(final Level level)
    {
        return switch (level.toInt())
        {
            case Level.ERROR_INT -> 3;
            case Level.WARN_INT -> 4;
            case Level.INFO_INT -> 6;
            default -> 7;
        };
    }
}
