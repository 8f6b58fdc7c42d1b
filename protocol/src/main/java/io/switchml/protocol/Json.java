package io.switchml.protocol;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Just enough JSON for the ops CLI and the benchmark's {@code --json}: writes maps (in their iteration order),
 * lists, strings, numbers, booleans and null, and parses the same back (the appliance's {@code /health} body,
 * and the tests reading {@code --json} output). Non-finite doubles are written as null, as JSON requires.
 */
public final class Json
{
    private Json()
    {
    }

    /**
     * @return the value as JSON on one line.
     */
    public static String write(final Object value)
    {
        final StringBuilder out = new StringBuilder(256);
        write(out, value, -1, 0);
        return out.toString();
    }

    /**
     * @return the value as indented JSON, two spaces a level.
     */
    public static String pretty(final Object value)
    {
        final StringBuilder out = new StringBuilder(1024);
        write(out, value, 2, 0);
        return out.toString();
    }

    private static void write(final StringBuilder out, final Object value, final int indent, final int depth)
    {
        switch (value)
        {
            case null -> out.append("null");
            case String text -> string(out, text);
            case Double number -> out.append(Double.isFinite(number) ? number.toString() : "null");
            case Float number -> out.append(Float.isFinite(number) ? number.toString() : "null");
            case Number number -> out.append(number);
            case Boolean bool -> out.append(bool);
            case Map<?, ?> map ->
            {
                out.append('{');
                boolean first = true;
                for (final Map.Entry<?, ?> entry : map.entrySet())
                {
                    out.append(first ? "" : ",");
                    newline(out, indent, depth + 1);
                    string(out, String.valueOf(entry.getKey()));
                    out.append(indent < 0 ? ":" : ": ");
                    write(out, entry.getValue(), indent, depth + 1);
                    first = false;
                }
                if (!first)
                {
                    newline(out, indent, depth);
                }
                out.append('}');
            }
            case Iterable<?> list ->
            {
                out.append('[');
                boolean first = true;
                for (final Object element : list)
                {
                    out.append(first ? "" : ",");
                    newline(out, indent, depth + 1);
                    write(out, element, indent, depth + 1);
                    first = false;
                }
                if (!first)
                {
                    newline(out, indent, depth);
                }
                out.append(']');
            }
            default -> string(out, value.toString());
        }
    }

    private static void newline(final StringBuilder out, final int indent, final int depth)
    {
        if (indent >= 0)
        {
            out.append('\n').append(" ".repeat(indent * depth));
        }
    }

    /**
     * Append a string as a quoted, escaped JSON string.
     */
    public static void string(final StringBuilder out, final String text)
    {
        out.append('"');
        for (int i = 0; i < text.length(); i++)
        {
            final char c = text.charAt(i);
            switch (c)
            {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default ->
                {
                    if (c < 0x20)
                    {
                        out.append(String.format(java.util.Locale.ROOT, "\\u%04x", (int)c));
                    }
                    else
                    {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /**
     * Parse one JSON value: objects become {@link LinkedHashMap}s, arrays {@link ArrayList}s, integers
     * {@link Long}s, other numbers {@link Double}s.
     *
     * @throws IllegalArgumentException naming the offset of the first error.
     */
    public static Object parse(final String text)
    {
        final Parser parser = new Parser(text);
        final Object value = parser.value();
        parser.skipWhitespace();
        if (parser.position != text.length())
        {
            throw parser.error("trailing characters");
        }
        return value;
    }

    private static final class Parser
    {
        private final String text;
        private int position;

        Parser(final String text)
        {
            this.text = text;
        }

        Object value()
        {
            skipWhitespace();
            if (position >= text.length())
            {
                throw error("unexpected end");
            }
            final char c = text.charAt(position);
            return switch (c)
            {
                case '{' -> object();
                case '[' -> array();
                case '"' -> string();
                case 't' -> literal("true", Boolean.TRUE);
                case 'f' -> literal("false", Boolean.FALSE);
                case 'n' -> literal("null", null);
                default -> number();
            };
        }

        private Map<String, Object> object()
        {
            final Map<String, Object> map = new LinkedHashMap<>();
            position++;
            skipWhitespace();
            if (peek() == '}')
            {
                position++;
                return map;
            }
            while (true)
            {
                skipWhitespace();
                final String key = string();
                skipWhitespace();
                expect(':');
                map.put(key, value());
                skipWhitespace();
                if (peek() == ',')
                {
                    position++;
                    continue;
                }
                expect('}');
                return map;
            }
        }

        private List<Object> array()
        {
            final List<Object> list = new ArrayList<>();
            position++;
            skipWhitespace();
            if (peek() == ']')
            {
                position++;
                return list;
            }
            while (true)
            {
                list.add(value());
                skipWhitespace();
                if (peek() == ',')
                {
                    position++;
                    continue;
                }
                expect(']');
                return list;
            }
        }

        private String string()
        {
            expect('"');
            final StringBuilder out = new StringBuilder();
            while (true)
            {
                if (position >= text.length())
                {
                    throw error("unterminated string");
                }
                final char c = text.charAt(position++);
                if (c == '"')
                {
                    return out.toString();
                }
                if (c != '\\')
                {
                    out.append(c);
                    continue;
                }
                final char escaped = text.charAt(position++);
                switch (escaped)
                {
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'u' ->
                    {
                        out.append((char)Integer.parseInt(text.substring(position, position + 4), 16));
                        position += 4;
                    }
                    default -> out.append(escaped);
                }
            }
        }

        private Object number()
        {
            final int start = position;
            while (position < text.length() && "+-0123456789.eE".indexOf(text.charAt(position)) >= 0)
            {
                position++;
            }
            final String number = text.substring(start, position);
            if (number.isEmpty())
            {
                throw error("unexpected character '" + text.charAt(start) + "'");
            }
            try
            {
                return number.matches("-?\\d+") ? (Object)Long.parseLong(number) : (Object)Double.parseDouble(number);
            }
            catch (final NumberFormatException ex)
            {
                throw error("bad number '" + number + "'");
            }
        }

        private Object literal(final String word, final Object value)
        {
            if (!text.startsWith(word, position))
            {
                throw error("unexpected token");
            }
            position += word.length();
            return value;
        }

        private char peek()
        {
            return position < text.length() ? text.charAt(position) : '\0';
        }

        private void expect(final char c)
        {
            if (peek() != c)
            {
                throw error("expected '" + c + "'");
            }
            position++;
        }

        void skipWhitespace()
        {
            while (position < text.length() && Character.isWhitespace(text.charAt(position)))
            {
                position++;
            }
        }

        IllegalArgumentException error(final String what)
        {
            return new IllegalArgumentException("bad JSON at offset " + position + ": " + what);
        }
    }
}
