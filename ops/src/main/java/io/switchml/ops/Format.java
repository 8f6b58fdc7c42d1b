package io.switchml.ops;

import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.Locale;

/**
 * Human-readable numbers, sizes, durations, latencies and times for the text output.
 */
final class Format
{
    private static final DateTimeFormatter TIME =
        DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSS").withZone(ZoneId.systemDefault());
    private static final DateTimeFormatter CLOCK = DateTimeFormatter.ofPattern("HH:mm:ss").withZone(ZoneId.systemDefault());

    private Format()
    {
    }

    /**
     * @return e.g. "1,234,567".
     */
    static String count(final long value)
    {
        return String.format(Locale.ROOT, "%,d", value);
    }

    /**
     * @return e.g. "12.5 MiB", "512 B".
     */
    static String bytes(final long bytes)
    {
        if (bytes < 1024)
        {
            return bytes + " B";
        }
        final String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double value = bytes / 1024.0;
        int unit = 0;
        while (value >= 1024 && unit < units.length - 1)
        {
            value /= 1024;
            unit++;
        }
        return String.format(Locale.ROOT, value < 10 ? "%.2f %s" : value < 100 ? "%.1f %s" : "%.0f %s", value, units[unit]);
    }

    /**
     * @return e.g. "2d 3h 4m", "1h 2m 3s", "4.2s".
     */
    static String duration(final long ms)
    {
        if (ms < 60_000)
        {
            return String.format(Locale.ROOT, "%.1fs", ms / 1000.0);
        }
        final long seconds = ms / 1000;
        final long days = seconds / 86_400;
        final long hours = seconds % 86_400 / 3600;
        final long minutes = seconds % 3600 / 60;
        if (days > 0)
        {
            return days + "d " + hours + "h " + minutes + "m";
        }
        return (hours > 0 ? hours + "h " : "") + minutes + "m " + seconds % 60 + "s";
    }

    /**
     * @return a latency with three significant digits and a unit, e.g. "85.3 µs" ("us" when not unicode).
     */
    static String latency(final double ns, final boolean unicode)
    {
        if (Double.isNaN(ns))
        {
            return "-";
        }
        if (ns < 1_000)
        {
            return significant(ns) + " ns";
        }
        if (ns < 1_000_000)
        {
            return significant(ns / 1e3) + (unicode ? " µs" : " us");
        }
        if (ns < 1_000_000_000)
        {
            return significant(ns / 1e6) + " ms";
        }
        return significant(ns / 1e9) + " s";
    }

    /**
     * @return a rate or amount with three significant digits and k/M/G, e.g. "12.3k".
     */
    static String si(final double value)
    {
        final double abs = Math.abs(value);
        if (abs < 1_000)
        {
            return significant(value);
        }
        if (abs < 1e6)
        {
            return significant(value / 1e3) + "k";
        }
        if (abs < 1e9)
        {
            return significant(value / 1e6) + "M";
        }
        return significant(value / 1e9) + "G";
    }

    /**
     * @return {@link #si(double)} without trailing zeros, for axis labels: "2.5k", "20k".
     */
    static String siTrim(final double value)
    {
        return si(value).replaceAll("\\.(\\d*?)0+(?=[kMG]?$)", ".$1").replace(".k", "k").replace(".M", "M")
            .replace(".G", "G").replaceAll("\\.$", "");
    }

    static String significant(final double value)
    {
        final double abs = Math.abs(value);
        if (abs >= 100 || value == Math.rint(value) && abs < 1e15)
        {
            return String.format(Locale.ROOT, "%.0f", value);
        }
        return String.format(Locale.ROOT, abs >= 10 ? "%.1f" : "%.2f", value);
    }

    /**
     * @return the epoch ms as local date and time, e.g. "2026-11-05 14:03:12.345".
     */
    static String time(final long epochMs)
    {
        return TIME.format(Instant.ofEpochMilli(epochMs));
    }

    /**
     * @return the epoch ms as a local wall clock, e.g. "14:03:12".
     */
    static String clock(final long epochMs)
    {
        return CLOCK.format(Instant.ofEpochMilli(epochMs));
    }

    /**
     * @return the key in the --json output's style, snake_case: "slotTimeoutMs" -> "slot_timeout_ms" (the control
     * protocol's and /health's keys are camelCase).
     */
    static String snakeCase(final String key)
    {
        final StringBuilder snake = new StringBuilder(key.length() + 4);
        for (int i = 0; i < key.length(); i++)
        {
            final char c = key.charAt(i);
            if (Character.isUpperCase(c))
            {
                if (i > 0 && key.charAt(i - 1) != '_')
                {
                    snake.append('_');
                }
                snake.append(Character.toLowerCase(c));
            }
            else
            {
                snake.append(c);
            }
        }
        return snake.toString();
    }

    /**
     * @return the epoch ms in ISO-8601 UTC, for JSON.
     */
    static String iso(final long epochMs)
    {
        return Instant.ofEpochMilli(epochMs).toString();
    }

    /**
     * @return the text cut to at most width characters, with an ellipsis when cut.
     */
    static String fit(final String text, final int width)
    {
        return text.length() <= width ? text : text.substring(0, Math.max(0, width - 1)) + "~";
    }
}
