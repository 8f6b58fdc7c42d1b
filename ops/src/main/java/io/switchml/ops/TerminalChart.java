package io.switchml.ops;

import java.util.List;

/**
 * Charts made of characters: horizontal bars and sparklines, in Unicode block elements or, for a stdout
 * that is not UTF-8 (or --ascii), in ASCII.
 */
final class TerminalChart
{
    private static final char[] EIGHTHS = {' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'};
    private static final char[] SPARKS = {'▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'};
    private static final char[] ASCII_SPARKS = {'_', '.', ':', '-', '=', '+', '*', '#'};

    private TerminalChart()
    {
    }

    /**
     * @return a bar of value/max of width characters, padded with spaces to width.
     */
    static String bar(final double value, final double max, final int width, final boolean unicode)
    {
        final double fraction = max <= 0 || Double.isNaN(value) ? 0.0 : Math.min(1.0, Math.max(0.0, value / max));
        final StringBuilder bar = new StringBuilder(width);
        if (unicode)
        {
            final int eighths = (int)Math.round(fraction * width * 8);
            bar.append("█".repeat(eighths / 8));
            if (eighths % 8 > 0)
            {
                bar.append(EIGHTHS[eighths % 8]);
            }
            if (eighths == 0 && value > 0)
            {
                bar.append(EIGHTHS[1]);
            }
        }
        else
        {
            final int cells = (int)Math.round(fraction * width);
            bar.append("#".repeat(cells));
            if (cells == 0 && value > 0)
            {
                bar.append('.');
            }
        }
        while (bar.length() < width)
        {
            bar.append(' ');
        }
        return bar.toString();
    }

    /**
     * @return one character per value, its height scaled from 0 to the largest value; NaN is a space.
     */
    static String sparkline(final List<Double> values, final boolean unicode)
    {
        final char[] levels = unicode ? SPARKS : ASCII_SPARKS;
        double max = 0;
        for (final double value : values)
        {
            if (!Double.isNaN(value))
            {
                max = Math.max(max, value);
            }
        }
        final StringBuilder line = new StringBuilder(values.size());
        for (final double value : values)
        {
            if (Double.isNaN(value))
            {
                line.append(' ');
            }
            else
            {
                final int level = max <= 0 ? 0 : (int)Math.round(value / max * (levels.length - 1));
                line.append(levels[Math.max(0, Math.min(levels.length - 1, level))]);
            }
        }
        return line.toString();
    }
}
