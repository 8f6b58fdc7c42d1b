package io.switchml.offload.tofino.model;

import com.google.protobuf.TextFormat;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import p4.config.v1.P4InfoOuterClass.P4Info;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One name set: the P4 source's tables, actions and registers (read from switchml.p4's declarations), the P4Info
 * (switchml.p4info.txtpb, parsed with protobuf) and the model's {@link P4Names} agree on names, key fields, action
 * parameters, bit widths and sizes, and the model holds exactly those registers.
 */
final class P4NamesTest
{
    private static final Path P4 = Path.of("p4", "switchml.p4");
    private static final Path P4INFO = Path.of("p4", "switchml.p4info.txtpb");

    private static P4Info p4info() throws Exception
    {
        final P4Info.Builder builder = P4Info.newBuilder();
        TextFormat.merge(Files.readString(P4INFO), builder);
        return builder.build();
    }

    @Test
    void p4infoMatchesTheModelsNames() throws Exception
    {
        final P4Info info = p4info();
        final Map<Integer, String> actionNames = new HashMap<>();
        info.getActionsList().forEach(a -> actionNames.put(a.getPreamble().getId(), a.getPreamble().getName()));

        assertEquals(P4Names.TABLES.size(), info.getTablesCount());
        for (final P4Names.Table table : P4Names.TABLES)
        {
            final var entry = info.getTablesList().stream().filter(t -> t.getPreamble().getName().equals(table.name())).findFirst()
                .orElseThrow(() -> new AssertionError("P4Info lacks table " + table.name()));
            assertEquals(table.size(), entry.getSize(), table.name());
            assertEquals(table.keys().stream().map(k -> k.name() + "/" + k.bitwidth()).toList(),
                entry.getMatchFieldsList().stream().map(m -> m.getName() + "/" + m.getBitwidth()).toList(), table.name());
            assertEquals(table.actions(), entry.getActionRefsList().stream().map(r -> actionNames.get(r.getId())).toList(), table.name());
            assertEquals(0x02, entry.getPreamble().getId() >>> 24, "table id prefix");
        }
        assertEquals(P4Names.ACTIONS.size(), info.getActionsCount());
        for (final P4Names.Action action : P4Names.ACTIONS)
        {
            final var entry = info.getActionsList().stream().filter(a -> a.getPreamble().getName().equals(action.name())).findFirst()
                .orElseThrow(() -> new AssertionError("P4Info lacks action " + action.name()));
            assertEquals(action.params().stream().map(p -> p.name() + "/" + p.bitwidth()).toList(),
                entry.getParamsList().stream().map(p -> p.getName() + "/" + p.getBitwidth()).toList(), action.name());
        }
        assertEquals(1, info.getValueSetsCount());
        final var valueSet = info.getValueSets(0);
        // as p4c writes a value_set<bit<16>>: one unnamed 16-bit field
        assertEquals(List.of(P4Names.DATA_PORTS, 1, 16, P4Names.DATA_PORTS_SIZE, 0x03),
            List.of(valueSet.getPreamble().getName(), valueSet.getMatchCount(), valueSet.getMatch(0).getBitwidth(),
                valueSet.getSize(), valueSet.getPreamble().getId() >>> 24));
        assertEquals(P4Names.REGISTERS.size(), info.getRegistersCount());
        for (final P4Names.Register register : P4Names.REGISTERS)
        {
            final var entry = info.getRegistersList().stream().filter(r -> r.getPreamble().getName().equals(register.name())).findFirst()
                .orElseThrow(() -> new AssertionError("P4Info lacks register " + register.name()));
            assertEquals(register.size(), entry.getSize(), register.name());
            assertEquals(register.pair(), entry.getTypeSpec().hasStruct(), register.name() + " is a pair");
            assertEquals(0x16, entry.getPreamble().getId() >>> 24, "register id prefix");
        }
    }

