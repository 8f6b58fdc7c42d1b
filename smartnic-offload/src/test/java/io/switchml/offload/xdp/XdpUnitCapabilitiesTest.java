package io.switchml.offload.xdp;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The xdp backend as the systemd unit runs it: an appliance JVM as user nobody holding only the capabilities that
 * {@code systemd/switchml-appliance.service} grants (read from the unit, through setpriv with no-new-privs), on a
 * real veth in driver mode. It attaches, places a job on xdp, detaches on SIGTERM, and after kill -9 the next start
 * recognises its own stale program by the id its predecessor recorded (the kernel lets only CAP_SYS_ADMIN read a
 * program's name by id) and replaces it; a program taken off the interface is put back; someone else's program, whose
 * name it cannot read either, is left alone.
 */
@Tag("process")
final class XdpUnitCapabilitiesTest
{
    private static final int CAP_SYS_ADMIN = 21;
    private static final Path UNIT = Path.of("..", "systemd", "switchml-appliance.service");
    /** Capability numbers of linux/capability.h for the names the unit may grant. */
    private static final Map<String, Integer> CAPABILITY_NUMBERS = Map.of("CAP_NET_ADMIN", 12, "CAP_SYS_ADMIN",
        CAP_SYS_ADMIN, "CAP_PERFMON", 38, "CAP_BPF", 39);

    private Path root;
    private Path classPath;
    private Veth veth;
    private final List<Process> processes = new ArrayList<>();

    @BeforeEach
    void prepare() throws Exception
    {
        veth = new Veth("u");
        // a tree that user nobody can read (the build's class path may sit under /root) and a --dir it can write
        root = Files.createTempDirectory("switchml-unitcaps");
        classPath = root.resolve("cp");
        final List<String> entries = new ArrayList<>();
        int index = 0;
        for (final String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator))
        {
            final Path source = Path.of(entry);
            final Path target = classPath.resolve(index++ + "-" + source.getFileName());
            if (Files.isDirectory(source))
            {
                copyTree(source, target);
            }
            else if (Files.isRegularFile(source))
            {
                Files.createDirectories(classPath);
                Files.copy(source, target, StandardCopyOption.REPLACE_EXISTING);
            }
            else
            {
                continue;
            }
            entries.add(target.toString());
        }
        Files.writeString(root.resolve("classpath"), String.join(java.io.File.pathSeparator, entries));
        assertEquals(0, Veth.run("chmod", "-R", "a+rX", root.toString()));
        Files.createDirectories(root.resolve("state"));
        assertEquals(0, Veth.run("chown", "nobody:nogroup", root.resolve("state").toString()),
            "cannot give the state directory to user nobody");
        Files.writeString(root.resolve("appliance.properties"), "switchml.appliance.backends=xdp,software\n" +
            "switchml.appliance.xdp.interface=" + veth.name + "\nswitchml.appliance.xdp.slots=64\n");
        assertEquals(0, Veth.run("chmod", "a+r", root.resolve("appliance.properties").toString()));
    }

    @AfterEach
    void cleanUp() throws IOException
    {
        processes.forEach(Process::destroyForcibly);
        veth.close();
        if (root != null)
        {
            try (Stream<Path> paths = Files.walk(root))
            {
                paths.sorted(java.util.Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
            }
        }
    }

    private static void copyTree(final Path source, final Path target) throws IOException
    {
        try (Stream<Path> paths = Files.walk(source))
        {
            for (final Path path : (Iterable<Path>)paths::iterator)
            {
                final Path destination = target.resolve(source.relativize(path).toString());
                if (Files.isDirectory(path))
                {
                    Files.createDirectories(destination);
                }
                else
                {
                    Files.copy(path, destination, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
    }

    /** The unit's AmbientCapabilities, as setpriv's "+bpf,+perfmon,..." list. */
    private static List<String> unitCapabilities() throws IOException
    {
        final String line = Files.readAllLines(UNIT).stream().filter(l -> l.startsWith("AmbientCapabilities="))
            .findFirst().orElseThrow(() -> new AssertionError(UNIT + " has no AmbientCapabilities= line"));
        final List<String> names = Arrays.stream(line.substring(line.indexOf('=') + 1).trim().split("\\s+")).toList();
        assertTrue(names.contains("CAP_BPF") && names.contains("CAP_NET_ADMIN"), "the unit no longer grants " +
            "CAP_BPF and CAP_NET_ADMIN: " + line);
        return names;
    }

    private ApplianceProcess startAsUnit() throws Exception
    {
        final String caps = String.join(",", unitCapabilities().stream()
            .map(name -> "+" + name.substring("CAP_".length()).toLowerCase(Locale.ROOT)).toList());
        final List<String> setpriv = List.of("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
            "--inh-caps=-all," + caps, "--ambient-caps=-all," + caps, "--bounding-set=-all," + caps, "--no-new-privs");
        final ApplianceProcess child = ApplianceProcess.start(setpriv, Files.readString(root.resolve("classpath")),
            root.resolve("appliance.properties"), root.resolve("state").resolve("dir"));
        processes.add(child.process());
        return child;
    }

    /** The effective capability mask the unit's names make. */
    private static long unitMask() throws IOException
    {
        long mask = 0;
        for (final String name : unitCapabilities())
        {
            final Integer number = CAPABILITY_NUMBERS.get(name);
            if (number == null)
            {
                throw new AssertionError("unknown capability " + name + " in " + UNIT);
            }
            mask |= 1L << number;
        }
        return mask;
    }

    private static String status(final Process process, final String field) throws IOException
    {
        return Files.readAllLines(Path.of("/proc", Long.toString(process.pid()), "status")).stream()
            .filter(line -> line.startsWith(field + ":")).findFirst().orElseThrow().substring(field.length() + 1).trim();
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void unitCapabilitiesAttachPlaceRecoverAfterKillAndPutBackADetachedProgram() throws Exception
    {
        final ApplianceProcess first = startAsUnit();
        // the process really runs as nobody with exactly the unit's capabilities: CAP_SYS_ADMIN is not among them
        assertTrue(status(first.process(), "Uid").startsWith("65534"), status(first.process(), "Uid"));
        final long effective = Long.parseUnsignedLong(status(first.process(), "CapEff"), 16);
        assertEquals(unitMask(), effective, "CapEff " + Long.toHexString(effective));
        assertEquals(0, effective & (1L << CAP_SYS_ADMIN), "the test must run without CAP_SYS_ADMIN");

        assertTrue(first.waitFor("xdp: attached switchml_xdp", 5_000), first.output().toString());
        final int firstId = XdpAttachment.query(veth.name).orElseThrow().id();
        final String created = ControlLine.send(first.controlPort(), "CREATE name=unit world=4 type=float32 k=256 s=32 mac=on");
        assertTrue(created.startsWith("OK ") && created.contains(" backend=xdp") && !created.contains("fallback"), created);
        first.kill();
        assertEquals(firstId, XdpAttachment.query(veth.name).orElseThrow().id(), "kill -9 should leave the program attached");

        final ApplianceProcess second = startAsUnit();
        assertTrue(second.waitFor("replaced stale XDP program id " + firstId + " (recorded as ours", 5_000),
            second.output().toString());
        final XdpAttachment.AttachedProgram now = XdpAttachment.query(veth.name).orElseThrow();
        assertNotEquals(firstId, now.id());
        assertEquals(XdpLayout.PROGRAM_NAME, now.name());
        assertTrue(ControlLine.send(second.controlPort(), "CREATE name=again world=4 type=float32 k=256 s=32 mac=on")
            .contains(" backend=xdp"), second.output().toString());
        // taken off the interface: put back with the unit's capabilities too
        assertEquals(0, Veth.run("ip", "link", "set", "dev", veth.name, "xdpdrv", "off"));
        assertTrue(second.waitFor("xdp: re-attached switchml_xdp (id " + now.id() + ") to " + veth.name, 10_000),
            second.output().toString());
        assertEquals(now.id(), XdpAttachment.query(veth.name).orElseThrow().id());
        second.stop();
        assertTrue(XdpAttachment.query(veth.name).isEmpty(), "SIGTERM left the program attached: " + second.output());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void foreignProgramWhoseNameItCannotReadIsLeftAlone() throws Exception
    {
        final int foreignId = veth.attachForeignProgram();
        final ApplianceProcess child = startAsUnit();
        assertTrue(child.waitFor("xdp: not started: " + veth.name + " already has XDP program id " + foreignId +
            " attached in native mode, whose name this process may not read", 5_000), child.output().toString());
        final String created = ControlLine.send(child.controlPort(), "CREATE name=soft world=4 type=float32 k=256 s=32 mac=on");
        assertTrue(created.contains(" backend=software"), created);
        child.stop();
        assertEquals(foreignId, XdpAttachment.query(veth.name).orElseThrow().id(), "someone else's program was touched");
    }
}
