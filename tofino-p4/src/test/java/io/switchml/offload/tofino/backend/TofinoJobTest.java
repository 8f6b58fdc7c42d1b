package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.control.JobSpec;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.P4Names;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A job's entries on the switch against a release that runs while the backend writes them again after a reconnection.
 */
final class TofinoJobTest
{
    /** The model as the switch, running a hook just before each INSERT reaches it. */
    private static final class HookedSwitch implements PipelineControl
    {
        final TofinoModel model = new TofinoModel();
        Runnable beforeInsert = () -> { };

        public void writeTableEntry(final UpdateType type, final TableEntry entry) throws PipelineException
        {
            if (type == UpdateType.INSERT)
            {
                final Runnable hook = beforeInsert;
                beforeInsert = () -> { };
                hook.run();
            }
            model.writeTableEntry(type, entry);
        }

        public void writeRegister(final String register, final int index, final byte[] value) throws PipelineException
        {
            model.writeRegister(register, index, value);
        }

        public byte[] readRegister(final String register, final int index) throws PipelineException
        {
            return model.readRegister(register, index);
        }

        public void writeMulticastGroup(final UpdateType type, final int groupId, final List<Replica> replicas) throws PipelineException
        {
            model.writeMulticastGroup(type, groupId, replicas);
        }

        public void writeValueSet(final String valueSet, final List<byte[]> members) throws PipelineException
        {
            model.writeValueSet(valueSet, members);
        }

        public List<TableEntry> readTableEntries(final String table) throws PipelineException
        {
            return model.readTableEntries(table);
        }

        public List<Integer> readMulticastGroups()
        {
            return model.readMulticastGroups();
        }
    }

    @Test
    void aJobReleasedWhileItIsAdmittedAgainLeavesNoEntry() throws Exception
    {
        final HookedSwitch sw = new HookedSwitch();
        final List<String> log = new ArrayList<>();
        final SwitchConnection connection = new SwitchConnection()
        {
            public PipelineControl control()
            {
                return sw;
            }

            public String health()
            {
                return null;
            }

            public ShardDataPath dataPath()
            {
                return null;
            }

            public String describe()
            {
                return "hooked model";
            }

            public void close()
            {
            }
        };
        final BackendEnvironment environment = new BackendEnvironment(Map.of(), "switchml.appliance.tofino.",
            InetAddress.getLoopbackAddress(), new int[] {7471}, 0, new int[0], metric -> null, log::add, null);
        final TofinoBackend backend = new TofinoBackend(TofinoBackend.NAME, environment, connection,
            TofinoOptions.parse(Map.of(), "switchml.appliance.tofino.", true, P4Names.SLOTS));
        final TofinoJob job = (TofinoJob)backend.reserve(new JobSpec("t", "j", 2, ElementType.INT32, 64, 4, false, 1000, 1000), 7);
        assertEquals(1, sw.model.tableEntries(P4Names.JOB_TABLE));

        // a new session on a switch that kept the entry: the release comes between readmit's check and its insert,
        // and removes the entry first
        sw.beforeInsert = job::release;
        job.readmit(sw);

        assertEquals(0, sw.model.tableEntries(P4Names.JOB_TABLE), "no entry of a released job stays on the switch: " + log);
        assertTrue(log.stream().noneMatch(line -> line.contains("admitted job 7 again")), log.toString());
    }
}