    @Test
    void p4SourceDeclaresTheSameTablesActionsAndRegisters() throws Exception
    {
        final String source = Files.readString(P4);
        final String parser = source.substring(source.indexOf("parser SwitchMLIngressParser("), source.indexOf("control SwitchMLIngress("));
        final String valueSet = P4Names.DATA_PORTS.substring(P4Names.DATA_PORTS.indexOf('.') + 1);
        assertTrue(parser.contains("value_set<bit<16>>(" + P4Names.DATA_PORTS_SIZE + ") " + valueSet + ";") &&
            parser.contains("transition select(" + P4Names.DATA_PORTS_FIELD + ") { " + valueSet + ": parse_sml; default: accept; }"),
            "the ingress parser takes SwitchML packets by the data ports the control plane writes into its value set");
        final Map<String, Integer> constants = new HashMap<>();
        final Matcher constant = Pattern.compile("const int (\\w+) = (\\d+);").matcher(source);
        while (constant.find())
        {
            constants.put(constant.group(1), Integer.parseInt(constant.group(2)));
        }

        // tables: qualified name -> "size keys actions"
        final Map<String, String> tables = new TreeMap<>();
        final Matcher table = Pattern.compile("table (\\w+) \\{\\s*key = \\{([^}]*)\\}\\s*actions = \\{([^}]*)\\}[^}]*size = (\\d+);")
            .matcher(source);
        while (table.find())
        {
            final String keys = Pattern.compile("([\\w.]+)\\s*:\\s*exact;").matcher(table.group(2)).results().map(r -> r.group(1))
                .collect(Collectors.joining(","));
            final String actions = List.of(table.group(3).split(";")).stream().map(String::strip).filter(a -> !a.isEmpty())
                .map(a -> qualify(source, table.start(), a)).collect(Collectors.joining(","));
            tables.put(qualify(source, table.start(), table.group(1)), table.group(4) + " " + keys + " " + actions);
        }
        final Map<String, String> expectedTables = new TreeMap<>();
        for (final P4Names.Table t : P4Names.TABLES)
        {
            expectedTables.put(t.name(), t.size() + " " + t.keys().stream().map(P4Names.Field::name).collect(Collectors.joining(",")) +
                " " + String.join(",", t.actions()));
        }
        assertEquals(expectedTables, tables);

        // actions with their parameters and widths
        final Map<String, String> actions = new TreeMap<>();
        final Matcher action = Pattern.compile("action (\\w+)\\(([^)]*)\\)").matcher(source);
        while (action.find())
        {
            final String params = Pattern.compile("bit<(\\d+)> (\\w+)").matcher(action.group(2)).results()
                .map(r -> r.group(2) + "/" + r.group(1)).collect(Collectors.joining(","));
            actions.put(qualify(source, action.start(), action.group(1)), params);
        }
        final Map<String, String> expectedActions = new TreeMap<>();
        for (final P4Names.Action a : P4Names.ACTIONS)
        {
            expectedActions.put(a.name(), a.params().stream().map(p -> p.name() + "/" + p.bitwidth()).collect(Collectors.joining(",")));
        }
        assertEquals(expectedActions, actions);

        // registers: top-level ones of SwitchMLIngress, and the values register of each LanePair instance
        final Map<String, String> registers = new TreeMap<>();
        final Matcher register = Pattern.compile("Register<(\\w+|int<32>|bit<32>), \\w+>\\((\\w+)\\) (\\w+);").matcher(source);
        String lanePairRegister = null;
        while (register.find())
        {
            final String control = controlAt(source, register.start());
            final String shape = constants.get(register.group(2)) + (register.group(1).equals("pair_t") ? " pair" : " single");
            if (control.equals("LanePair"))
            {
                lanePairRegister = register.group(3) + " " + shape;
            }
            else
            {
                registers.put(control + "." + register.group(3), shape);
            }
        }
        assertTrue(lanePairRegister != null && lanePairRegister.startsWith("values "), "LanePair declares its register values");
        final Matcher instance = Pattern.compile("LanePair\\(\\) (lanes_\\d\\d);").matcher(source);
        while (instance.find())
        {
            registers.put(controlAt(source, instance.start()) + "." + instance.group(1) + ".values", lanePairRegister.substring("values ".length()));
        }
        final Map<String, String> expectedRegisters = new TreeMap<>();
        for (final P4Names.Register r : P4Names.REGISTERS)
        {
            expectedRegisters.put(r.name(), r.size() + (r.pair() ? " pair" : " single"));
        }
        assertEquals(expectedRegisters, registers);
    }

