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
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A P4Info by name and by id, for both sides of P4Runtime: the client turns the control plane's names into ids, the
 * model's server turns ids back into names. Unknown names and ids fail naming them. {@link #resolve} maps a
 * compiler's P4Info (its own ids, names prefixed with the pipeline instance) onto the names the control plane uses.
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
        for (final Table table : info.getTablesList())
        {
            tables.put(table.getPreamble().getName(), table);
            tablesById.put(table.getPreamble().getId(), table);
        }
        for (final Action action : info.getActionsList())
        {
            actions.put(action.getPreamble().getName(), action);
            actionsById.put(action.getPreamble().getId(), action);
        }
        for (final Register register : info.getRegistersList())
        {
            registers.put(register.getPreamble().getName(), register);
            registersById.put(register.getPreamble().getId(), register);
        }
        for (final ValueSet valueSet : info.getValueSetsList())
        {
            valueSets.put(valueSet.getPreamble().getName(), valueSet);
            valueSetsById.put(valueSet.getPreamble().getId(), valueSet);
        }
    }

    /**
     * Index a switch's (or a compiler's) P4Info under the names of the program we expect, and check that it declares
     * what the control plane uses the way we use it. A compiler names things after its pipeline instance
     * ({@code pipe.SwitchMLIngress.job_table} from bf-p4c for TNA) and numbers them itself: each expected table,
     * action, register and value set is found by its name or a name ending in "." + that name, and is then used by the
     * switch's ids. What must agree: every match field's name, width and kind, every action a table must offer,
     * every action parameter's name and width, every register's cell type, every value set's fields; a table,
     * register or value set may be larger.
     * Anything else the P4Info declares is ignored.
     *
     * @param running  the P4Info the switch runs or will run.
     * @param expected what the control plane uses: {@link #switchml()}.
     * @return an index whose lookups by the expected names give the running P4Info's entities.
     * @throws PipelineException FAILED_PRECONDITION naming the first thing missing, ambiguous or different.
     */
    public static P4InfoIndex resolve(final P4Info running, final P4InfoIndex expected) throws PipelineException
    {
        final P4InfoIndex resolved = new P4InfoIndex(running, false);
        for (final Map.Entry<String, Action> want : expected.actions.entrySet())
        {
            final Action have = named("action", want.getKey(), running.getActionsList(), a -> a.getPreamble().getName());
            if (have.getParamsCount() != want.getValue().getParamsCount())
            {
                throw differs("action " + want.getKey() + " has " + have.getParamsCount() + " parameters, not " +
                    want.getValue().getParamsCount());
            }
            for (final Action.Param param : want.getValue().getParamsList())
            {
                final Action.Param other = have.getParamsList().stream().filter(p -> p.getName().equals(param.getName()))
                    .findFirst().orElseThrow(() -> differs("action " + want.getKey() + " has no parameter " + param.getName()));
                if (other.getBitwidth() != param.getBitwidth())
                {
                    throw differs("action " + want.getKey() + " parameter " + param.getName() + " is " + other.getBitwidth() +
                        " bits, not " + param.getBitwidth());
                }
            }
            resolved.put(want.getKey(), have, have.getPreamble().getId(), resolved.actions, resolved.actionsById);
        }
        for (final Map.Entry<String, Table> want : expected.tables.entrySet())
        {
            final Table have = named("table", want.getKey(), running.getTablesList(), t -> t.getPreamble().getName());
            for (final MatchField field : want.getValue().getMatchFieldsList())
            {
                final MatchField other = have.getMatchFieldsList().stream().filter(f -> f.getName().equals(field.getName()))
                    .findFirst().orElseThrow(() -> differs("table " + want.getKey() + " has no match field " + field.getName()));
                if (other.getBitwidth() != field.getBitwidth() || other.getMatchType() != field.getMatchType())
                {
                    throw differs("table " + want.getKey() + " match field " + field.getName() + " is " + other.getBitwidth() +
                        " bits " + other.getMatchType() + ", not " + field.getBitwidth() + " bits " + field.getMatchType());
                }
            }
            if (have.getMatchFieldsCount() != want.getValue().getMatchFieldsCount())
            {
                throw differs("table " + want.getKey() + " has " + have.getMatchFieldsCount() + " match fields, not " +
                    want.getValue().getMatchFieldsCount());
            }
            for (final p4.config.v1.P4InfoOuterClass.ActionRef ref : want.getValue().getActionRefsList())
            {
                final Action wanted = expected.actionsById.get(ref.getId());
                if (wanted == null)
                {
                    continue; // an action of the compiler's own (NoAction) in an index that was resolved already
                }
                final String action = expected.canonical(wanted.getPreamble().getName());
                final int id = resolved.actions.get(action).getPreamble().getId();
                if (have.getActionRefsList().stream().noneMatch(r -> r.getId() == id))
                {
                    throw differs("table " + want.getKey() + " does not offer action " + action);
                }
            }
            if (have.getSize() < want.getValue().getSize())
            {
                throw differs("table " + want.getKey() + " holds " + have.getSize() + " entries, fewer than " + want.getValue().getSize());
            }
            resolved.put(want.getKey(), have, have.getPreamble().getId(), resolved.tables, resolved.tablesById);
        }
        for (final Map.Entry<String, Register> want : expected.registers.entrySet())
        {
            final Register have = named("register", want.getKey(), running.getRegistersList(), r -> r.getPreamble().getName());
            if (!sameCellType(running, have, expected.info, want.getValue()))
            {
                throw differs("register " + want.getKey() + " cells are " + cellText(running, have) + ", not " +
                    cellText(expected.info, want.getValue()));
            }
            if (have.getSize() < want.getValue().getSize())
            {
                throw differs("register " + want.getKey() + " has " + have.getSize() + " cells, fewer than " + want.getValue().getSize());
            }
            resolved.put(want.getKey(), have, have.getPreamble().getId(), resolved.registers, resolved.registersById);
        }
        for (final Map.Entry<String, ValueSet> want : expected.valueSets.entrySet())
        {
            ValueSet have = named("value set", want.getKey(), running.getValueSetsList(), v -> v.getPreamble().getName());
            // p4c names no field of a value_set<bit<W>> and gives no match kind; bf-p4c's standard externs may give no
            // field at all: compare widths where it gives them, else take ours (one field, id 1)
            if (have.getMatchCount() == 0)
            {
                have = have.toBuilder().addAllMatch(want.getValue().getMatchList()).build();
            }
            final List<Integer> widths = want.getValue().getMatchList().stream().map(MatchField::getBitwidth).toList();
            final List<Integer> haveWidths = have.getMatchList().stream().map(MatchField::getBitwidth).toList();
            if (!widths.equals(haveWidths))
            {
                throw differs("value set " + want.getKey() + " holds members of " + haveWidths + " bits, not " + widths);
            }
            if (have.getSize() < want.getValue().getSize())
            {
                throw differs("value set " + want.getKey() + " holds " + have.getSize() + " members, fewer than " + want.getValue().getSize());
            }
            resolved.put(want.getKey(), have, have.getPreamble().getId(), resolved.valueSets, resolved.valueSetsById);
        }
        return resolved;
    }

    /**
     * Read a P4Info file: the text format bf-p4c writes with {@code --p4runtime-files x.txtpb} (or {@code .txt}), else
     * the binary protobuf.
     */
    public static P4Info read(final java.nio.file.Path file) throws IOException
    {
        final byte[] bytes = java.nio.file.Files.readAllBytes(file);
        final String name = file.getFileName().toString();
        if (name.endsWith(".txtpb") || name.endsWith(".txt") || name.endsWith(".pbtxt"))
        {
            final P4Info.Builder builder = P4Info.newBuilder();
            TextFormat.merge(new String(bytes, StandardCharsets.UTF_8), builder);
            return builder.build();
        }
        return P4Info.parseFrom(bytes);
    }

    /**
     * @return the name the control plane uses for an entity of this index's P4Info ({@code SwitchMLIngress.job_table}
     * for bf-p4c's {@code pipe.SwitchMLIngress.job_table}); the name itself for one the control plane does not use.
     */
    public String canonical(final String runningName)
    {
        return canonicalNames.getOrDefault(runningName, runningName);
    }

    private <T> void put(final String canonical, final T entity, final int id, final Map<String, T> byName, final Map<Integer, T> byId)
    {
        byName.put(canonical, entity);
        byId.put(id, entity);
        final String runningName = entity instanceof Table t ? t.getPreamble().getName() :
            entity instanceof Action a ? a.getPreamble().getName() :
            entity instanceof ValueSet v ? v.getPreamble().getName() : ((Register)entity).getPreamble().getName();
        canonicalNames.put(runningName, canonical);
    }

    private static <T> T named(final String kind, final String name, final List<T> candidates,
        final java.util.function.Function<T, String> nameOf) throws PipelineException
    {
        T found = null;
        for (final T candidate : candidates)
        {
            final String candidateName = nameOf.apply(candidate);
            if (candidateName.equals(name) || candidateName.endsWith("." + name))
            {
                if (found != null)
                {
                    throw differs("two " + kind + "s could be " + name + ": " + nameOf.apply(found) + " and " + candidateName);
                }
                found = candidate;
            }
        }
        if (found == null)
        {
            throw differs("it declares no " + kind + " " + name);
        }
        return found;
    }

    private static boolean sameCellType(final P4Info aInfo, final Register a, final P4Info bInfo, final Register b)
    {
        final p4.config.v1.P4Types.P4DataTypeSpec x = a.getTypeSpec();
        final p4.config.v1.P4Types.P4DataTypeSpec y = b.getTypeSpec();
        if (x.hasBitstring() || y.hasBitstring())
        {
            return x.hasBitstring() && y.hasBitstring() && x.getBitstring().equals(y.getBitstring());
        }
        // a struct (our pair_t of two 32-bit halves): the compiler may name it after its own scope, so compare the
        // members' widths as its type_info declares them
        return x.hasStruct() && y.hasStruct() && structWidths(aInfo, x.getStruct().getName()) != null &&
            structWidths(aInfo, x.getStruct().getName()).equals(structWidths(bInfo, y.getStruct().getName()));
    }

    private static String cellText(final P4Info info, final Register register)
    {
        final p4.config.v1.P4Types.P4DataTypeSpec type = register.getTypeSpec();
        if (type.hasBitstring() && type.getBitstring().hasBit())
        {
            return "bit<" + type.getBitstring().getBit().getBitwidth() + ">";
        }
        if (type.hasStruct())
        {
            final List<Integer> widths = structWidths(info, type.getStruct().getName());
            return "struct " + type.getStruct().getName() + (widths == null ? " (not in its type_info)" :
                " of " + String.join(", ", widths.stream().map(w -> "bit<" + w + ">").toList()));
        }
        return TextFormat.shortDebugString(type);
    }

    /**
     * @return the bit widths of a struct's members as the P4Info's type_info declares them, or null when it does not
     * (or a member is not a bit string).
     */
    private static List<Integer> structWidths(final P4Info info, final String name)
    {
        final p4.config.v1.P4Types.P4StructTypeSpec struct = info.getTypeInfo().getStructsMap().get(name);
        if (struct == null)
        {
            return null;
        }
        final List<Integer> widths = new ArrayList<>();
        for (final p4.config.v1.P4Types.P4StructTypeSpec.Member member : struct.getMembersList())
        {
            if (!member.getTypeSpec().hasBitstring() || !member.getTypeSpec().getBitstring().hasBit())
            {
                return null;
            }
            widths.add(member.getTypeSpec().getBitstring().getBit().getBitwidth());
        }
        return widths;
    }

    private static PipelineException differs(final String what)
    {
        return new PipelineException("FAILED_PRECONDITION", "the P4Info is not switchml.p4's: " + what);
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
            final P4Info.Builder builder = P4Info.newBuilder();
            TextFormat.merge(new String(in.readAllBytes(), StandardCharsets.UTF_8), builder);
            return new P4InfoIndex(builder.build());
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
