package io.switchml.dist;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * bench/rack's record of where the hypervisor placed CPUs 0 and 1 during a cell: corelat.c built with the machine's
 * compiler and run as the bench runs it (samples until SIGTERM), and aggregate.py's reading of those samples. Needs
 * two CPUs and a C compiler (clang, which scripts/ensure-test-deps.sh installs); without them it fails.
 */
@Tag("process")
final class BenchPlacementTest
{
    private static final Path RACK = Path.of("..", "bench", "rack").toAbsolutePath().normalize();

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void corelatSamplesTheRoundTripBetweenTwoCpusUntilTerminated(@TempDir final Path dir) throws Exception
    {
        assertTrue(Runtime.getRuntime().availableProcessors() >= 2, "corelat needs two CPUs");
        final Path binary = dir.resolve("corelat");
        final Process cc = new ProcessBuilder(compiler(), "-O2", "-Wall", "-Werror", "-pthread", "-o", binary.toString(),
            RACK.resolve("corelat.c").toString()).redirectErrorStream(true).start();
        final String ccOut = new String(cc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, cc.waitFor(), "corelat.c does not compile cleanly: " + ccOut);

        final Path out = dir.resolve("corelat.txt");
        final Process corelat = new ProcessBuilder(binary.toString(), "0", "1", "50").redirectOutput(out.toFile())
            .redirectError(dir.resolve("corelat.err").toFile()).start();
        Thread.sleep(1_500);
        corelat.destroy(); // SIGTERM, as bench/rack/run.sh stops it
        assertTrue(corelat.waitFor(10, TimeUnit.SECONDS), "corelat did not stop on SIGTERM");
        assertEquals(0, corelat.exitValue(), "exit status on SIGTERM: " + Files.readString(dir.resolve("corelat.err")));

        final List<String> lines = Files.readAllLines(out);
        assertTrue(lines.size() >= 10, "about 30 samples in 1.5 s at 50 ms: " + lines);
        long measured = 0;
        double previous = 0;
        for (final String line : lines)
        {
            final String[] fields = line.split(" ");
            assertEquals(2, fields.length, line);
            final double at = Double.parseDouble(fields[0]);
            final long roundTripNs = Long.parseLong(fields[1]);
            assertTrue(at >= previous, "monotonic time: " + lines);
            previous = at;
            assertTrue(roundTripNs == -1 || (roundTripNs > 0 && roundTripNs < 100_000), "a round trip or -1: " + line);
            measured += roundTripNs > 0 ? 1 : 0;
        }
        assertTrue(measured > 0, "on a machine this idle, some samples meet: " + lines);

        final Process refused = new ProcessBuilder(binary.toString(), "1", "1", "250").redirectErrorStream(true).start();
        final String refusal = new String(refused.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(2, refused.waitFor(), refusal);
        assertTrue(refusal.contains("two different CPUs"), refusal);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aggregateSplitsRoundsByPlacement(@TempDir final Path dir) throws Exception
    {
        // a cell whose CPUs were together for 9 samples and apart for 1, one with no sample that met, one without a file
        final Path together = Files.createDirectories(dir.resolve("together"));
        final StringBuilder samples = new StringBuilder();
        for (int i = 0; i < 9; i++)
        {
            samples.append(i).append(".25 61\n");
        }
        samples.append("9.25 310\n10.25 -1\n");
        Files.writeString(together.resolve("corelat.txt"), samples);
        final Path busy = Files.createDirectories(dir.resolve("busy"));
        Files.writeString(busy.resolve("corelat.txt"), "1.0 -1\n2.0 -1\n");
        final Path none = Files.createDirectories(dir.resolve("none"));

        final String script = String.join("\n",
            "import json, sys",
            "sys.path.insert(0, sys.argv[1])",
            "import aggregate as a",
            "cells = {}",
            "for name in ('together', 'busy', 'none'):",
            "    cell = {}",
            "    a.add_core_placement(cell, sys.argv[2] + '/' + name)",
            "    cells[name] = cell",
            "ours = {'runsTatP50Ms': [150.0, 260.0, 160.0, 170.0, 140.0], 'runsCoresApart': [0.0, 1.0, 0.0, None, 0.05],",
            "        'runsOk': [True, True, True, True, True]}",
            "gloo = {'tatP50Ms': 140.0, 'coresApartFraction': 0.0, 'ok': True}",
            "apart = {'tatP50Ms': 140.0, 'coresApartFraction': 0.05, 'ok': True}",
            "print(json.dumps({'cells': cells, 'ours': a.together_median(ours), 'gloo': a.together_median(gloo),",
            "                  'note': a.together_note(ours, gloo), 'none': a.together_note(ours, apart),",
            "                  'ratio': round(a.together_ratio(ours, gloo), 3), 'noRatio': a.together_ratio(ours, apart)}))");
        final Process python = new ProcessBuilder("python3", "-c", script, RACK.toString(), dir.toString())
            .redirectErrorStream(true).start();
        final String json = new String(python.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertEquals(0, python.waitFor(), json);

        assertTrue(json.contains("\"together\": {\"coresApartFraction\": 0.1, \"coreRoundTripNsP50\": 61, " +
            "\"coreSamples\": 11, \"coreSamplesValid\": 10}"), json);
        assertTrue(json.contains("\"busy\": {\"coresApartFraction\": null, \"coreRoundTripNsP50\": null, \"coreSamples\": 2}"),
            json);
        assertTrue(json.contains("\"none\": {\"coresApartFraction\": null, \"coreRoundTripNsP50\": null, \"coreSamples\": null}"),
            json);
        // rounds with no sample apart: 150 and 160 ms (median 155); the rounds apart, even 5 %, and the unknown one are left out
        assertTrue(json.contains("\"ours\": [155.0, 2]"), json);
        assertTrue(json.contains("\"gloo\": [140.0, 1]"), json);
        assertTrue(json.contains("SwitchML 155 ms (2 rounds), Gloo 140 ms (1 round), 0.90x"), json);
        assertTrue(json.contains("2 of ours, 0 of Gloo's, no ratio"), json);
        // the loopback targets call a ratio met over every round "suspect" when this one is below 1
        assertTrue(json.contains("\"ratio\": 0.903"), json);
        assertTrue(json.contains("\"noRatio\": null"), json);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aggregateChargesTheAppliancesCpuToTheLoopbackHost() throws Exception
    {
        // 4 ranks at 0.79 s/GB in the timed calls and an appliance at 1.05 s/GB: the host spends 0.79 + 1.05 / 4
        final String script = String.join("\n",
            "import sys",
            "sys.path.insert(0, sys.argv[1])",
            "import aggregate as a",
            "ours = {'timedCpuSecPerRankPerGB': 0.79, 'hostCpuSecPerRankPerGB': round(0.79 + 1.05 / 4, 3), 'workers': 4}",
            "gloo = {'timedCpuSecPerRankPerGB': 0.84, 'hostCpuSecPerRankPerGB': 0.84}",
            "print(a.host_cpu_note(ours, gloo))",
            "print('missing:' + a.host_cpu_note({'hostCpuSecPerRankPerGB': None}, gloo))");
        final Process python = new ProcessBuilder("python3", "-c", script, RACK.toString())
            .redirectErrorStream(true).start();
        final String out = new String(python.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertEquals(0, python.waitFor(), out);
        assertTrue(out.contains("SwitchML 1.05 (ranks 0.79 + appliance 0.26), Gloo 0.84, 1.25x"), out);
        assertTrue(out.endsWith("missing:"), "no figure without the appliance's: " + out);
    }

    private static String compiler() throws IOException, InterruptedException
    {
        for (final String candidate : List.of("cc", "clang"))
        {
            final Process which = new ProcessBuilder("sh", "-c", "command -v " + candidate).start();
            if (which.waitFor() == 0)
            {
                return candidate;
            }
        }
        throw new AssertionError("no C compiler (cc or clang) for bench/rack/corelat.c");
    }
}
