package io.switchml.dist;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
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
 * The tofino-model backend end to end, in real network namespaces with real processes: tofino-p4's
 * tofino-model-rack.sh builds bench/rack's topology, runs the appliance with backends=tofino-model,software (each job
 * installed through P4Runtime over TCP into the pipeline model, which then aggregates on the shard's thread), and 4
 * workers all-reduce known float32 tensors with 1% random loss on every bridge port, at k=64 and at k=256
 * (recirculation). Needs root (CI runs as root); without it, this test fails rather than skips.
 */
@Tag("process")
final class TofinoModelRackTest
{
    private static final int WORKERS = 4;
    private static final Pattern COUNTER = Pattern.compile("([a-z_]+)=(\\d+)");

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void fourWorkersWithLossAggregateInTheModelledSwitch() throws Exception
    {
        final Path script = Path.of("..", "tofino-p4", "src", "test", "sh", "tofino-model-rack.sh").toAbsolutePath().normalize();
        assertTrue(Files.isRegularFile(script), "missing " + script);
        final ProcessBuilder builder = new ProcessBuilder("bash", script.toString()).redirectErrorStream(true);
        builder.environment().put("SWITCHML_CP", System.getProperty("java.class.path"));
        builder.environment().put("JAVA", Path.of(System.getProperty("java.home"), "bin", "java").toString());
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
        assertEquals(0, process.waitFor(), "tofino-model-rack.sh failed (needs root, iproute2, nftables; see the output above)");

        for (final String name : List.of("k64", "k256"))
        {
            final String prefix = "TOFINO_RACK case=" + name + " ";
            assertEquals(WORKERS, lines.stream().filter(l -> l.startsWith(prefix + "RESULT") && l.contains("ok=true")).count(),
                name + ": every rank's results checked within n/f");
            // the job's id: the appliance's start-up rehearsal takes ids of its own first (on software)
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix + "log") &&
                l.matches(".*tofino-model: installed job [0-9]+ .*") &&
                l.contains(WORKERS + " ranks pinned")), name + ": the job was installed through P4Runtime");
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix + "log") &&
                l.matches(".*tofino-model: removed job [0-9]+.*")),
                name + ": and removed when it ended");
            final String closed = lines.stream().filter(l -> l.startsWith(prefix + "log") && l.contains("pipeline counters:"))
                .findFirst().orElseThrow(() -> new AssertionError(name + ": no pipeline counters"));
            final Map<String, Long> counters = new HashMap<>();
            final Matcher matcher = COUNTER.matcher(closed.substring(closed.indexOf("pipeline counters:")));
            while (matcher.find())
            {
                counters.put(matcher.group(1), Long.parseLong(matcher.group(2)));
            }
            assertTrue(counters.get("completed") > 1000, name + ": slots completed in the model " + counters);
            assertEquals(counters.get("completed") * WORKERS, (long)counters.get("replicas"), name + ": every result replicated to every rank");
            assertTrue(counters.getOrDefault("shadow_results", 0L) > 0, name + ": losses answered from the shadow copy");
            if (name.equals("k256"))
            {
                assertTrue(counters.get("recirculations") > counters.get("packets"), name + ": k=256 recirculates " + counters);
            }
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(prefix + "loss_drops=") && !l.startsWith(prefix + "loss_drops=0 ") &&
                l.endsWith("failed=0")), name + ": the 1% loss rules dropped packets and the case passed");
        }
    }
}
