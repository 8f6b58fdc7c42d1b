package io.switchml.offload.xdp;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The program's life on an interface across appliance processes (real JVMs, a real veth in driver mode): SIGTERM
 * detaches it; kill -9 leaves it attached, and the next appliance replaces the stale program and says so; a program
 * that is not ours is never evicted, and the appliance then runs without the xdp backend, saying why.
 */
@Tag("process")
final class XdpLifecycleTest
{
    @TempDir
    Path dir;

    private Veth veth;
    private final List<Process> processes = new ArrayList<>();

    @BeforeEach
    void createInterface()
    {
        veth = new Veth("l");
    }

    @AfterEach
    void cleanUp()
    {
        processes.forEach(Process::destroyForcibly);
        veth.close();
    }

    private ApplianceProcess startAppliance(final String name) throws Exception
    {
        final Path config = dir.resolve(name + ".properties");
        Files.writeString(config, "switchml.appliance.backends=xdp,software\nswitchml.appliance.xdp.interface=" + veth.name + "\n" +
            "switchml.appliance.xdp.slots=64\n");
        final ApplianceProcess child = ApplianceProcess.start(List.of(), System.getProperty("java.class.path"), config,
            dir.resolve(name));
        processes.add(child.process());
        return child;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void sigtermDetachesKillLeavesStaleProgramThatTheNextStartReplaces() throws Exception
    {
        final ApplianceProcess first = startAppliance("first");
        assertTrue(first.waitFor("xdp: attached switchml_xdp", 5_000), first.output().toString());
        assertEquals(XdpLayout.PROGRAM_NAME, XdpAttachment.query(veth.name).orElseThrow().name());
        first.process().destroy(); // SIGTERM
        assertTrue(first.process().waitFor(30, TimeUnit.SECONDS));
        assertTrue(XdpAttachment.query(veth.name).isEmpty(), "SIGTERM left the program attached: " + first.output());

        final ApplianceProcess killed = startAppliance("killed");
        final int staleId = XdpAttachment.query(veth.name).orElseThrow().id();
        killed.process().destroyForcibly(); // SIGKILL: no hook runs
        assertTrue(killed.process().waitFor(30, TimeUnit.SECONDS));
        final Optional<XdpAttachment.AttachedProgram> stale = XdpAttachment.query(veth.name);
        assertTrue(stale.isPresent() && stale.get().id() == staleId, "kill -9 should leave the program attached");

        final ApplianceProcess restarted = startAppliance("restarted");
        assertTrue(restarted.waitFor("replaced stale XDP program id " + staleId + " (switchml_xdp) on " + veth.name, 5_000),
            restarted.output().toString());
        final XdpAttachment.AttachedProgram now = XdpAttachment.query(veth.name).orElseThrow();
        assertNotEquals(staleId, now.id());
        assertEquals(XdpLayout.PROGRAM_NAME, now.name());
        restarted.process().destroy();
        assertTrue(restarted.process().waitFor(30, TimeUnit.SECONDS));
        assertTrue(XdpAttachment.query(veth.name).isEmpty(), "no stale program remains");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void foreignProgramIsNotEvicted() throws Exception
    {
        final int foreignId = veth.attachForeignProgram();
        final ApplianceProcess child = startAppliance("foreign");
        assertTrue(child.waitFor("xdp: not started: " + veth.name + " already has XDP program id " + foreignId +
            " (switchml_pass)", 5_000), child.output().toString());
        child.process().destroy();
        assertTrue(child.process().waitFor(30, TimeUnit.SECONDS));
        assertEquals(foreignId, XdpAttachment.query(veth.name).orElseThrow().id(), "someone else's program was touched");
    }
}
