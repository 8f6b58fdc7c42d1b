package io.switchml.ops;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.Json;
import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.MetricNames;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Grafana dashboard and the alerting rules in {@code ops/grafana/} query only metrics that a running appliance
 * exports: an appliance embedded in this JVM serves {@code /metrics} over real HTTP while two workers all-reduce
 * through it and a stray datagram is dropped, and every metric name parsed out of every panel's and every rule's
 * PromQL must be a sample name of that scrape. With Debian's {@code prometheus} package (which
 * {@code scripts/ensure-test-deps.sh} installs; without it these tests fail saying so), {@code promtool} checks the rules and a real Prometheus server
 * scrapes the appliance, evaluates every panel's query (each must parse and, unless it filters or needs an offload
 * backend, return series) and every rule (each must evaluate without error).
 */
@Timeout(60)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GrafanaFilesTest
{
    private static final Path DASHBOARD = Path.of("grafana", "switchml-appliance.json");
    private static final Path RULES = Path.of("grafana", "switchml-alerts.yml");
    /** Series Prometheus makes itself for every target, not in any scrape. */
    private static final Set<String> SYNTHETIC = Set.of("up");
    private static final Pattern IDENTIFIER = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
    private static final Set<String> KEYWORDS = Set.of(
        "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf",
        "nan");

    @TempDir
    static Path dir;

    private final ExecutorService executor = Executors.newCachedThreadPool();
    private final List<WorkerClient> workers = new ArrayList<>();
    private Appliance appliance;
    private Set<String> scraped;

    @BeforeAll
    void scrapeARunningAppliance() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .shards(2).memoryBudgetBytes(64L << 20));
        final List<Future<WorkerClient>> joins = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final int r = rank;
            joins.add(executor.submit(() -> WorkerClient.connect(new WorkerContext().controlPort(appliance.controlPort())
                .jobName("dash").token("token-dash").worldSize(2).rank(r).elementType(ElementType.INT32).lanes(256)
                .slots(4))));
        }
        for (final Future<WorkerClient> join : joins)
        {
            workers.add(join.get(20, TimeUnit.SECONDS));
        }
        final List<Future<int[]>> results = new ArrayList<>();
        for (final WorkerClient worker : workers)
        {
            results.add(executor.submit(() ->
            {
                final int[] tensor = new int[4096];
                java.util.Arrays.fill(tensor, 1);
                final int[] sum = new int[tensor.length];
                worker.allReduce(tensor, sum);
                return sum;
            }));
        }
        final int[] expected = new int[4096];
        java.util.Arrays.fill(expected, 2);
        for (final Future<int[]> result : results)
        {
            assertArrayEquals(expected, result.get(30, TimeUnit.SECONDS));
        }
        try (DatagramSocket socket = new DatagramSocket())
        {
            final byte[] junk = "not a switchml packet".getBytes(StandardCharsets.US_ASCII);
            socket.send(new DatagramPacket(junk, junk.length, InetAddress.getLoopbackAddress(), appliance.dataPort()));
        }

        final HttpClient client = HttpClient.newHttpClient();
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        String text;
        do
        {
            text = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + appliance.httpPort() + "/metrics"))
                .build(), HttpResponse.BodyHandlers.ofString()).body();
        }
        while (!text.contains("switchml_dropped_packets_total 1.0") && System.nanoTime() - deadlineNs < 0 && pause());
        assertTrue(text.contains("switchml_dropped_packets_total 1.0"), "the stray datagram is counted: " + text);
        scraped = new LinkedHashSet<>();
        double cpuSeconds = 0;
        for (final PrometheusParser.Sample sample : PrometheusParser.parse(text))
        {
            scraped.add(sample.name());
            switch (sample.name())
            {
                case MetricNames.MEMORY_BUDGET_BYTES -> assertEquals(64 << 20, sample.value(), text);
                case MetricNames.MEMORY_USED_BYTES -> assertTrue(sample.value() > 0, "the job's slots: " + text);
                case MetricNames.SHARD_CPU_SECONDS + "_total" -> cpuSeconds += sample.value();
                default ->
                {
                }
            }
        }
        assertTrue(cpuSeconds > 0, "shard threads' CPU time: " + text);
    }

    @AfterAll
    void stop()
    {
        workers.forEach(WorkerClient::close);
        executor.shutdownNow();
        if (null != appliance)
        {
            appliance.close();
        }
    }

    @Test
    void everyDashboardQueryNamesMetricsTheApplianceExports() throws Exception
    {
        final Map<?, ?> dashboard = (Map<?, ?>)Json.parse(Files.readString(DASHBOARD));
        final List<String> expressions = new ArrayList<>();
        final Set<String> titles = new LinkedHashSet<>();
        for (final Object item : (List<?>)dashboard.get("panels"))
        {
            final Map<?, ?> panel = (Map<?, ?>)item;
            titles.add((String)panel.get("title"));
            final List<?> targets = (List<?>)panel.get("targets");
            assertFalse(targets.isEmpty(), "panel without a query: " + panel.get("title"));
            for (final Object target : targets)
            {
                expressions.add((String)((Map<?, ?>)target).get("expr"));
            }
        }
        for (final Object variable : (List<?>)((Map<?, ?>)dashboard.get("templating")).get("list"))
        {
            final Object definition = ((Map<?, ?>)variable).get("definition");
            if (definition instanceof String query)
            {
                expressions.add(query.replaceFirst("^label_values\\((.*),[^,]*\\)$", "$1"));
            }
        }
        for (final String required : List.of("Packets received and sent", "Drops by reason", "Jobs",
            "Slot latency (heatmap)", "Aggregator memory", "CPU per shard"))
        {
            assertTrue(titles.contains(required), "panel " + required + " in " + titles);
        }

        final Map<String, Set<String>> missing = missing(expressions);
        assertTrue(missing.isEmpty(), "metrics queried by the dashboard but not in the scrape: " + missing);
    }

    @Test
    void everyAlertingRuleNamesMetricsTheApplianceExports() throws Exception
    {
        final List<String> lines = Files.readAllLines(RULES);
        final List<String> alerts = new ArrayList<>();
        final List<String> expressions = new ArrayList<>();
        for (final String line : lines)
        {
            final String trimmed = line.strip();
            if (trimmed.startsWith("- alert:"))
            {
                alerts.add(trimmed.substring("- alert:".length()).strip());
            }
            else if (trimmed.startsWith("expr:"))
            {
                expressions.add(trimmed.substring("expr:".length()).strip());
            }
        }
        assertTrue(alerts.size() >= 8, alerts::toString);
        assertEquals(alerts.size(), expressions.size(), "one single-line expr per alert");

        final Map<String, Set<String>> missing = missing(expressions);
        assertTrue(missing.isEmpty(), "metrics queried by the rules but not in the scrape: " + missing);
    }

    @Test
    void promtoolAcceptsTheRules() throws Exception
    {
        final Path promtool = Path.of("/usr/bin/promtool");
        assertTrue(Files.isExecutable(promtool), "promtool not installed: run scripts/ensure-test-deps.sh (Debian package prometheus)");
        final Process process = new ProcessBuilder(promtool.toString(), "check", "rules", RULES.toString())
            .redirectErrorStream(true).redirectOutput(dir.resolve("promtool.out").toFile()).start();
        assertTrue(process.waitFor(30, TimeUnit.SECONDS));
        final String output = Files.readString(dir.resolve("promtool.out"));
        assertEquals(0, process.exitValue(), output);
        assertTrue(output.contains("SUCCESS"), output);
    }

    @Test
    void theDashboardsQueriesAndTheRulesEvaluateOnARealPrometheus() throws Exception
    {
        final Path prometheus = Path.of("/usr/bin/prometheus");
        assertTrue(Files.isExecutable(prometheus), "prometheus not installed: run scripts/ensure-test-deps.sh (Debian package prometheus)");
        final int port;
        try (java.net.ServerSocket probe = new java.net.ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            port = probe.getLocalPort();
        }
        final Path config = dir.resolve("prometheus.yml");
        Files.writeString(config, """
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            rule_files: ["%s"]
            scrape_configs:
              - job_name: switchml-appliance
                static_configs: [{targets: ["127.0.0.1:%d"]}]
            """.formatted(RULES.toAbsolutePath(), appliance.httpPort()));
        final Process server = new ProcessBuilder(prometheus.toString(), "--config.file=" + config,
            "--storage.tsdb.path=" + dir.resolve("tsdb"), "--web.listen-address=127.0.0.1:" + port)
            .redirectErrorStream(true).redirectOutput(dir.resolve("prometheus.log").toFile()).start();
        try
        {
            final HttpClient client = HttpClient.newHttpClient();
            final String api = "http://127.0.0.1:" + port + "/api/v1/";
            final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!queryOrEmpty(client, api, "count_over_time(switchml_build_info[1m]) >= 4").contains("\"value\"") &&
                System.nanoTime() - deadlineNs < 0 && pause())
            {
                assertTrue(server.isAlive(), () -> log("prometheus exited"));
            }
            assertTrue(query(client, api, "up{job=\"switchml-appliance\"}").contains("\"1\""), () -> log("no scrapes"));

            final Map<?, ?> dashboard = (Map<?, ?>)Json.parse(Files.readString(DASHBOARD));
            int nonEmpty = 0;
            for (final Object panel : (List<?>)dashboard.get("panels"))
            {
                for (final Object target : (List<?>)((Map<?, ?>)panel).get("targets"))
                {
                    final String expr = ((String)((Map<?, ?>)target).get("expr"))
                        .replace("$__rate_interval", "10s").replace("$instance", ".*");
                    final Map<?, ?> answer = (Map<?, ?>)Json.parse(query(client, api, expr));
                    assertEquals("success", answer.get("status"), () -> expr + ": " + answer);
                    final List<?> result = (List<?>)((Map<?, ?>)answer.get("data")).get("result");
                    final boolean mayBeEmpty = expr.contains("switchml_backend_") || expr.matches(".*\\) > 0$");
                    assertTrue(mayBeEmpty || !result.isEmpty(), () -> "no series for " + expr);
                    nonEmpty += result.isEmpty() ? 0 : 1;
                }
            }
            assertTrue(nonEmpty >= 20, "queries with series: " + nonEmpty);

            final long rulesDeadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            String rules;
            do
            {
                rules = client.send(HttpRequest.newBuilder(URI.create(api + "rules")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            }
            while (rules.contains("\"health\":\"unknown\"") && System.nanoTime() - rulesDeadlineNs < 0 && pause());
            final Map<?, ?> answer = (Map<?, ?>)Json.parse(rules);
            int evaluated = 0;
            for (final Object group : (List<?>)((Map<?, ?>)answer.get("data")).get("groups"))
            {
                for (final Object rule : (List<?>)((Map<?, ?>)group).get("rules"))
                {
                    final Map<?, ?> alerting = (Map<?, ?>)rule;
                    assertEquals("ok", alerting.get("health"), alerting::toString);
                    evaluated++;
                }
            }
            assertEquals(expressionsOfRules(), evaluated);
        }
        finally
        {
            server.destroy();
            server.waitFor(10, TimeUnit.SECONDS);
            server.destroyForcibly();
        }
    }

    private static String query(final HttpClient client, final String api, final String expr) throws Exception
    {
        return client.send(HttpRequest.newBuilder(URI.create(api + "query?query=" +
            java.net.URLEncoder.encode(expr, StandardCharsets.UTF_8))).build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    /**
     * @return the answer, or "" while the server does not listen yet.
     */
    private static String queryOrEmpty(final HttpClient client, final String api, final String expr) throws Exception
    {
        try
        {
            return query(client, api, expr);
        }
        catch (final java.io.IOException ex)
        {
            return "";
        }
    }

    private static int expressionsOfRules() throws java.io.IOException
    {
        return (int)Files.readAllLines(RULES).stream().filter((line) -> line.strip().startsWith("expr:")).count();
    }

    private static String log(final String what)
    {
        try
        {
            return what + ": " + Files.readString(dir.resolve("prometheus.log"));
        }
        catch (final java.io.IOException ex)
        {
            return what + " (no log: " + ex + ")";
        }
    }

    @Test
    void metricNamesParseOutOfPromQl()
    {
        assertEquals(Set.of("a_total", "b_bytes"), metricNames(
            "sum by (instance, le) (rate(a_total{x=\"y\",instance=~\"$instance\"}[$__rate_interval])) / on(instance) " +
                "group_left(foo) max without (le) (b_bytes offset 5m) > 0.5 and bool 1e3"));
        assertEquals(Set.of("up"), metricNames("up{job=\"switchml-appliance\"} == 0"));
    }

    /**
     * @return for each expression, the metric names it queries that the scrape lacks (offload backends' families,
     * absent without an offload backend, must at least be ones the exporter names).
     */
    private Map<String, Set<String>> missing(final List<String> expressions)
    {
        final Map<String, Set<String>> missing = new LinkedHashMap<>();
        final Set<String> named = new LinkedHashSet<>();
        for (final String expression : expressions)
        {
            final Set<String> names = metricNames(expression);
            assertFalse(names.isEmpty(), "no metric in " + expression);
            named.addAll(names);
            for (final String name : names)
            {
                // an offload backend's counters: not in this software-only scrape (the xdp backend's tests scrape them)
                final boolean backend =
                    name.equals(MetricNames.export(CounterTypes.BACKEND, "drop_bad_mac", null).family() + "_total") ||
                    name.equals(MetricNames.export(CounterTypes.BACKEND, "reattachments", null).family() + "_total");
                if (!scraped.contains(name) && !SYNTHETIC.contains(name) && !backend)
                {
                    missing.computeIfAbsent(expression, (ignore) -> new LinkedHashSet<>()).add(name);
                }
            }
        }
        assertTrue(named.stream().anyMatch((name) -> name.startsWith(MetricNames.PREFIX)), named::toString);
        return missing;
    }

    /**
     * @return the metric names a PromQL expression selects: identifiers left once strings, label matchers, range and
     * offset durations, grouping clauses, function calls, keywords and numbers are taken out.
     */
    static Set<String> metricNames(final String expression)
    {
        String stripped = expression
            .replaceAll("\"(?:[^\"\\\\]|\\\\.)*\"", "\"\"")
            .replaceAll("\\{[^}]*}", " ")
            .replaceAll("\\[[^]]*]", " ")
            .replaceAll("\\b(by|without|on|ignoring|group_left|group_right)\\s*\\([^)]*\\)", " ")
            .replaceAll("\\boffset\\s+\\S+", " ")
            .replaceAll("\\$\\w+", " ");
        final Set<String> names = new LinkedHashSet<>();
        final Matcher matcher = IDENTIFIER.matcher(stripped);
        while (matcher.find())
        {
            final String token = matcher.group();
            int next = matcher.end();
            while (next < stripped.length() && Character.isWhitespace(stripped.charAt(next)))
            {
                next++;
            }
            final boolean call = next < stripped.length() && stripped.charAt(next) == '(';
            final boolean number = matcher.start() > 0 && Character.isDigit(stripped.charAt(matcher.start() - 1));
            if (!call && !number && !KEYWORDS.contains(token.toLowerCase(java.util.Locale.ROOT)))
            {
                names.add(token);
            }
        }
        return names;
    }

    private static boolean pause()
    {
        try
        {
            Thread.sleep(50);
            return true;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
