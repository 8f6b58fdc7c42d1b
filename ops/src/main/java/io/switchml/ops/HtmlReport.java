package io.switchml.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One self-contained HTML page (inline CSS and SVG, no script, nothing fetched) about a window of slot
 * latency: a summary table, the estimated latency distribution, the percentile curve, latency percentiles
 * over time and slots completed per second over time.
 */
final class HtmlReport
{
    private static final int WIDTH = 960;
    private static final int HEIGHT = 320;
    private static final int LEFT = 78;
    private static final int RIGHT = 24;
    private static final int TOP = 28;
    private static final int BOTTOM = 48;
    private static final String[] COLORS = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};
    private static final long[] TIME_STEPS_MS = {
        1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
        3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000};

    private HtmlReport()
    {
    }

    /**
     * @return the page.
     */
    static String render(final LatencyWindow window, final String journal, final long fromMs, final long toMs, final long nowMs)
    {
        final StringBuilder html = new StringBuilder(64 * 1024);
        html.append("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
            .append("<title>SwitchML slot latency ").append(escape(Format.time(fromMs))).append(" to ")
            .append(escape(Format.time(toMs))).append("</title>\n<style>\n")
            .append("body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1000px;color:#222}\n")
            .append("h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin:28px 0 4px}\n")
            .append("p.meta,p.note{color:#555;font-size:13px;margin:4px 0}\n")
            .append("table{border-collapse:collapse;font-size:14px;margin-top:12px}\n")
            .append("th,td{padding:4px 12px;text-align:right;border-bottom:1px solid #ddd}th:first-child,td:first-child{text-align:left}\n")
            .append("svg{background:#fff;border:1px solid #e4e4e4;margin-top:6px}\n")
            .append("svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#333}\n")
            .append(".grid{stroke:#eee}.axis{stroke:#888}\n")
            .append("</style>\n</head>\n<body>\n");

        final List<Integer> shards = window.shards();
        final double seconds = Math.max(1, window.endMs() - window.startMs()) / 1000.0;
        html.append("<h1>SwitchML appliance: slot-completion latency</h1>\n")
            .append("<p class=\"meta\">Window ").append(escape(Format.time(fromMs))).append(" to ").append(escape(Format.time(toMs)))
            .append(" &middot; ").append(window.snapshots().size()).append(" snapshots of ").append(shards.size())
            .append(" shard(s) from <code>").append(escape(journal)).append("</code> &middot; generated ")
            .append(escape(Format.time(nowMs))).append("</p>\n")
            .append("<p class=\"meta\">").append(escape(Format.count(window.count()))).append(" slots completed, ")
            .append(escape(Format.si(window.count() / seconds))).append(" slots/s on average.</p>\n");

        summaryTable(html, window, shards);
        html.append("<p class=\"note\">Latency is the time a slot takes from its first contribution to its result. ")
            .append("The journal keeps, per shard and interval, the count, min, p50, p90, p99, p99.9 and max; percentiles over ")
            .append("more than one interval, and the distribution below, are estimated by mixing the intervals' distributions ")
            .append("(piecewise linear in log latency between those points) in proportion to their counts. Count, min and max are exact.</p>\n");

        if (window.count() > 0)
        {
            html.append("<h2>Latency distribution</h2>\n<p class=\"note\">Estimated slots per latency bucket ")
                .append("(buckets even in log latency); dashed lines mark the percentiles.</p>\n");
            distributionChart(html, window);
            html.append("<h2>Percentile curve</h2>\n<p class=\"note\">Latency at each percentile of the window ")
                .append("(log scales); the dotted line is the maximum.</p>\n");
            percentileChart(html, window);
        }
        final List<LatencyWindow.Interval> timeline = window.timeline(400);
        html.append("<h2>Latency over time</h2>\n<p class=\"note\">Percentiles per snapshot interval, all shards together ")
            .append("(log scale); intervals without completed slots are gaps.</p>\n");
        latencyOverTime(html, timeline);
        html.append("<h2>Throughput over time</h2>\n<p class=\"note\">Slots completed per second in each snapshot interval ")
            .append("(the interval's count over its length), all jobs");
        html.append(shards.size() > 1 ? "; one line per shard and their total.</p>\n" : ".</p>\n");
        throughputOverTime(html, window, timeline, shards);
        html.append("</body>\n</html>\n");
        return html.toString();
    }

    private static void summaryTable(final StringBuilder html, final LatencyWindow window, final List<Integer> shards)
    {
        html.append("<table>\n<tr><th></th><th>slots</th><th>min</th>");
        for (final String name : LatencyWindow.REPORTED_NAMES)
        {
            html.append("<th>").append(name).append("</th>");
        }
        html.append("<th>max</th></tr>\n");
        summaryRow(html, shards.size() > 1 ? "all shards" : "shard " + shards.get(0), window);
        if (shards.size() > 1)
        {
            for (final int shard : shards)
            {
                summaryRow(html, "shard " + shard, window.shard(shard));
            }
        }
        html.append("</table>\n");
    }

    private static void summaryRow(final StringBuilder html, final String name, final LatencyWindow window)
    {
        html.append("<tr><td>").append(escape(name)).append("</td><td>").append(Format.count(window.count())).append("</td>");
        html.append("<td>").append(escape(Format.latency(window.count() == 0 ? Double.NaN : window.minNs(), true))).append("</td>");
        for (final double quantile : LatencyWindow.REPORTED_QUANTILES)
        {
            html.append("<td>").append(escape(Format.latency(window.quantileNs(quantile), true))).append("</td>");
        }
        html.append("<td>").append(escape(Format.latency(window.count() == 0 ? Double.NaN : window.maxNs(), true)))
            .append("</td></tr>\n");
    }

    private static void distributionChart(final StringBuilder html, final LatencyWindow window)
    {
        final List<LatencyWindow.Bucket> buckets = window.distribution(40);
        final double[] range = logRange(buckets.get(0).lowNs(), buckets.get(buckets.size() - 1).highNs());
        double most = 0;
        for (final LatencyWindow.Bucket bucket : buckets)
        {
            most = Math.max(most, bucket.count());
        }
        final double yStep = niceStep(most / 5);
        final double yMax = yStep * Math.max(1, Math.ceil(most * 1.02 / yStep));
        final Svg svg = new Svg(html, "Estimated latency distribution");
        svg.yLinearAxis(yMax, yStep, "slots");
        svg.xLogAxis(range[0], range[1], "latency");
        for (final LatencyWindow.Bucket bucket : buckets)
        {
            final double x0 = svg.xLog(bucket.lowNs(), range);
            final double x1 = svg.xLog(bucket.highNs(), range);
            final double y = svg.yLinear(bucket.count(), 0, yMax);
            html.append(String.format(Locale.ROOT,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.8\">" +
                    "<title>%s to %s: %s slots</title></rect>\n",
                x0 + 0.5, y, Math.max(0.5, x1 - x0 - 1), HEIGHT - BOTTOM - y, COLORS[0],
                escape(Format.latency(bucket.lowNs(), true)), escape(Format.latency(bucket.highNs(), true)),
                Format.count(Math.round(bucket.count()))));
        }
        for (int i = 0; i < LatencyWindow.REPORTED_QUANTILES.length; i++)
        {
            final double value = window.quantileNs(LatencyWindow.REPORTED_QUANTILES[i]);
            final double x = svg.xLog(value, range);
            html.append(String.format(Locale.ROOT,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"5,4\"/>\n" +
                    "<text x=\"%.1f\" y=\"%d\" fill=\"%s\">%s %s</text>\n",
                x, TOP, x, HEIGHT - BOTTOM, COLORS[3], x + 4, TOP + 14 + i * 14, COLORS[3],
                LatencyWindow.REPORTED_NAMES[i], escape(Format.latency(value, true))));
        }
        svg.end();
    }

    private static void percentileChart(final StringBuilder html, final LatencyWindow window)
    {
        final double xMax = 3.3;
        final double[] range = logRange(window.minNs(), window.maxNs());
        final Svg svg = new Svg(html, "Latency by percentile");
        svg.yLogAxis(range[0], range[1], "latency");
        final String[] labels = {"0%", "90%", "99%", "99.9%"};
        for (int tick = 0; tick < labels.length; tick++)
        {
            final double x = svg.xLinear(tick, 0, xMax);
            svg.xTick(x, labels[tick]);
        }
        svg.xLabel("percentile (scale of 1/(1-p))");
        final StringBuilder points = new StringBuilder();
        for (int i = 0; i <= 300; i++)
        {
            final double t = xMax * i / 300.0;
            final double quantile = 1 - Math.pow(10, -t);
            final double value = window.quantileNs(quantile);
            points.append(String.format(Locale.ROOT, "%.1f,%.1f ", svg.xLinear(t, 0, xMax), svg.yLog(value, range)));
        }
        html.append("<polyline fill=\"none\" stroke=\"").append(COLORS[0]).append("\" stroke-width=\"2\" points=\"")
            .append(points.toString().strip()).append("\"/>\n");
        final double yMaxLine = svg.yLog(window.maxNs(), range);
        html.append(String.format(Locale.ROOT,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"2,3\"/>" +
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">max %s</text>\n",
            LEFT, yMaxLine, WIDTH - RIGHT, yMaxLine, COLORS[3], WIDTH - RIGHT - 4, yMaxLine - 4, COLORS[3],
            escape(Format.latency(window.maxNs(), true))));
        for (int i = 0; i < LatencyWindow.REPORTED_QUANTILES.length; i++)
        {
            final double quantile = LatencyWindow.REPORTED_QUANTILES[i];
            final double x = svg.xLinear(-Math.log10(1 - quantile), 0, xMax);
            final double y = svg.yLog(window.quantileNs(quantile), range);
            html.append(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>" +
                    "<text x=\"%.1f\" y=\"%.1f\">%s %s</text>\n", x, y, COLORS[0], x + 6, y + 14,
                LatencyWindow.REPORTED_NAMES[i], escape(Format.latency(window.quantileNs(quantile), true))));
        }
        svg.end();
    }

    private static void latencyOverTime(final StringBuilder html, final List<LatencyWindow.Interval> timeline)
    {
        long low = Long.MAX_VALUE;
        long high = 0;
        for (final LatencyWindow.Interval interval : timeline)
        {
            if (interval.count() > 0)
            {
                low = Math.min(low, interval.window().minNs());
                high = Math.max(high, interval.window().maxNs());
            }
        }
        final long[] times = timeRange(timeline);
        final Svg svg = new Svg(html, "Latency percentiles over time");
        if (high == 0)
        {
            svg.message("no slot completed in this window");
            svg.end();
            return;
        }
        final double[] range = logRange(low, high);
        svg.yLogAxis(range[0], range[1], "latency");
        svg.timeAxis(times[0], times[1]);
        final String[] names = {"p50", "p90", "p99", "p99.9", "max"};
        final double[] quantiles = {0.5, 0.9, 0.99, 0.999, 1.0};
        for (int series = 0; series < names.length; series++)
        {
            final StringBuilder path = new StringBuilder();
            boolean penDown = false;
            for (final LatencyWindow.Interval interval : timeline)
            {
                if (interval.count() == 0)
                {
                    penDown = false;
                    continue;
                }
                final double x = svg.xLinear(middle(interval), times[0], times[1]);
                final double y = svg.yLog(interval.window().quantileNs(quantiles[series]), range);
                path.append(String.format(Locale.ROOT, "%s%.1f,%.1f ", penDown ? "L" : "M", x, y));
                penDown = true;
            }
            final String color = COLORS[series];
            html.append("<path fill=\"none\" stroke=\"").append(color).append("\" stroke-width=\"").append(series == 4 ? "1" : "1.8")
                .append(series == 4 ? "\" stroke-dasharray=\"3,3" : "").append("\" d=\"").append(path.toString().strip()).append("\"/>\n");
            if (timeline.stream().filter(i -> i.count() > 0).count() < 40)
            {
                for (final LatencyWindow.Interval interval : timeline)
                {
                    if (interval.count() > 0)
                    {
                        html.append(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>",
                            svg.xLinear(middle(interval), times[0], times[1]),
                            svg.yLog(interval.window().quantileNs(quantiles[series]), range), color));
                    }
                }
                html.append('\n');
            }
            svg.legend(series, names[series], color);
        }
        svg.end();
    }

    private static void throughputOverTime(
        final StringBuilder html, final LatencyWindow window, final List<LatencyWindow.Interval> timeline, final List<Integer> shards)
    {
        final long[] times = timeRange(timeline);
        double most = 0;
        for (final LatencyWindow.Interval interval : timeline)
        {
            most = Math.max(most, interval.slotsPerSec());
        }
        final double yStep = niceStep(Math.max(1, most) / 5);
        final double yMax = yStep * Math.max(1, Math.ceil(Math.max(1, most) * 1.02 / yStep));
        final Svg svg = new Svg(html, "Slots completed per second over time");
        svg.yLinearAxis(yMax, yStep, "slots/s");
        svg.timeAxis(times[0], times[1]);
        final StringBuilder area = new StringBuilder();
        final StringBuilder line = new StringBuilder();
        final double base = svg.yLinear(0, 0, yMax);
        for (int i = 0; i < timeline.size(); i++)
        {
            final LatencyWindow.Interval interval = timeline.get(i);
            final double x0 = svg.xLinear(interval.startMs(), times[0], times[1]);
            final double x1 = svg.xLinear(interval.endMs(), times[0], times[1]);
            final double y = svg.yLinear(interval.slotsPerSec(), 0, yMax);
            if (i == 0)
            {
                area.append(String.format(Locale.ROOT, "M%.1f,%.1f ", x0, base));
            }
            area.append(String.format(Locale.ROOT, "L%.1f,%.1f L%.1f,%.1f ", x0, y, x1, y));
            line.append(String.format(Locale.ROOT, "%s%.1f,%.1f L%.1f,%.1f ", i == 0 ? "M" : "L", x0, y, x1, y));
            if (i == timeline.size() - 1)
            {
                area.append(String.format(Locale.ROOT, "L%.1f,%.1f Z", x1, base));
            }
        }
        html.append("<path fill=\"").append(COLORS[0]).append("\" fill-opacity=\"0.18\" stroke=\"none\" d=\"")
            .append(area.toString().strip()).append("\"/>\n");
        html.append("<path fill=\"none\" stroke=\"").append(COLORS[0]).append("\" stroke-width=\"2\" d=\"")
            .append(line.toString().strip()).append("\"/>\n");
        svg.legend(0, shards.size() > 1 ? "all shards" : "shard " + shards.get(0), COLORS[0]);
        if (shards.size() > 1)
        {
            for (int s = 0; s < shards.size(); s++)
            {
                final List<LatencyWindow.Interval> shardTimeline = window.shard(shards.get(s)).timeline(400);
                final StringBuilder path = new StringBuilder();
                for (int i = 0; i < shardTimeline.size(); i++)
                {
                    final LatencyWindow.Interval interval = shardTimeline.get(i);
                    final double x = svg.xLinear(middle(interval), times[0], times[1]);
                    path.append(String.format(Locale.ROOT, "%s%.1f,%.1f ", i == 0 ? "M" : "L", x,
                        svg.yLinear(interval.slotsPerSec(), 0, yMax)));
                }
                final String color = COLORS[(s + 1) % COLORS.length];
                html.append("<path fill=\"none\" stroke=\"").append(color).append("\" stroke-width=\"1.3\" d=\"")
                    .append(path.toString().strip()).append("\"/>\n");
                svg.legend(s + 1, "shard " + shards.get(s), color);
            }
        }
        svg.end();
    }

    private static double middle(final LatencyWindow.Interval interval)
    {
        return (interval.startMs() + interval.endMs()) / 2.0;
    }

    private static long[] timeRange(final List<LatencyWindow.Interval> timeline)
    {
        long start = Long.MAX_VALUE;
        long end = Long.MIN_VALUE;
        for (final LatencyWindow.Interval interval : timeline)
        {
            start = Math.min(start, interval.startMs());
            end = Math.max(end, interval.endMs());
        }
        if (start >= end)
        {
            end = start + 1_000;
        }
        return new long[] {start, end};
    }

    private static double[] logRange(final double low, final double high)
    {
        double lo = Math.max(1, low);
        double hi = Math.max(lo, high);
        if (hi / lo < 4)
        {
            final double centre = Math.sqrt(lo * hi);
            lo = centre / 2;
            hi = centre * 2;
        }
        return new double[] {Math.log10(lo / 1.15), Math.log10(hi * 1.15)};
    }

    /**
     * @return the smallest of 1, 2, 2.5 and 5 times a power of ten that is at least the value.
     */
    static double niceStep(final double value)
    {
        if (!(value > 0))
        {
            return 1;
        }
        final double magnitude = Math.pow(10, Math.floor(Math.log10(value)));
        for (final double step : new double[] {1, 2, 2.5, 5, 10})
        {
            if (step * magnitude >= value)
            {
                return step * magnitude;
            }
        }
        return 10 * magnitude;
    }

    static String escape(final String text)
    {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }

    /**
     * One chart: its frame, axes and legend.
     */
    private static final class Svg
    {
        private final StringBuilder html;

        Svg(final StringBuilder html, final String title)
        {
            this.html = html;
            html.append("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"").append(WIDTH).append("\" height=\"").append(HEIGHT)
                .append("\" viewBox=\"0 0 ").append(WIDTH).append(' ').append(HEIGHT).append("\" role=\"img\">\n<title>")
                .append(escape(title)).append("</title>\n");
        }

        double xLinear(final double value, final double min, final double max)
        {
            return LEFT + (value - min) / (max - min) * (WIDTH - LEFT - RIGHT);
        }

        double yLinear(final double value, final double min, final double max)
        {
            return HEIGHT - BOTTOM - (value - min) / (max - min) * (HEIGHT - TOP - BOTTOM);
        }

        double xLog(final double ns, final double[] range)
        {
            return xLinear(Math.log10(Math.max(1, ns)), range[0], range[1]);
        }

        double yLog(final double ns, final double[] range)
        {
            return yLinear(Math.log10(Math.max(1, ns)), range[0], range[1]);
        }

        void xTick(final double x, final String label)
        {
            html.append(String.format(Locale.ROOT,
                "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>" +
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                x, TOP, x, HEIGHT - BOTTOM, x, HEIGHT - BOTTOM + 16, escape(label)));
        }

        void xLabel(final String label)
        {
            html.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                (LEFT + WIDTH - RIGHT) / 2, HEIGHT - 8, escape(label)));
            frame();
        }

        void yLinearAxis(final double max, final double step, final String label)
        {
            for (int i = 0; i * step <= max * (1 + 1e-9); i++)
            {
                final double value = i * step;
                final double y = yLinear(value, 0, max);
                html.append(String.format(Locale.ROOT,
                    "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>" +
                        "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                    LEFT, y, WIDTH - RIGHT, y, LEFT - 6, y + 4, escape(Format.siTrim(value))));
            }
            yLabel(label);
        }

        void yLogAxis(final double logMin, final double logMax, final String label)
        {
            for (final double ns : logTicks(logMin, logMax))
            {
                final double y = yLinear(Math.log10(ns), logMin, logMax);
                html.append(String.format(Locale.ROOT,
                    "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>" +
                        "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                    LEFT, y, WIDTH - RIGHT, y, LEFT - 6, y + 4, escape(Format.latency(ns, true))));
            }
            yLabel(label);
        }

        void xLogAxis(final double logMin, final double logMax, final String label)
        {
            for (final double ns : logTicks(logMin, logMax))
            {
                xTick(xLinear(Math.log10(ns), logMin, logMax), Format.latency(ns, true));
            }
            xLabel(label + " (log scale)");
        }

        void timeAxis(final long startMs, final long endMs)
        {
            final long span = endMs - startMs;
            long step = TIME_STEPS_MS[TIME_STEPS_MS.length - 1];
            for (final long candidate : TIME_STEPS_MS)
            {
                if (span / candidate <= 8)
                {
                    step = candidate;
                    break;
                }
            }
            final long offset = java.util.TimeZone.getDefault().getOffset(startMs);
            long tick = Math.floorDiv(startMs + offset + step - 1, step) * step - offset;
            while (tick <= endMs)
            {
                xTick(xLinear(tick, startMs, endMs), Format.clock(tick));
                tick += step;
            }
            xLabel("time (" + Format.time(startMs).substring(0, 10) + ", local)");
        }

        void legend(final int index, final String name, final String color)
        {
            final int x = LEFT + 10 + index * 110;
            html.append(String.format(Locale.ROOT,
                "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                x, TOP - 16, color, x + 18, TOP - 11, escape(name)));
        }

        void message(final String text)
        {
            html.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                WIDTH / 2, HEIGHT / 2, escape(text)));
        }

        void end()
        {
            html.append("</svg>\n");
        }

        private void yLabel(final String label)
        {
            html.append(String.format(Locale.ROOT,
                "<text x=\"14\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 14 %d)\">%s</text>\n",
                (TOP + HEIGHT - BOTTOM) / 2, (TOP + HEIGHT - BOTTOM) / 2, escape(label)));
        }

        private void frame()
        {
            html.append(String.format(Locale.ROOT,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" class=\"axis\" stroke=\"#888\"/>\n",
                LEFT, TOP, WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM));
        }

        private static List<Double> logTicks(final double logMin, final double logMax)
        {
            final List<Double> ticks = new ArrayList<>();
            final boolean fine = logMax - logMin < 2.5;
            for (int decade = (int)Math.floor(logMin); decade <= Math.ceil(logMax); decade++)
            {
                for (final double multiple : fine ? new double[] {1, 2, 5} : new double[] {1})
                {
                    final double value = multiple * Math.pow(10, decade);
                    final double log = Math.log10(value);
                    if (log >= logMin && log <= logMax)
                    {
                        ticks.add(value);
                    }
                }
            }
            return ticks;
        }
    }
}
