package io.switchml.offload.tofino.model;

import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * An exact-match table of the model, with the size the P4 program declares and the errors a switch returns for
 * writes it cannot apply. Keys and parameters are held as unsigned integers of their declared widths.
 */
final class ExactTable
{
    /** An installed entry: its action and parameter values by name. */
    record Entry(String action, Map<String, Long> params)
    {
        long param(final String name)
        {
            return params.get(name);
        }
    }

    private final P4Names.Table table;
    private final Map<List<Long>, Entry> entries = new HashMap<>();

    ExactTable(final P4Names.Table table)
    {
        this.table = table;
    }

    String name()
    {
        return table.name();
    }

    int entries()
    {
        return entries.size();
    }

    Entry lookup(final List<Long> key)
    {
        return entries.get(key);
    }

    /**
     * @return every entry as the control plane wrote it: keys and parameters as big-endian byte strings of their widths.
     */
    List<PipelineControl.TableEntry> read()
    {
        final List<PipelineControl.TableEntry> out = new ArrayList<>(entries.size());
        entries.forEach((key, entry) ->
        {
            final List<PipelineControl.ExactMatch> match = new ArrayList<>(key.size());
            for (int i = 0; i < key.size(); i++)
            {
                final P4Names.Field field = table.keys().get(i);
                match.add(new PipelineControl.ExactMatch(field.name(), JobInstaller.bytes(key.get(i), field.bitwidth())));
            }
            final List<PipelineControl.ActionParam> params = new ArrayList<>();
            for (final P4Names.Field param : P4Names.action(entry.action()).params())
            {
                params.add(new PipelineControl.ActionParam(param.name(), JobInstaller.bytes(entry.param(param.name()), param.bitwidth())));
            }
            out.add(new PipelineControl.TableEntry(table.name(), List.copyOf(match), entry.action(), List.copyOf(params)));
        });
        return out;
    }

    void write(final PipelineControl.UpdateType type, final PipelineControl.TableEntry entry) throws PipelineException
    {
        final List<Long> key = key(entry.match());
        switch (type)
        {
            case INSERT ->
            {
                if (entries.containsKey(key))
                {
                    throw new PipelineException("ALREADY_EXISTS", table.name() + ": an entry with key " + key + " exists");
                }
                if (entries.size() >= table.size())
                {
                    throw new PipelineException("RESOURCE_EXHAUSTED", table.name() + " is full (" + table.size() + " entries)");
                }
                entries.put(key, entry(entry));
            }
            case MODIFY ->
            {
                if (!entries.containsKey(key))
                {
                    throw new PipelineException("NOT_FOUND", table.name() + ": no entry with key " + key);
                }
                entries.put(key, entry(entry));
            }
            case DELETE ->
            {
                if (entries.remove(key) == null)
                {
                    throw new PipelineException("NOT_FOUND", table.name() + ": no entry with key " + key);
                }
            }
        }
    }

    private List<Long> key(final List<PipelineControl.ExactMatch> match) throws PipelineException
    {
        if (match.size() != table.keys().size())
        {
            throw new PipelineException("INVALID_ARGUMENT", table.name() + " has " + table.keys().size() + " match fields, got " +
                match.size());
        }
        final Long[] values = new Long[table.keys().size()];
        for (final PipelineControl.ExactMatch field : match)
        {
            int position = -1;
            for (int i = 0; i < table.keys().size(); i++)
            {
                if (table.keys().get(i).name().equals(field.field()))
                {
                    position = i;
                }
            }
            if (position < 0)
            {
                throw new PipelineException("INVALID_ARGUMENT", table.name() + " has no match field " + field.field());
            }
            values[position] = value(table.name() + " field " + field.field(), field.value(), table.keys().get(position).bitwidth());
        }
        return List.of(values);
    }

    private Entry entry(final PipelineControl.TableEntry entry) throws PipelineException
    {
        if (!table.actions().contains(entry.action()))
        {
            throw new PipelineException("INVALID_ARGUMENT", table.name() + " has no action " + entry.action());
        }
        final P4Names.Action action = P4Names.action(entry.action());
        if (entry.params().size() != action.params().size())
        {
            throw new PipelineException("INVALID_ARGUMENT", entry.action() + " takes " + action.params().size() + " parameters, got " +
                entry.params().size());
        }
        final Map<String, Long> params = new HashMap<>();
        for (final PipelineControl.ActionParam param : entry.params())
        {
            final P4Names.Field declared = action.params().stream().filter(p -> p.name().equals(param.name())).findFirst()
                .orElseThrow(() -> new PipelineException("INVALID_ARGUMENT", entry.action() + " has no parameter " + param.name()));
            params.put(param.name(), value(entry.action() + " parameter " + param.name(), param.value(), declared.bitwidth()));
        }
        return new Entry(entry.action(), Map.copyOf(params));
    }

    static long value(final String what, final byte[] bytes, final int bitwidth) throws PipelineException
    {
        final BigInteger value = new BigInteger(1, bytes);
        if (value.bitLength() > bitwidth)
        {
            throw new PipelineException("INVALID_ARGUMENT", what + " does not fit in " + bitwidth + " bits");
        }
        return value.longValue();
    }
}
