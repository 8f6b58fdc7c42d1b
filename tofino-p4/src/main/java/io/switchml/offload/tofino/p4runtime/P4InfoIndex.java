package io.switchml.offload.tofino.p4runtime;

import com.google.protobuf.TextFormat;
import io.switchml.offload.tofino.PipelineException;
import p4.config.v1.P4InfoOuterClass.Action;
import p4.config.v1.P4InfoOuterClass.MatchField;
import p4.config.v1.P4InfoOuterClass.P4Info;
import p4.config.v1.P4InfoOuterClass.Register;
import p4.config.v1.P4InfoOuterClass.Table;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * A P4Info by name and by id, for both sides of P4Runtime: the client turns the control plane's names into ids, the
 * model's server turns ids back into names. Unknown names and ids fail naming them.
 */
public final class P4InfoIndex
{
    /** The P4Info of switchml.p4 on the class path (copied from tofino-p4/p4 by the build). */
    public static final String RESOURCE = "/p4/switchml.p4info.txtpb";

    private final P4Info info;
    private final Map<String, Table> tables = new HashMap<>();
    private final Map<Integer, Table> tablesById = new HashMap<>();
    private final Map<String, Action> actions = new HashMap<>();
    private final Map<Integer, Action> actionsById = new HashMap<>();
    private final Map<String, Register> registers = new HashMap<>();
    private final Map<Integer, Register> registersById = new HashMap<>();

    public P4InfoIndex(final P4Info info)
    {
        this.info = info;
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
