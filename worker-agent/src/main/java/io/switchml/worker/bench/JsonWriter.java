package io.switchml.worker.bench;

import io.switchml.protocol.Json;

import java.math.BigDecimal;
import java.math.MathContext;

/**
 * Just enough JSON output for one benchmark report: objects, arrays, strings, integers and doubles, on one line.
 * Doubles get six significant digits in plain notation; a non-finite one is written as null, as JSON requires.
 */
final class JsonWriter
{
    private static final MathContext SIGNIFICANT_DIGITS = new MathContext(6);

    private final StringBuilder out = new StringBuilder(1024);
    private boolean needsComma;

    JsonWriter beginObject()
    {
        comma();
        out.append('{');
        needsComma = false;
        return this;
    }

    JsonWriter endObject()
    {
        out.append('}');
        needsComma = true;
        return this;
    }

    JsonWriter beginArray(final String name)
    {
        name(name);
        out.append('[');
        needsComma = false;
        return this;
    }

    JsonWriter endArray()
    {
        out.append(']');
        needsComma = true;
        return this;
    }

    JsonWriter field(final String name, final String value)
    {
        name(name);
        if (value == null)
        {
            out.append("null");
        }
        else
        {
            string(value);
        }
        needsComma = true;
        return this;
    }

    JsonWriter field(final String name, final long value)
    {
        name(name);
        out.append(value);
        needsComma = true;
        return this;
    }

    JsonWriter field(final String name, final boolean value)
    {
        name(name);
        out.append(value);
        needsComma = true;
        return this;
    }

    JsonWriter field(final String name, final double value)
    {
        name(name);
        return number(value);
    }

    /** An array element. */
    JsonWriter value(final double value)
    {
        comma();
        return number(value);
    }

    private JsonWriter number(final double value)
    {
        if (Double.isFinite(value))
        {
            out.append(new BigDecimal(value).round(SIGNIFICANT_DIGITS).stripTrailingZeros().toPlainString());
        }
        else
        {
            out.append("null");
        }
        needsComma = true;
        return this;
    }

    @Override
    public String toString()
    {
        return out.toString();
    }

    private void name(final String name)
    {
        comma();
        string(name);
        out.append(':');
    }

    private void comma()
    {
        if (needsComma)
        {
            out.append(',');
        }
    }

    private void string(final String value)
    {
        Json.string(out, value);
    }
}
