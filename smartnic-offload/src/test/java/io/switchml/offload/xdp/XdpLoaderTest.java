package io.switchml.offload.xdp;

import io.switchml.protocol.DropReason;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The loader against the real kernel: the verifier accepts the aggregator loaded for k up to 256 and for k up to
 * 2233 (MTU 9000) and 2304 (the most it can be loaded for), within its million-instruction budget (one program
 * serves every supported combination of k, int32 or float32 lanes and MAC on or off;
 * XdpSlotPoolDifferentialTest runs each through it), its maps have the sizes {@link XdpLayout} writes, the header's drop indices are DropReason's
 * ordinals, and a program the verifier rejects fails with the verifier's own lines.
 */
final class XdpLoaderTest
{
    @TempDir
    Path dir;

    @ParameterizedTest(name = "max-lanes {0}")
    @ValueSource(ints = {100, 256, 358, 385, 2233, XdpLayout.MAX_LANES})
    void verifierAcceptsTheProgramForEachMaximumK(final int maxLanes) throws Exception
    {
        final long startNs = System.nanoTime();
        try (XdpProgram program = XdpProgram.load(1024, maxLanes);
            BpfObject object = BpfObject.openResource(XdpProgram.RESOURCE))
        {
            final long loadMs = (System.nanoTime() - startNs) / 1_000_000;
            final long processed = program.verifiedInstructions();
            System.out.println("max-lanes " + maxLanes + ": verifier processed " + processed + " insns (limit 1000000), load " +
                loadMs + " ms; slot memory " + (program.slotMemoryBytes() >> 10) + " KiB for 1024 slots");
            assertTrue(processed > 1000 && processed < 1_000_000, "processed " + processed);
            object.load(XdpLayout.PROGRAM_NAME); // defaults from the object file: 4 blocks
            assertEquals(4 * 256, object.map(XdpLayout.LANES_MAP).valueSize());
        }
        final XdpProgram program = XdpProgram.load(16, maxLanes);
        program.close();
        assertEquals(256 * XdpLayout.blocks(maxLanes), XdpLayout.lanesValueSize(maxLanes));
        assertThrows(IllegalArgumentException.class, () -> XdpProgram.load(16, XdpLayout.MAX_LANES + 1));
    }

    @Test
    void verifierAcceptsTheAggregatorAndItsMapsMatchTheLayout() throws Exception
    {
        try (XdpProgram program = XdpProgram.load(128, 256);
            BpfObject object = BpfObject.openResource(XdpProgram.RESOURCE))
        {
            assertTrue(program.programFd() > 0);
            // the temporary copy is gone once libbpf opened it: nothing is left behind however the JVM ends
            assertFalse(java.nio.file.Files.exists(object.path()), object.path() + " left behind");
            object.load(XdpLayout.PROGRAM_NAME);
            assertEquals(XdpLayout.CONFIG_SIZE, object.map(XdpLayout.CONFIG_MAP).valueSize());
            assertEquals(XdpLayout.JOB_SIZE, object.map(XdpLayout.JOBS_MAP).valueSize());
            assertEquals(XdpLayout.SLOT_SIZE, object.map(XdpLayout.SLOTS_MAP).valueSize());
            assertEquals(XdpLayout.RODATA_SIZE, object.map(".rodata").valueSize());
            assertEquals(8, object.map(XdpLayout.STATS_MAP).valueSize());
            assertEquals(XdpLayout.MAX_JOBS, 1024);
        }
    }

    @Test
    void headerDropIndicesAreDropReasonOrdinals() throws IOException
    {
        final String header = Files.readString(Path.of("src", "main", "bpf", "switchml_xdp.h"));
        final Matcher matcher = Pattern.compile("#define SML_DROP_([A-Z_]+)\\s+(\\d+)").matcher(header);
        int seen = 0;
        while (matcher.find())
        {
            assertEquals(DropReason.valueOf(matcher.group(1)).ordinal(), Integer.parseInt(matcher.group(2)), matcher.group(1));
            seen++;
        }
        assertEquals(16, seen);
    }

    @Test
    void verifierRejectionCarriesTheVerifierLog() throws Exception
    {
        final Path object = dir.resolve("unchecked_read.o");
        final Process clang = new ProcessBuilder("clang", "-O2", "-g", "-target", "bpf",
            "-I/usr/include/" + System.getProperty("os.arch").replace("amd64", "x86_64") + "-linux-gnu",
            "-c", "src/test/bpf/unchecked_read.bpf.c", "-o", object.toString()).redirectErrorStream(true).start();
        final String clangOutput = new String(clang.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, clang.waitFor(), clangOutput);
        try (BpfObject bpf = BpfObject.open(object))
        {
            final BpfException rejected = assertThrows(BpfException.class, () -> bpf.load("unchecked_read"));
            assertTrue(rejected.getMessage().contains("verifier log of unchecked_read"), rejected.getMessage());
            assertTrue(rejected.getMessage().contains("invalid access to packet"), rejected.getMessage());
        }
    }

    @Test
    void missingObjectAndUnknownInterfaceAreNamed()
    {
        final BpfException missing = assertThrows(BpfException.class, () -> BpfObject.open(dir.resolve("absent.o")));
        assertTrue(missing.getMessage().contains("absent.o") && missing.getMessage().contains("No such file"), missing.getMessage());
        final BpfException noInterface = assertThrows(BpfException.class, () -> XdpAttachment.query("smlnosuch0"));
        assertTrue(noInterface.getMessage().contains("no network interface 'smlnosuch0'"), noInterface.getMessage());
    }
}
