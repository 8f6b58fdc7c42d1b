package io.switchml.dist;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The XDP backend end to end, in real network namespaces with real processes: smartnic-offload's xdp-rack.sh builds
 * bench/rack's topology, runs the appliance with backends=xdp,software and its eth0 in native XDP mode, and 4
 * workers all-reduce known float32 tensors with 1% random loss on every bridge port: once with MAC on and results
 * multicast by the program, once with MAC off and results handed up for unicast fan-out; then the same at MTU 9000
 * with k = 2233, where updates reach the program in several buffers (xdp.frags). In the first run the MAC-off case's
 * program is taken off eth0 before its workers start and its job runs on the program the appliance put back. Needs root (CI runs as root);
 * without it, this test fails rather than skips.
 */
@Tag("process")
final class XdpRackTest
{
    private static final int WORKERS = 4;
    private static final Pattern COUNTER = Pattern.compile("([a-z_]+)=(\\d+)");

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void fourWorkersWithLossAggregateInTheKernel() throws Exception
    {
        final List<String> lines = runRack(Map.of("XDP_RACK_REATTACH_CASES", "nomac-unicast"));
        assertCases(lines);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("XDP_RACK case=nomac-unicast log") && l.contains("xdp: backend failed: program detached from eth0")) &&
            lines.stream().anyMatch(l -> l.startsWith("XDP_RACK case=nomac-unicast log") && l.contains("xdp: re-attached switchml_xdp")),
            "the program taken off eth0 was put back, and the job's checks above ran on it");
        assertTrue(lines.stream().anyMatch(l -> l.contains("case=mac-multicast") && l.contains("results_passed_up=0")),
            "multicast results never go up to the shard");
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void jumboFramesAggregateInTheKernel() throws Exception
    {
        final List<String> lines = runRack(Map.of("XDP_RACK_MTU", "9000"));
        assertCases(lines);
        for (final String name : List.of("mac-multicast", "nomac-unicast"))
        {
            final Map<String, Long> counters = detachCounters(lines, name);
            assertTrue(lines.stream().anyMatch(l -> l.startsWith("XDP_RACK case=" + name + " log") && l.contains("k up to 2233 (MTU 9000)")),
                name + ": loaded for k up to 2233");
            assertTrue(counters.get("multi_buffer_packets") * 2 > counters.get("updates"),
                name + ": most updates arrive in several buffers: " + counters);
        }
    }

    private static List<String> runRack(final Map<String, String> environment) throws Exception
    {
        final Path script = Path.of("..", "smartnic-offload", "src", "test", "sh", "xdp-rack.sh").toAbsolutePath().normalize();
        assertTrue(Files.isRegularFile(script), "missing " + script);
        final ProcessBuilder builder = new ProcessBuilder("bash", script.toString()).redirectErrorStream(true);
        builder.environment().put("SWITCHML_CP", System.getProperty("java.class.path"));
        builder.environment().put("JAVA", Path.of(System.getProperty("java.home"), "bin", "java").toString());
        builder.environment().put("XDP_RACK_ITERATIONS", "3");
        builder.environment().putAll(environment);
        final Process process = builder.start();
        final List<String> lines = new ArrayList<>();
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
        {
            String line;
            while ((line = reader.readLine()) != null)
            {
                System.out.println(line);
                lines.add(line);
            }
        }
        final int exit = process.waitFor();
        assertEquals(0, exit, "xdp-rack.sh failed (needs root, iproute2, nftables; see the output above)");
        return lines;
    }

    private static Map<String, Long> detachCounters(final List<String> lines, final String name)
    {
        final String prefix = "XDP_RACK case=" + name + " ";
        final String detached = lines.stream().filter(l -> l.startsWith(prefix + "log") && l.contains("xdp: detached"))
            .findFirst().orElseThrow(() -> new AssertionError(name + ": no detach line"));
        final Map<String, Long> counters = new HashMap<>();
        final Matcher matcher = COUNTER.matcher(detached);
        while (matcher.find())
        {
            counters.put(matcher.group(1), Long.parseLong(matcher.group(2)));
        }
        return counters;
    }

    private static void assertCases(final List<String> lines)
    {
        for (final String name : List.of("mac-multicast", "nomac-unicast"))
        {
            final String prefix = "XDP_RACK case=" + name + " ";
            assertEquals(WORKERS, lines.stream().filter(l -> l.startsWith(prefix + "RESULT") && l.contains("ok=true")).count(),
                name + ": every rank's results checked within n/f");
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix + "log") && l.contains("in native mode")),
                name + ": attached in driver mode");
            final Map<String, Long> counters = detachCounters(lines, name);
            final long updates = counters.get("updates");
            final long reachedUserSpace = counters.get("results_passed_up") + counters.get("passed_to_kernel");
            assertTrue(updates > 10_000, name + ": updates " + updates);
            assertTrue(counters.get("absorbed_in_kernel") * 2 > updates, name + ": absorbed in XDP " + counters);
            assertTrue(counters.get("pendings") > 0,
                name + ": probes for slots waiting for a rank whose update was lost are answered PENDING in XDP " + counters);
            assertTrue(reachedUserSpace * WORKERS <= updates,
                name + ": " + reachedUserSpace + " of " + updates + " update packets reached user space, more than 1/" + WORKERS);
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix + "loss_drops") || l.contains("loss_drops=")), name);
            assertTrue(lines.stream().noneMatch(l -> l.startsWith(prefix + "log") && l.contains("FAILED")), name + ": backend failed");
        }
    }
}
