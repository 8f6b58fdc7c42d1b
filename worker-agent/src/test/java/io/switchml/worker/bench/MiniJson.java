package io.switchml.worker.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON parser for tests (RFC 8259 values, no extensions), so a test can prove the command's output is
 * JSON rather than just looking like it. Objects become maps, arrays lists, numbers doubles.
 */
final class MiniJson
{
    private final String text;
    private int index;

    private MiniJson(final String text)
    {
        this.text = text;
    }

    static Object parse(final String text)
    {
        final MiniJson parser = new MiniJson(text);
        parser.skipWhitespace();
        final Object value = parser.value();
        parser.skipWhitespace();
        if (parser.index != text.length())
        {
            throw parser.error("trailing characters");
        }
        return value;
    }

    private Object value()
    {
        if (index >= text.length())
        {
            throw error("unexpected end");
        }
        final char c = text.charAt(index);
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
        index++;
        skipWhitespace();
        if (peek() == '}')
        {
            index++;
            return map;
        }
        while (true)
        {
            skipWhitespace();
            final String key = string();
            skipWhitespace();
            expect(':');
            skipWhitespace();
            if (map.put(key, value()) != null)
            {
                throw error("duplicate key " + key);
            }
            skipWhitespace();
            if (peek() == ',')
            {
                index++;
                continue;
            }
            expect('}');
            return map;
        }
    }

    private List<Object> array()
    {
        final List<Object> list = new ArrayList<>();
        index++;
        skipWhitespace();
        if (peek() == ']')
        {
            index++;
            return list;
        }
        while (true)
        {
            skipWhitespace();
            list.add(value());
            skipWhitespace();
            if (peek() == ',')
            {
                index++;
                continue;
            }
            expect(']');
            return list;
        }
    }

    private String string()
    {
        expect('"');
        final StringBuilder builder = new StringBuilder();
        while (true)
        {
            if (index >= text.length())
            {
                throw error("unterminated string");
            }
            final char c = text.charAt(index++);
            if (c == '"')
            {
                return builder.toString();
            }
            if (c < 0x20)
            {
                throw error("control character in string");
            }
            if (c != '\\')
            {
                builder.append(c);
                continue;
            }
            final char escape = text.charAt(index++);
            switch (escape)
            {
                case '"', '\\', '/' -> builder.append(escape);
                case 'b' -> builder.append('\b');
                case 'f' -> builder.append('\f');
                case 'n' -> builder.append('\n');
                case 'r' -> builder.append('\r');
                case 't' -> builder.append('\t');
                case 'u' ->
                {
                    builder.append((char)Integer.parseInt(text.substring(index, index + 4), 16));
                    index += 4;
                }
                default -> throw error("bad escape \\" + escape);
            }
        }
    }

    private Double number()
    {
        final int start = index;
        if (peek() == '-')
        {
            index++;
        }
        if (peek() == '0')
        {
            index++;
        }
        else
        {
            digits();
        }
        if (peek() == '.')
        {
            index++;
            digits();
        }
        if (peek() == 'e' || peek() == 'E')
        {
            index++;
            if (peek() == '+' || peek() == '-')
            {
                index++;
            }
            digits();
        }
        return Double.parseDouble(text.substring(start, index));
    }

    private void digits()
    {
        final int start = index;
        while (index < text.length() && Character.isDigit(text.charAt(index)))
        {
            index++;
        }
        if (start == index)
        {
            throw error("digit expected");
        }
    }

    private Object literal(final String word, final Object value)
    {
        if (!text.startsWith(word, index))
        {
            throw error("expected " + word);
        }
        index += word.length();
        return value;
    }

    private char peek()
    {
        return index < text.length() ? text.charAt(index) : '\0';
    }

    private void expect(final char c)
    {
        if (peek() != c)
        {
            throw error("expected '" + c + "'");
        }
        index++;
    }

    private void skipWhitespace()
    {
        while (index < text.length() && " \t\r\n".indexOf(text.charAt(index)) >= 0)
        {
            index++;
        }
    }

    private IllegalArgumentException error(final String message)
    {
        return new IllegalArgumentException(message + " at " + index + " in: " + text);
    }
}
