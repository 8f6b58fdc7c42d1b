package io.switchml.protocol.logging;

import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * The {@code --log-level} option, mixed into the commands that run a daemon or a long-lived agent.
 */
public final class LogLevelOption
{
    /**
     * Apply the level as soon as picocli parses it, before the command runs.
     */
    @Option(names = "--log-level", paramLabel = "LEVEL", converter = LevelConverter.class,
        description = "Least severe events logged to stderr (the journal under systemd): error, warn, info, debug or " +
            "trace (default " + Logging.LEVEL_DEFAULT + ").")
    void logLevel(final String level)
    {
        Logging.level(level);
    }

    /** Rejects a level picocli should report as a bad option value. */
    static final class LevelConverter implements CommandLine.ITypeConverter<String>
    {
        public String convert(final String value)
        {
            try
            {
                Logging.parse(value);
                return value;
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        }
    }
}
