package io.switchml.offload.tofino.p4runtime;

import com.google.protobuf.TextFormat;
import io.switchml.offload.tofino.PipelineException;
import p4.config.v1.P4InfoOuterClass.Action;
import p4.config.v1.P4InfoOuterClass.ActionRef;
import p4.config.v1.P4InfoOuterClass.MatchField;
import p4.config.v1.P4InfoOuterClass.P4Info;
import p4.config.v1.P4InfoOuterClass.Register;
import p4.config.v1.P4InfoOuterClass.Table;
import p4.config.v1.P4InfoOuterClass.ValueSet;
import p4.config.v1.P4Types.P4DataTypeSpec;
import p4.config.v1.P4Types.P4StructTypeSpec;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Matching a switch's (or a compiler's) P4Info with the program the control plane expects. A compiler names things
 * after its pipeline instance ({@code pipe.SwitchMLIngress.job_table} from bf-p4c for TNA) and numbers them itself:
 * each expected table, action, register and value set is found by its name or a name ending in "." + that name, and
 * is then used by the switch's ids. What must agree: every match field's name, width and kind, every action a table
 * must offer, every action's parameters (count, names, widths), every register's cells (width, or a struct's member
 * widths from type_info) and every value set's member widths; a table, register or value set may be larger.
 * Anything else the P4Info declares is ignored.
 */
final class P4InfoMatch
{
    private P4InfoMatch()
    {
    }

    static P4InfoIndex resolve(final P4Info running, final P4InfoIndex expected) throws PipelineException
    {
        final P4InfoIndex resolved = P4InfoIndex.empty(running);
        matchActions(running, expected, resolved);
        matchTables(running, expected, resolved);
        matchRegisters(running, expected, resolved);
        matchValueSets(running, expected, resolved);
        return resolved;
    }

    private static void matchActions(final P4Info running, final P4InfoIndex expected, final P4InfoIndex resolved)
        throws PipelineException
    {
        for (final Map.Entry<String, Action> want : expected.actions().entrySet())
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
            resolved.map(want.getKey(), have);
        }
    }

    private static void matchTables(final P4Info running, final P4InfoIndex expected, final P4InfoIndex resolved)
        throws PipelineException
    {
        for (final Map.Entry<String, Table> want : expected.tables().entrySet())
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
            for (final ActionRef ref : want.getValue().getActionRefsList())
            {
                final Action wanted = expected.actionOrNull(ref.getId());
                if (wanted == null)
                {
                    continue; // an action of the compiler's own (NoAction) in an index that was resolved already
                }
                final String action = expected.canonical(wanted.getPreamble().getName());
                final int id = resolved.actions().get(action).getPreamble().getId();
                if (have.getActionRefsList().stream().noneMatch(r -> r.getId() == id))
                {
                    throw differs("table " + want.getKey() + " does not offer action " + action);
                }
            }
            atLeast("table " + want.getKey() + " holds", have.getSize(), "entries", want.getValue().getSize());
            resolved.map(want.getKey(), have);
        }
    }

    private static void matchRegisters(final P4Info running, final P4InfoIndex expected, final P4InfoIndex resolved)
        throws PipelineException
    {
        for (final Map.Entry<String, Register> want : expected.registers().entrySet())
        {
            final Register have = named("register", want.getKey(), running.getRegistersList(), r -> r.getPreamble().getName());
            if (!sameCellType(running, have, expected.info(), want.getValue()))
            {
                throw differs("register " + want.getKey() + " cells are " + cellText(running, have) + ", not " +
                    cellText(expected.info(), want.getValue()));
            }
            atLeast("register " + want.getKey() + " has", have.getSize(), "cells", want.getValue().getSize());
            resolved.map(want.getKey(), have);
        }
    }

    private static void matchValueSets(final P4Info running, final P4InfoIndex expected, final P4InfoIndex resolved)
        throws PipelineException
    {
        for (final Map.Entry<String, ValueSet> want : expected.valueSets().entrySet())
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
            atLeast("value set " + want.getKey() + " holds", have.getSize(), "members", want.getValue().getSize());
            resolved.map(want.getKey(), have);
        }
    }

    private static <T> T named(final String kind, final String name, final List<T> candidates,
        final Function<T, String> nameOf) throws PipelineException
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
        final P4DataTypeSpec x = a.getTypeSpec();
        final P4DataTypeSpec y = b.getTypeSpec();
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
        final P4DataTypeSpec type = register.getTypeSpec();
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
        final P4StructTypeSpec struct = info.getTypeInfo().getStructsMap().get(name);
        if (struct == null)
        {
            return null;
        }
        final List<Integer> widths = new ArrayList<>();
        for (final P4StructTypeSpec.Member member : struct.getMembersList())
        {
            if (!member.getTypeSpec().hasBitstring() || !member.getTypeSpec().getBitstring().hasBit())
            {
                return null;
            }
            widths.add(member.getTypeSpec().getBitstring().getBit().getBitwidth());
        }
        return widths;
    }

    /** A size of the switch's program below ours: "register X has 16 cells, fewer than 32". */
    private static void atLeast(final String what, final long have, final String unit, final long want)
        throws PipelineException
    {
        if (have < want)
        {
            throw differs(what + " " + have + " " + unit + ", fewer than " + want);
        }
    }

    private static PipelineException differs(final String what)
    {
        return new PipelineException("FAILED_PRECONDITION", "the P4Info is not switchml.p4's: " + what);
    }

}
