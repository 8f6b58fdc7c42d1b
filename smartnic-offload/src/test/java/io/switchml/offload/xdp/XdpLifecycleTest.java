package io.switchml.offload.xdp;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
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

    private record Child(Process process, List<String> output)
    {
        boolean waitFor(final String text, final long timeoutMs) throws InterruptedException
        {
            final long deadline = System.currentTimeMillis() + timeoutMs;
            while (System.currentTimeMillis() < deadline)
            {
                if (output.stream().anyMatch(line -> line.contains(text)))
                {
                    return true;
                }
                if (!process.isAlive())
                {
                    return output.stream().anyMatch(line -> line.contains(text));
                }
                Thread.sleep(20);
            }
            return false;
        }
    }

    private Child startAppliance(final String name) throws Exception
    {
        final Path config = dir.resolve(name + ".properties");
        Files.writeString(config, "switchml.appliance.backends=xdp,software\nswitchml.appliance.xdp.interface=" + veth.name + "\n" +
            "switchml.appliance.xdp.slots=64\n");
        final List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "--enable-native-access=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
            "--sun-misc-unsafe-memory-access=allow", "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
            "-Dchronicle.analytics.disable=true", "-Dchronicle.announcer.disable=true", "-Xmx256m", "-XX:TieredStopAtLevel=1",
            "-cp", System.getProperty("java.class.path"), "io.switchml.appliance.ApplianceCommand", "--config", config.toString(),
            "--data-port", "0", "--control-port", "0", "--http-port", "-1", "--dir", dir.resolve(name).toString(),
            "--insecure-control"));
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        processes.add(process);
        final List<String> output = new CopyOnWriteArrayList<>();
        Thread.ofVirtual().start(() ->
        {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
            {
                String line;
                while ((line = reader.readLine()) != null)
                {
                    output.add(line);
                }
            }
            catch (final Exception ignore)
            {
                // process ended
            }
        });
        final Child child = new Child(process, output);
        assertTrue(child.waitFor("appliance ready", 30_000), "appliance did not start: " + output);
        return child;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void sigtermDetachesKillLeavesStaleProgramThatTheNextStartReplaces() throws Exception
    {
        final Child first = startAppliance("first");
        assertTrue(first.waitFor("xdp: attached switchml_xdp", 5_000), first.output().toString());
        assertEquals(XdpLayout.PROGRAM_NAME, XdpAttachment.query(veth.name).orElseThrow().name());
        first.process().destroy(); // SIGTERM
        assertTrue(first.process().waitFor(30, TimeUnit.SECONDS));
        assertTrue(XdpAttachment.query(veth.name).isEmpty(), "SIGTERM left the program attached: " + first.output());

        final Child killed = startAppliance("killed");
        final int staleId = XdpAttachment.query(veth.name).orElseThrow().id();
        killed.process().destroyForcibly(); // SIGKILL: no hook runs
        assertTrue(killed.process().waitFor(30, TimeUnit.SECONDS));
        final Optional<XdpAttachment.AttachedProgram> stale = XdpAttachment.query(veth.name);
        assertTrue(stale.isPresent() && stale.get().id() == staleId, "kill -9 should leave the program attached");

        final Child restarted = startAppliance("restarted");
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
        final Path pass = BpfObject.extractResource("/bpf/switchml_pass.o");
        assertEquals(0, Veth.run("ip", "link", "set", "dev", veth.name, "xdpdrv", "obj", pass.toString(), "sec", "xdp"));
        final int foreignId = XdpAttachment.query(veth.name).orElseThrow().id();
        final Child child = startAppliance("foreign");
        assertTrue(child.waitFor("xdp: not started: " + veth.name + " already has XDP program id " + foreignId +
            " (switchml_pass)", 5_000), child.output().toString());
        child.process().destroy();
        assertTrue(child.process().waitFor(30, TimeUnit.SECONDS));
        assertEquals(foreignId, XdpAttachment.query(veth.name).orElseThrow().id(), "someone else's program was touched");
    }
}
