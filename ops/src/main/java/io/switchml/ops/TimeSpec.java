package io.switchml.ops;

import picocli.CommandLine;

import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneId;
import java.time.format.DateTimeParseException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A point in time given on the command line, as epoch ms: "now", an age ("90s", "15m", "2h", "1d",
 * "500ms": that long ago), an ISO-8601 instant ("2026-11-05T14:00:00Z"), a local date and time
 * ("2026-11-05T14:00" or "2026-11-05 14:00:00") or a local time of today ("14:00").
 */
final class TimeSpec implements CommandLine.ITypeConverter<Long>
{
    private static final Pattern AGE = Pattern.compile("(\\d+(?:\\.\\d+)?)(ms|s|m|h|d)");

    public Long convert(final String value)
    {
        return parse(value, System.currentTimeMillis());
    }

    /**
     * @return the epoch ms the text names, ages counted back from nowMs.
     * @throws CommandLine.TypeConversionException saying which forms are understood.
     */
    static long parse(final String value, final long nowMs)
    {
        final String text = value.strip();
        if ("now".equalsIgnoreCase(text))
        {
            return nowMs;
        }
        final Matcher age = AGE.matcher(text);
        if (age.matches())
        {
            final double amount = Double.parseDouble(age.group(1));
            final long unitMs = switch (age.group(2))
            {
                case "ms" -> 1;
                case "s" -> 1_000;
                case "m" -> 60_000;
                case "h" -> 3_600_000;
                default -> 86_400_000;
            };
            return nowMs - Math.round(amount * unitMs);
        }
        try
        {
            if (text.endsWith("Z") || text.matches(".*[+-]\\d\\d:\\d\\d$"))
            {
                return java.time.OffsetDateTime.parse(text.endsWith("Z") ? text.substring(0, text.length() - 1) + "+00:00" : text)
                    .toInstant().toEpochMilli();
            }
            if (text.matches("\\d{1,2}:\\d\\d(:\\d\\d(\\.\\d+)?)?"))
            {
                return LocalDate.now().atTime(LocalTime.parse(text.length() == 4 ? "0" + text : text))
                    .atZone(ZoneId.systemDefault()).toInstant().toEpochMilli();
            }
            if (text.matches("\\d{4}-\\d\\d-\\d\\d"))
            {
                return LocalDate.parse(text).atStartOfDay(ZoneId.systemDefault()).toInstant().toEpochMilli();
            }
            return LocalDateTime.parse(text.replace(' ', 'T')).atZone(ZoneId.systemDefault()).toInstant().toEpochMilli();
        }
        catch (final DateTimeParseException ex)
        {
            throw new CommandLine.TypeConversionException("'" + value + "' is not a time: give an age (90s, 15m, 2h, 1d), " +
                "'now', a local time (14:00), a local date and time (2026-11-05T14:00) or an instant (" +
                Instant.ofEpochMilli(nowMs).toString().replaceAll("\\.\\d+Z", "Z") + ")");
        }
    }
}
