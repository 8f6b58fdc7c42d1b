package io.switchml.offload.tofino.p4runtime;

import com.google.protobuf.TextFormat;
import io.switchml.offload.tofino.PipelineException;
import p4.config.v1.P4InfoOuterClass.Action;
import p4.config.v1.P4InfoOuterClass.MatchField;
import p4.config.v1.P4InfoOuterClass.P4Info;
import p4.config.v1.P4InfoOuterClass.Register;
import p4.config.v1.P4InfoOuterClass.Table;
import p4.config.v1.P4InfoOuterClass.ValueSet;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A P4Info by name and by id, for both sides of P4Runtime: the client turns the control plane's names into ids, the
 * model's server turns ids back into names. Unknown names and ids fail naming them. {@link #resolve} maps a
 * compiler's P4Info (its own ids, names prefixed with the pipeline instance) onto the names the control plane uses;
 * {@link P4InfoMatch} does the matching and the checks.
 */
public final class P4InfoIndex
{
    /** The P4Info of switchml.p4 on the class path (copied from tofino-p4/p4 by the build). */
    public static final String RESOURCE = "/p4/switchml.p4info.txtpb";

    private final P4Info info;
    private final Map<String, Table> tables = new LinkedHashMap<>();
    private final Map<Integer, Table> tablesById = new HashMap<>();
    private final Map<String, Action> actions = new LinkedHashMap<>();
    private final Map<Integer, Action> actionsById = new HashMap<>();
    private final Map<String, Register> registers = new LinkedHashMap<>();
    private final Map<Integer, Register> registersById = new HashMap<>();
    private final Map<String, ValueSet> valueSets = new LinkedHashMap<>();
    private final Map<Integer, ValueSet> valueSetsById = new HashMap<>();
    private final Map<String, String> canonicalNames = new HashMap<>();

    public P4InfoIndex(final P4Info info)
    {
        this(info, true);
    }

    /**
     * @param indexAll whether to index every entity under its own name; {@link #resolve} indexes only what it maps.
     */
    private P4InfoIndex(final P4Info info, final boolean indexAll)
    {
        this.info = info;
        if (!indexAll)
        {
            return;
        }
        info.getTablesList().forEach(table -> map(table.getPreamble().getName(), table));
        info.getActionsList().forEach(action -> map(action.getPreamble().getName(), action));
        info.getRegistersList().forEach(register -> map(register.getPreamble().getName(), register));
        info.getValueSetsList().forEach(valueSet -> map(valueSet.getPreamble().getName(), valueSet));
    }

    /**
     * Index a switch's (or a compiler's) P4Info under the names of the program we expect, checked by
     * {@link P4InfoMatch}: see there for what must agree.
     *
     * @param running  the P4Info the switch runs or will run.
     * @param expected what the control plane uses: {@link #switchml()}.
     * @return an index whose lookups by the expected names give the running P4Info's entities.
     * @throws PipelineException FAILED_PRECONDITION naming the first thing missing, ambiguous or different.
     */
    public static P4InfoIndex resolve(final P4Info running, final P4InfoIndex expected) throws PipelineException
    {
        return P4InfoMatch.resolve(running, expected);
    }

    /**
     * @return an index of nothing yet, over the P4Info a switch runs, for {@link P4InfoMatch} to fill.
     */
    static P4InfoIndex empty(final P4Info running)
    {
        return new P4InfoIndex(running, false);
    }

    /**
     * Read a P4Info file: the text format bf-p4c writes with {@code --p4runtime-files x.txtpb} (or {@code .txt}), else
     * the binary protobuf.
     */
    public static P4Info read(final java.nio.file.Path file) throws IOException
    {
        final byte[] bytes = java.nio.file.Files.readAllBytes(file);
        final String name = file.getFileName().toString();
        return name.endsWith(".txtpb") || name.endsWith(".txt") || name.endsWith(".pbtxt") ? parseText(bytes) :
            P4Info.parseFrom(bytes);
    }

    private static P4Info parseText(final byte[] text) throws TextFormat.ParseException
    {
        final P4Info.Builder builder = P4Info.newBuilder();
        TextFormat.merge(new String(text, StandardCharsets.UTF_8), builder);
        return builder.build();
    }

    /**
     * @return the name the control plane uses for an entity of this index's P4Info ({@code SwitchMLIngress.job_table}
     * for bf-p4c's {@code pipe.SwitchMLIngress.job_table}); the name itself for one the control plane does not use.
     */
    public String canonical(final String runningName)
    {
        return canonicalNames.getOrDefault(runningName, runningName);
    }

