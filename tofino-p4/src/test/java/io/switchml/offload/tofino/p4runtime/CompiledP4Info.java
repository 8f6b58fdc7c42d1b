package io.switchml.offload.tofino.p4runtime;

import p4.config.v1.P4InfoOuterClass.Action;
import p4.config.v1.P4InfoOuterClass.ActionRef;
import p4.config.v1.P4InfoOuterClass.P4Info;
import p4.config.v1.P4InfoOuterClass.Preamble;
import p4.config.v1.P4InfoOuterClass.Register;
import p4.config.v1.P4InfoOuterClass.Table;
import p4.config.v1.P4InfoOuterClass.ValueSet;

import java.util.HashMap;
import java.util.Map;

/**
 * Our hand-written P4Info as a compiler would hand it over: every table, action and register named after the
 * pipeline instance ({@code pipe.SwitchMLIngress.job_table}, as bf-p4c names a TNA program's), numbered otherwise
 * (the type prefix byte kept, the rest changed), in another order, and with a table and an action of its own that
 * the control plane does not use, and its value set with no field declared. Not bf-p4c's output (no compiler
 * here): the differences a control plane that matched P4Infos for equality would refuse.
 */
public final class CompiledP4Info
{
    private static final int RENUMBER = 0x00_5A_3C_00;

    private CompiledP4Info()
    {
    }

    public static P4Info of(final P4Info ours)
    {
        final Map<Integer, Integer> actionIds = new HashMap<>();
        final P4Info.Builder compiled = ours.toBuilder().clearTables().clearActions().clearRegisters().clearValueSets();
        for (int i = ours.getActionsCount() - 1; i >= 0; i--)
        {
            final Action action = ours.getActions(i);
            final int id = action.getPreamble().getId() ^ RENUMBER;
            actionIds.put(action.getPreamble().getId(), id);
            compiled.addActions(action.toBuilder().setPreamble(renamed(action.getPreamble(), id)));
        }
        final int noAction = 0x01_00_7F_01;
        compiled.addActions(Action.newBuilder().setPreamble(Preamble.newBuilder().setId(noAction).setName("NoAction")
            .setAlias("NoAction")));
        for (int i = ours.getTablesCount() - 1; i >= 0; i--)
        {
            final Table table = ours.getTables(i);
            final Table.Builder renamed = table.toBuilder().setPreamble(renamed(table.getPreamble(),
                table.getPreamble().getId() ^ RENUMBER)).clearActionRefs();
            for (final ActionRef ref : table.getActionRefsList())
            {
                renamed.addActionRefs(ref.toBuilder().setId(actionIds.get(ref.getId())));
            }
            renamed.addActionRefs(ActionRef.newBuilder().setId(noAction));
            if (table.getConstDefaultActionId() != 0)
            {
                renamed.setConstDefaultActionId(actionIds.get(table.getConstDefaultActionId()));
            }
            compiled.addTables(renamed.setSize(table.getSize() + 512));
        }
        for (final ValueSet valueSet : ours.getValueSetsList())
        {
            // as bf-p4c's standard externs may write it: a preamble and a size, no field
            compiled.addValueSets(valueSet.toBuilder().setPreamble(renamed(valueSet.getPreamble(),
                valueSet.getPreamble().getId() ^ RENUMBER)).clearMatch());
        }
        compiled.addTables(Table.newBuilder().setPreamble(Preamble.newBuilder().setId(0x02_00_7F_01)
            .setName("pipe.SwitchMLIngress.port_forward").setAlias("port_forward"))
            .addActionRefs(ActionRef.newBuilder().setId(noAction)).setSize(288));
        for (int i = ours.getRegistersCount() - 1; i >= 0; i--)
        {
            final Register register = ours.getRegisters(i);
            compiled.addRegisters(register.toBuilder().setPreamble(renamed(register.getPreamble(),
                register.getPreamble().getId() ^ RENUMBER)));
        }
        return compiled.build();
    }

    private static Preamble renamed(final Preamble preamble, final int id)
    {
        return preamble.toBuilder().setId(id).setName("pipe." + preamble.getName()).build();
    }
}
