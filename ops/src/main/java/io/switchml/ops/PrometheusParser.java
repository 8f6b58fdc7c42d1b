package io.switchml.ops;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Parses the Prometheus text exposition format (0.0.4) that the appliance's {@code /metrics} serves:
 * {@code # TYPE} lines, and samples {@code name{label="value",...} value [timestamp]}.
 */
final class PrometheusParser
{
    /**
     * One sample.
     *
     * @param name   metric name, e.g. {@code switchml_shard_packets_in}.
     * @param labels label values by label name, in the order written.
     * @param value  the sample value (NaN, +Inf and -Inf included).
     * @param type   the family's declared type (counter, gauge, summary, ...), or "untyped".
     */
    record Sample(String name, Map<String, String> labels, double value, String type)
    {
    }

    private PrometheusParser()
    {
    }

    /**
     * @return the samples in the order written.
     * @throws IllegalArgumentException naming the line that is not valid exposition text.
     */
    static List<Sample> parse(final String text)
    {
        final List<Sample> samples = new ArrayList<>();
        final Map<String, String> types = new HashMap<>();
        int lineNumber = 0;
        for (final String rawLine : text.split("\n"))
        {
            lineNumber++;
            final String line = rawLine.strip();
            if (line.isEmpty())
            {
                continue;
            }
            if (line.startsWith("#"))
            {
                final String[] parts = line.split("\\s+", 4);
                if (parts.length >= 4 && "TYPE".equals(parts[1]))
                {
                    types.put(parts[2], parts[3]);
                }
                continue;
            }
            try
            {
                samples.add(sample(line, types));
            }
            catch (final RuntimeException ex)
            {
                throw new IllegalArgumentException("bad metrics line " + lineNumber + " '" + line + "': " + ex.getMessage(), ex);
            }
        }
        return samples;
    }

    private static Sample sample(final String line, final Map<String, String> types)
    {
        int position = 0;
        while (position < line.length() && line.charAt(position) != '{' && !Character.isWhitespace(line.charAt(position)))
        {
            position++;
        }
        final String name = line.substring(0, position);
        Map<String, String> labels = Collections.emptyMap();
        if (position < line.length() && line.charAt(position) == '{')
        {
            labels = new LinkedHashMap<>();
            position++;
            while (true)
            {
                while (line.charAt(position) == ',' || line.charAt(position) == ' ')
                {
                    position++;
                }
                if (line.charAt(position) == '}')
                {
                    position++;
                    break;
                }
                final int equals = line.indexOf('=', position);
                final String labelName = line.substring(position, equals).strip();
                position = equals + 1;
                if (line.charAt(position) != '"')
                {
                    throw new IllegalArgumentException("label value of " + labelName + " is not quoted");
                }
                position++;
                final StringBuilder value = new StringBuilder();
                while (line.charAt(position) != '"')
                {
                    char c = line.charAt(position++);
                    if (c == '\\')
                    {
                        final char escaped = line.charAt(position++);
                        c = escaped == 'n' ? '\n' : escaped;
                    }
                    value.append(c);
                }
                position++;
                labels.put(labelName, value.toString());
            }
        }
        final String[] rest = line.substring(position).strip().split("\\s+");
        final double value = switch (rest[0])
        {
            case "NaN" -> Double.NaN;
            case "+Inf", "Inf" -> Double.POSITIVE_INFINITY;
            case "-Inf" -> Double.NEGATIVE_INFINITY;
            default -> Double.parseDouble(rest[0]);
        };
        return new Sample(name, labels, value, types.getOrDefault(familyOf(name, types), "untyped"));
    }

    private static String familyOf(final String name, final Map<String, String> types)
    {
        if (types.containsKey(name))
        {
            return name;
        }
        for (final String suffix : new String[] {"_sum", "_count", "_bucket"})
        {
            if (name.endsWith(suffix) && types.containsKey(name.substring(0, name.length() - suffix.length())))
            {
                return name.substring(0, name.length() - suffix.length());
            }
        }
        return name;
    }
}