    /**
     * The P4 program's wire constants are the protocol's: the model takes its packet types, flags and element types
     * from {@link DataHeaderFlyweight} and {@link ElementType}, so nothing else ties the program's to them (it is not
     * compiled here).
     */
    @Test
    void p4SourceUsesTheProtocolsWireConstants() throws Exception
    {
        final Map<String, Integer> constants = new TreeMap<>();
        final Matcher constant = Pattern.compile("const bit<(?:8|16)>\\s+(\\w+) = (0x[0-9A-Fa-f]+|\\d+);").matcher(Files.readString(P4));
        while (constant.find())
        {
            constants.put(constant.group(1), Integer.decode(constant.group(2)));
        }
        final Map<String, Integer> protocol = new TreeMap<>(Map.ofEntries(
            Map.entry("SML_MAGIC", (int)DataHeaderFlyweight.MAGIC),
            Map.entry("SML_VERSION", (int)DataHeaderFlyweight.CURRENT_VERSION),
            Map.entry("T_UPDATE", (int)DataHeaderFlyweight.TYPE_UPDATE),
            Map.entry("T_RESULT", (int)DataHeaderFlyweight.TYPE_RESULT),
            Map.entry("T_PROBE", (int)DataHeaderFlyweight.TYPE_PROBE),
            Map.entry("T_NACK", (int)DataHeaderFlyweight.TYPE_NACK),
            Map.entry("T_PENDING", (int)DataHeaderFlyweight.TYPE_PENDING),
            Map.entry("F_VERSION", DataHeaderFlyweight.FLAG_POOL_VERSION),
            Map.entry("F_RETRANSMIT", DataHeaderFlyweight.FLAG_RETRANSMIT),
            Map.entry("E_INT32", (int)ElementType.INT32),
            Map.entry("E_FLOAT32", (int)ElementType.FLOAT32)));
        constants.keySet().retainAll(Set.of("SML_MAGIC", "SML_VERSION", "T_UPDATE", "T_RESULT", "T_PROBE", "T_NACK",
            "T_PENDING", "F_VERSION", "F_RETRANSMIT", "E_INT32", "E_FLOAT32"));
        assertEquals(protocol, constants, "switchml.p4's constants against the protocol's");
    }

    @Test
    void theModelHoldsExactlyTheDeclaredRegisters() throws Exception
    {
        final TofinoModel model = new TofinoModel(7471);
        for (final P4Names.Register register : P4Names.REGISTERS)
        {
            assertEquals(register.pair() ? 8 : 4, model.readRegister(register.name(), register.size() - 1).length, register.name());
            final PipelineException outside = assertThrows(PipelineException.class, () -> model.readRegister(register.name(), register.size()));
            assertEquals("OUT_OF_RANGE", outside.code());
        }
        assertEquals("NOT_FOUND", assertThrows(PipelineException.class, () -> model.readRegister("SwitchMLIngress.nothing", 0)).code());
        final Set<String> declared = new TreeSet<>(P4Names.REGISTERS.stream().map(P4Names.Register::name).toList());
        assertEquals(5 + P4Names.LANE_PAIRS, declared.size());
    }

    private static String qualify(final String source, final int at, final String name)
    {
        return controlAt(source, at) + "." + name.replaceAll("\\(\\)$", "");
    }

    private static String controlAt(final String source, final int at)
    {
        final Matcher control = Pattern.compile("control (\\w+)\\(").matcher(source);
        String name = "";
        while (control.find() && control.start() < at)
        {
            name = control.group(1);
        }
        return name;
    }
}