    /** Index a running entity under the name the control plane uses for it. */
    void map(final String canonical, final Table table)
    {
        put(canonical, table.getPreamble().getName(), table.getPreamble().getId(), table, tables, tablesById);
    }

    void map(final String canonical, final Action action)
    {
        put(canonical, action.getPreamble().getName(), action.getPreamble().getId(), action, actions, actionsById);
    }

    void map(final String canonical, final Register register)
    {
        put(canonical, register.getPreamble().getName(), register.getPreamble().getId(), register, registers, registersById);
    }

    void map(final String canonical, final ValueSet valueSet)
    {
        put(canonical, valueSet.getPreamble().getName(), valueSet.getPreamble().getId(), valueSet, valueSets, valueSetsById);
    }

    private <T> void put(final String canonical, final String runningName, final int id, final T entity, final Map<String, T> byName,
        final Map<Integer, T> byId)
    {
        byName.put(canonical, entity);
        byId.put(id, entity);
        canonicalNames.put(runningName, canonical);
    }

    Map<String, Table> tables()
    {
        return tables;
    }

    Map<String, Action> actions()
    {
        return actions;
    }

    Map<String, Register> registers()
    {
        return registers;
    }

    Map<String, ValueSet> valueSets()
    {
        return valueSets;
    }

    /**
     * @return the action of this id, or null when the index has none (a compiler's own NoAction).
     */
    Action actionOrNull(final int id)
    {
        return actionsById.get(id);
    }

    /**
     * @return the P4Info of switchml.p4 from the class path.
     */
    public static P4InfoIndex switchml()
    {
        try (InputStream in = P4InfoIndex.class.getResourceAsStream(RESOURCE))
        {
            if (in == null)
            {
                throw new IllegalStateException(RESOURCE + " is not on the class path");
            }
            return new P4InfoIndex(parseText(in.readAllBytes()));
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("cannot read " + RESOURCE + ": " + ex.getMessage(), ex);
        }
    }

    public P4Info info()
    {
        return info;
    }

    Table table(final String name) throws PipelineException
    {
        return found(tables.get(name), "table " + name);
    }

    Table table(final int id) throws PipelineException
    {
        return found(tablesById.get(id), "table id " + id);
    }

    Action action(final String name) throws PipelineException
    {
        return found(actions.get(name), "action " + name);
    }

    Action action(final int id) throws PipelineException
    {
        return found(actionsById.get(id), "action id " + id);
    }

    Register register(final String name) throws PipelineException
    {
        return found(registers.get(name), "register " + name);
    }

    Register register(final int id) throws PipelineException
    {
        return found(registersById.get(id), "register id " + id);
    }

    ValueSet valueSet(final String name) throws PipelineException
    {
        return found(valueSets.get(name), "value set " + name);
    }

    ValueSet valueSet(final int id) throws PipelineException
    {
        return found(valueSetsById.get(id), "value set id " + id);
    }

    static MatchField matchField(final Table table, final String name) throws PipelineException
    {
        for (final MatchField field : table.getMatchFieldsList())
        {
            if (field.getName().equals(name))
            {
                return field;
            }
        }
        throw new PipelineException("NOT_FOUND", table.getPreamble().getName() + " has no match field " + name);
    }

    static MatchField matchField(final Table table, final int id) throws PipelineException
    {
        for (final MatchField field : table.getMatchFieldsList())
        {
            if (field.getId() == id)
            {
                return field;
            }
        }
        throw new PipelineException("NOT_FOUND", table.getPreamble().getName() + " has no match field id " + id);
    }

    static Action.Param param(final Action action, final String name) throws PipelineException
    {
        for (final Action.Param param : action.getParamsList())
        {
            if (param.getName().equals(name))
            {
                return param;
            }
        }
        throw new PipelineException("NOT_FOUND", action.getPreamble().getName() + " has no parameter " + name);
    }

    static Action.Param param(final Action action, final int id) throws PipelineException
    {
        for (final Action.Param param : action.getParamsList())
        {
            if (param.getId() == id)
            {
                return param;
            }
        }
        throw new PipelineException("NOT_FOUND", action.getPreamble().getName() + " has no parameter id " + id);
    }

    private static <T> T found(final T value, final String what) throws PipelineException
    {
        if (value == null)
        {
            throw new PipelineException("NOT_FOUND", "the P4Info has no " + what);
        }
        return value;
    }
}
