package io.switchml.worker.bench;

import io.switchml.protocol.Json;
import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code worker bench} against an embedded appliance over loopback, with small tensors and few iterations.
 */
@Timeout(120)
class WorkerBenchCommandTest
{
    private static final String[] POSITIVE_FIELDS = {
        "elements", "tensor_bytes", "world", "lanes", "slots", "iterations", "samples", "rounds_checked",
        "tat_p50_ms", "tat_p99_ms", "tat_max_ms", "tat_min_ms", "tat_mean_ms", "ate_per_sec_p50", "ate_per_sec_mean",
        "tensor_gbit_per_sec_p50", "packets_sent", "packets_received"};

    private Appliance appliance;
    private final ExecutorService executor = Executors.newCachedThreadPool();

    private record Outcome(int exitCode, String out, String err)
    {
    }

    @BeforeEach
    void startAppliance() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).joinTimeoutMs(20_000));
    }

    @AfterEach
    void stop()
    {
        executor.shutdownNow();
        appliance.close();
    }

    private static Outcome bench(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine command = new CommandLine(new WorkerBenchCommand());
        command.setOut(new PrintWriter(out, true));
        command.setErr(new PrintWriter(err, true));
        final int exitCode = command.execute(args);
        return new Outcome(exitCode, out.toString(), err.toString());
    }

    private String[] args(final String... extra)
    {
        final List<String> all = new ArrayList<>(List.of("--control-port", Integer.toString(appliance.controlPort()),
            "-k", "1024", "-s", "8", "--rto-ms", "5", "--warmups", "2", "--iterations", "5"));
        all.addAll(List.of(extra));
        return all.toArray(String[]::new);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> parseObject(final String out)
    {
        assertEquals(1, out.strip().lines().count(), "--json prints exactly one line: " + out);
        final Map<String, Object> json = assertInstanceOf(Map.class, Json.parse(out.strip()));
        assertSnakeCaseKeys(json);
        return json;
    }

    /** One key style in every --json output: snake_case. */
    private static void assertSnakeCaseKeys(final Object json)
    {
        if (json instanceof Map<?, ?> map)
        {
            map.forEach((key, value) ->
            {
                assertTrue(((String)key).matches("[a-z][a-z0-9]*(_[a-z0-9]+)*"), "key '" + key + "' is not snake_case");
                assertSnakeCaseKeys(value);
            });
        }
        else if (json instanceof List<?> list)
        {
            list.forEach(WorkerBenchCommandTest::assertSnakeCaseKeys);
        }
    }

    private static double number(final Map<String, Object> json, final String field)
    {
        return assertInstanceOf(Number.class, json.get(field), field + " in " + json).doubleValue();
    }

    private static void assertFiguresPositive(final Map<String, Object> json)
    {
        for (final String field : POSITIVE_FIELDS)
        {
            assertTrue(number(json, field) > 0, field + " must be positive in " + json);
        }
        assertTrue(number(json, "retransmissions") >= 0);
        assertTrue(number(json, "tat_p50_ms") <= number(json, "tat_p99_ms"));
        assertTrue(number(json, "tat_p99_ms") <= number(json, "tat_max_ms") * 1.001);
    }

    @Test
    void floatRanksOnThreadsPrintOneJsonObjectWithPositiveFigures()
    {
        final Outcome outcome = bench(args("--ranks", "3", "--job", "bench-float", "--elements", "50000", "--json"));

        assertEquals(WorkerBenchCommand.EXIT_OK, outcome.exitCode(), outcome.out() + outcome.err());
        final Map<String, Object> json = parseObject(outcome.out());
        assertEquals(Boolean.TRUE, json.get("ok"));
        assertEquals("float32", json.get("type"));
        assertEquals(50_000.0, number(json, "elements"));
        assertEquals(3.0, number(json, "world"));
        assertEquals(3 * 5.0, number(json, "samples"), "every rank times every timed all-reduce");
        assertEquals(3 * 7.0, number(json, "rounds_checked"), "every result of every rank is checked, warm-ups too");
        assertFiguresPositive(json);
        final List<?> ranks = assertInstanceOf(List.class, json.get("ranks"));
        assertEquals(3, ranks.size());
        for (final Object rank : ranks)
        {
            @SuppressWarnings("unchecked")
            final Map<String, Object> figures = assertInstanceOf(Map.class, rank);
            assertTrue(number(figures, "tat_p50_ms") > 0 && number(figures, "ate_per_sec_p50") > 0, figures.toString());
        }
        assertEquals(number(json, "elements") / (number(json, "tat_p50_ms") / 1e3), number(json, "ate_per_sec_p50"),
            number(json, "ate_per_sec_p50") * 1e-4, "ATE/s at p50 is elements over the p50 TAT");
    }

    @Test
    void peerValuesAreCheckedAndEveryTimedTatIsListedInOrder()
    {
        final Outcome outcome = bench(args("--ranks", "4", "--job", "bench-peers", "--elements", "100000", "--values", "peers",
            "--json"));

        assertEquals(WorkerBenchCommand.EXIT_OK, outcome.exitCode(), outcome.out() + outcome.err());
        final Map<String, Object> json = parseObject(outcome.out());
        assertEquals("peers", json.get("values"));
        assertEquals(4 * 7.0, number(json, "rounds_checked"));
        for (final Object rank : assertInstanceOf(List.class, json.get("ranks")))
        {
            @SuppressWarnings("unchecked")
            final Map<String, Object> figures = assertInstanceOf(Map.class, rank);
            final List<?> tats = assertInstanceOf(List.class, figures.get("tats_ms"));
            assertEquals(5, tats.size(), "one TAT per timed all-reduce: " + figures);
            final double max = tats.stream().mapToDouble(t -> ((Number)t).doubleValue()).max().orElseThrow();
            assertEquals(number(figures, "tat_max_ms"), max, max * 2e-3, "the histogram's max is the list's max");
        }
    }

    @Test
    void peerValuesCheckCatchesAnElementOutOfBound()
    {
        final int world = 4;
        final float[] sum = new float[10_000];
        RankBenchmark.fillPeerValues(sum, 0);
        for (int rank = 1; rank < world; rank++)
        {
            final float[] tensor = new float[sum.length];
            RankBenchmark.fillPeerValues(tensor, rank);
            for (int i = 0; i < sum.length; i++)
            {
                sum[i] += tensor[i];
            }
        }
        assertEquals(null, RankBenchmark.verifyPeerValues(sum, world));
        sum[7777] = Math.nextUp(sum[7777] + 1e-3f);
        final String error = RankBenchmark.verifyPeerValues(sum, world);
        assertTrue(error != null && error.startsWith("element 7777 is "), error);
        assertTrue(RankBenchmark.verifyPeerValues(sum, 3) != null, "a sum over 4 ranks is not a sum over 3");
        sum[7777] = 10 * (1 + (7777 & 7));
        assertEquals(null, RankBenchmark.verifyPeerValues(sum, world));
        sum[5000] = Float.NaN;
        assertTrue(String.valueOf(RankBenchmark.verifyPeerValues(sum, world)).startsWith("element 5000 is NaN"));
    }

    @Test
    void intRanksAsSeparateCommandsMeetAndAgreeUnderLoss() throws Exception
    {
        final List<Future<Outcome>> ranks = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final String[] args = args("--world", "2", "--rank", Integer.toString(rank), "--job", "bench-int",
                "--token", "bench-test-token", "--type", "int32", "--size-mb", "1", "--loss-rate", "0.02",
                "--loss-seed", Integer.toString(rank + 5), "--json");
            ranks.add(executor.submit(() -> bench(args)));
        }
        long retransmissions = 0;
        for (final Future<Outcome> future : ranks)
        {
            final Outcome outcome = future.get();
            assertEquals(WorkerBenchCommand.EXIT_OK, outcome.exitCode(), outcome.out() + outcome.err());
            final Map<String, Object> json = parseObject(outcome.out());
            assertEquals("int32", json.get("type"));
            assertEquals(250_000.0, number(json, "elements"), "1 MB of 4-byte elements");
            assertEquals(5.0, number(json, "samples"));
            assertFiguresPositive(json);
            retransmissions += (long)number(json, "retransmissions_total");
        }
        assertTrue(retransmissions > 0, "2% loss each way must cause retransmissions");
    }

    @Test
    void textReportSaysPassed()
    {
        final Outcome outcome = bench(args("--ranks", "2", "--job", "bench-text", "--elements", "5000", "--no-barrier"));

        assertEquals(WorkerBenchCommand.EXIT_OK, outcome.exitCode(), outcome.out() + outcome.err());
        assertTrue(outcome.out().contains("TAT over 10 samples: p50 "), outcome.out());
        assertTrue(outcome.out().strip().endsWith("PASSED"), outcome.out());
    }

    @Test
    void badArgumentsExitWithTwo()
    {
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--ranks", "2", "--iterations", "0")).exitCode());
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--ranks", "2", "--rank", "0")).exitCode());
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--ranks", "2", "--world", "3")).exitCode());
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--world", "2")).exitCode(), "--rank missing");
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--ranks", "2", "--type", "float64")).exitCode());
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--ranks", "2", "--values", "gloo")).exitCode());
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, bench(args("--ranks", "2", "--elements", "nope")).exitCode());
        final Outcome noToken = bench(args("--world", "2", "--rank", "0", "--token", "short"));
        assertEquals(WorkerBenchCommand.EXIT_BAD_ARGUMENTS, noToken.exitCode());
        assertTrue(noToken.err().contains("token"), noToken.err());
    }

    @Test
    void unreachableApplianceIsAJobFailure() throws Exception
    {
        final int closedPort;
        try (ServerSocket socket = new ServerSocket(0))
        {
            closedPort = socket.getLocalPort();
        }
        final Outcome outcome = bench("--control-port", Integer.toString(closedPort), "--ranks", "2", "--elements", "1000",
            "--json");

        assertEquals(WorkerBenchCommand.EXIT_JOB_FAILED, outcome.exitCode(), outcome.out() + outcome.err());
        final Map<String, Object> json = parseObject(outcome.out());
        assertFalse((Boolean)json.get("ok"));
        assertEquals(3.0, number(json, "exit_code"));
        assertTrue(((String)json.get("error")).contains("cannot join"), json.toString());
    }
}
