package io.switchml.appliance.telemetry;

import io.switchml.protocol.BuildInfo;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.telemetry.SystemCounter;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * {@link HttpEndpoint} over a real loopback socket.
 */
@Timeout(10)
class HttpEndpointTest
{
    private static final Pattern HELP = Pattern.compile("# HELP ([a-z_][a-z0-9_]*) .*");
    private static final Pattern TYPE = Pattern.compile("# TYPE ([a-z_][a-z0-9_]*) (counter|gauge|histogram|summary|untyped)");
    private static final Pattern SAMPLE = Pattern.compile(
        "([a-z_][a-z0-9_]*)(\\{(?:[a-z_][a-z0-9_]*=\"(?:[^\"\\\\\\n]|\\\\[\\\\\"n])*\",?)*})? " +
        "(-?[0-9.]+(?:E-?[0-9]+)?|NaN|[+-]Inf)");

    @TempDir
    Path directory;

    private final AtomicBoolean ready = new AtomicBoolean(true);
    private CountersFile countersFile;
    private SlotLatency latency;
    private HttpEndpoint endpoint;
    private HttpClient client;

    @BeforeEach
    void before() throws Exception
    {
        countersFile = new CountersFile(directory);
        latency = new SlotLatency(0);
        endpoint = new HttpEndpoint(
            InetAddress.getLoopbackAddress(),
            0,
            new ApplianceMetrics(countersFile.countersReader(), () -> Map.of(latency.shardId(), latency.totalSnapshot())),
            ready::get,
            () -> "{\"status\":\"" + (ready.get() ? "up" : "starting") + "\"}");
        client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterEach
    void after()
    {
        endpoint.close();
        client.close();
        countersFile.close();
    }

    @Test
    void metricsAreValidPrometheusTextWithTheExpectedSamples() throws Exception
    {
        final ShardCounters shard0 = countersFile.newShardCounters(0);
        final ShardCounters shard1 = countersFile.newShardCounters(1);
        shard0.onPacketIn(100);
        shard0.onPacketIn(100);
        shard0.onPacketIn(100);
        shard1.onPacketIn(10);
        shard0.onDrop(DropReason.BAD_MAGIC);
        shard0.onDutyCycleNs(1234);
        final JobCounters job = countersFile.allocateJobCounters(7, "acme", "resnet");
        job.onPacketIn(100);
        job.onPacketIn(100);
        countersFile.allocateJobCounters(9, "we\"ird\\", "line\nbreak").onSlotCompleted();
        countersFile.systemCounter(SystemCounter.JOBS_ACTIVE).increment();
        countersFile.aggregateShardTotals();
        for (int i = 1; i <= 100; i++)
        {
            latency.recordNs(i * 1_000L);
        }

        final HttpResponse<String> response = get("/metrics");
        assertEquals(200, response.statusCode());
        assertEquals("text/plain; version=0.0.4; charset=utf-8",
            response.headers().firstValue("Content-Type").orElse(""));

        final String body = response.body();
        final Map<String, String> samples = parse(body);
        assertEquals(4.0, value(samples, "switchml_received_packets_total"), body);
        assertEquals(310.0, value(samples, "switchml_received_bytes_total"));
        assertEquals(1.0, value(samples, "switchml_jobs_active"));
        assertEquals(1.0, value(samples, "switchml_dropped_packets_total"));
        assertEquals(0.0, value(samples, "switchml_control_connections"));
        assertEquals(3.0, value(samples, "switchml_shard_received_packets_total{shard=\"0\"}"));
        assertEquals(1.0, value(samples, "switchml_shard_received_packets_total{shard=\"1\"}"));
        assertEquals(1.0, value(samples, "switchml_shard_dropped_packets_total{reason=\"bad_magic\",shard=\"0\"}"));
        assertEquals(0.0, value(samples, "switchml_shard_dropped_packets_total{reason=\"bad_mac\",shard=\"1\"}"));
        assertEquals(1.234e-6, value(samples, "switchml_shard_duty_cycle_max_seconds{shard=\"0\"}"), 1e-12);
        assertEquals(2.0, value(samples, "switchml_job_received_packets_total{job_name=\"resnet\",sml_job=\"7\",tenant=\"acme\"}"));
        assertEquals(200.0, value(samples, "switchml_job_received_bytes_total{job_name=\"resnet\",sml_job=\"7\",tenant=\"acme\"}"));
        assertEquals(1.0, value(samples,
            "switchml_job_slots_completed_total{job_name=\"line\\nbreak\",sml_job=\"9\",tenant=\"we\\\"ird\\\\\"}"));
        assertTrue(samples.keySet().stream().noneMatch((name) -> name.contains("job=") && !name.contains("sml_job=")),
            "no label called job: " + body);
        assertTrue(samples.keySet().stream().noneMatch((name) -> name.startsWith("switchml_shard_drop_")), body);

        assertEquals(100.0, value(samples, "switchml_slot_latency_seconds_count{shard=\"0\"}"));
        assertEquals(10.0, value(samples, "switchml_slot_latency_seconds_bucket{shard=\"0\",le=\"1.0E-5\"}"));
        assertEquals(50.0, value(samples, "switchml_slot_latency_seconds_bucket{shard=\"0\",le=\"5.0E-5\"}"));
        assertEquals(100.0, value(samples, "switchml_slot_latency_seconds_bucket{shard=\"0\",le=\"1.0E-4\"}"));
        assertEquals(100.0, value(samples, "switchml_slot_latency_seconds_bucket{shard=\"0\",le=\"+Inf\"}"));
        assertEquals(5050e-6, value(samples, "switchml_slot_latency_seconds_sum{shard=\"0\"}"), 10e-6);

        assertEquals(1.0, value(samples, "switchml_build_info{commit=\"" + BuildInfo.commit() + "\",version=\"" +
            BuildInfo.version() + "\"}"));
        assertTrue(value(samples, "process_cpu_seconds_total") > 0, "process metrics");
        assertTrue(samples.keySet().stream().anyMatch((name) -> name.startsWith("jvm_memory_used_bytes{")), "JVM metrics");

        assertTrue(body.contains("# TYPE switchml_jobs_active gauge\n"));
        assertTrue(body.contains("# TYPE switchml_received_packets_total counter\n"));
        assertTrue(body.contains("# TYPE switchml_shard_duty_cycle_max_seconds gauge\n"));
        assertTrue(body.contains("# TYPE switchml_slot_latency_seconds histogram\n"));
        for (final String name : samples.keySet())
        {
            final String family = name.replaceFirst("\\{.*", "");
            assertTrue(!body.contains("# TYPE " + family + " counter") || family.endsWith("_total"), family);
        }

        job.close();
        final Map<String, String> afterClose = parse(get("/metrics").body());
        assertTrue(afterClose.keySet().stream().noneMatch((name) -> name.contains("sml_job=\"7\"")), afterClose.toString());
    }

    @Test
    void openMetricsOnlyWhenTheScraperAsksForIt() throws Exception
    {
        countersFile.systemCounter(SystemCounter.JOBS_CREATED).increment();
        final HttpResponse<String> openMetrics = send(HttpRequest.newBuilder(uri("/metrics"))
            .header("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
            .GET().build());
        assertEquals(200, openMetrics.statusCode());
        assertTrue(openMetrics.headers().firstValue("Content-Type").orElse("").startsWith("application/openmetrics-text"),
            openMetrics.headers().toString());
        final String body = openMetrics.body();
        assertTrue(body.endsWith("# EOF\n"), "OpenMetrics ends with # EOF");
        assertTrue(body.contains("# TYPE switchml_jobs_created counter\n"), body);
        assertTrue(body.contains("\nswitchml_jobs_created_total 1.0\n"), body);
        assertTrue(body.contains("# UNIT switchml_slot_latency_seconds seconds\n"), body);

        final HttpResponse<String> text = send(HttpRequest.newBuilder(uri("/metrics")).header("Accept", "text/plain").GET().build());
        assertTrue(text.headers().firstValue("Content-Type").orElse("").startsWith("text/plain; version=0.0.4"));
        assertTrue(!text.body().contains("# EOF"));
    }

    @Test
    void emptyLatencyHistogramsExportZeroCounts() throws Exception
    {
        final Map<String, String> samples = parse(get("/metrics").body());
        assertEquals(0.0, value(samples, "switchml_slot_latency_seconds_bucket{shard=\"0\",le=\"+Inf\"}"));
        assertEquals(0.0, value(samples, "switchml_slot_latency_seconds_count{shard=\"0\"}"));
    }

    @Test
    void healthIs200WhenReadyAnd503Otherwise() throws Exception
    {
        final HttpResponse<String> up = get("/health");
        assertEquals(200, up.statusCode());
        assertEquals("{\"status\":\"up\"}", up.body());
        assertTrue(up.headers().firstValue("Content-Type").orElse("").startsWith("application/json"));

        ready.set(false);
        final HttpResponse<String> starting = get("/health");
        assertEquals(503, starting.statusCode());
        assertEquals("{\"status\":\"starting\"}", starting.body());
    }

    @Test
    void clientsThatSendHalfARequestHoldUpNobodyElse() throws Exception
    {
        final List<java.net.Socket> stalled = new java.util.ArrayList<>();
        try
        {
            for (int i = 0; i < 8; i++)
            {
                final java.net.Socket socket = new java.net.Socket(InetAddress.getLoopbackAddress(), endpoint.port());
                socket.getOutputStream().write("GET /hea".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                socket.getOutputStream().flush();
                stalled.add(socket);
            }
            Thread.sleep(200);
            final long startNs = System.nanoTime();
            assertEquals(200, get("/health").statusCode());
            assertEquals(200, get("/metrics").statusCode());
            final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;
            assertTrue(elapsedMs < 3_000, "health and metrics answered beside 8 stalled requests in " + elapsedMs + " ms");
        }
        finally
        {
            for (final java.net.Socket socket : stalled)
            {
                socket.close();
            }
        }
        assertEquals(Integer.toString(HttpEndpoint.MAX_EXCHANGE_SECONDS), System.getProperty("sun.net.httpserver.maxReqTime"));
    }

    @Test
    void unknownPathsAre404AndOtherMethods405() throws Exception
    {
        assertEquals(404, get("/").statusCode());
        assertEquals(404, get("/metrics/extra").statusCode());
        assertEquals(404, get("/nope").statusCode());

        final HttpResponse<String> post = send(HttpRequest.newBuilder(uri("/metrics"))
            .POST(HttpRequest.BodyPublishers.ofString("x")).build());
        assertEquals(405, post.statusCode());
        assertEquals("GET", post.headers().firstValue("Allow").orElse(""));
        assertEquals(405, send(HttpRequest.newBuilder(uri("/health")).DELETE().build()).statusCode());
        assertEquals(200, get("/metrics?name=x").statusCode());
    }

    private static double value(final Map<String, String> samples, final String key)
    {
        final String value = samples.get(key);
        assertTrue(null != value, "no sample " + key + " in " + samples.keySet());
        return Double.parseDouble(value);
    }

    private HttpResponse<String> get(final String path) throws Exception
    {
        return send(HttpRequest.newBuilder(uri(path)).GET().build());
    }

    private HttpResponse<String> send(final HttpRequest request) throws Exception
    {
        return client.send(request, HttpResponse.BodyHandlers.ofString());
    }

    private URI uri(final String path)
    {
        return URI.create("http://127.0.0.1:" + endpoint.port() + path);
    }

    /**
     * Check the exposition format line by line (HELP then TYPE before a family's samples, each family
     * once and contiguous, every sample valid) and return the samples by name and labels.
     */
    private static Map<String, String> parse(final String text)
    {
        assertTrue(text.endsWith("\n"), "text ends with a newline");
        final Map<String, String> samples = new HashMap<>();
        final Set<String> families = new HashSet<>();
        String family = null;
        String type = null;
        for (final String line : List.of(text.split("\n")))
        {
            Matcher matcher;
            if ((matcher = HELP.matcher(line)).matches())
            {
                assertTrue(families.add(matcher.group(1)), "family twice: " + line);
                family = matcher.group(1);
                type = null;
            }
            else if ((matcher = TYPE.matcher(line)).matches())
            {
                assertEquals(family, matcher.group(1), "TYPE follows its HELP: " + line);
                type = matcher.group(2);
            }
            else if ((matcher = SAMPLE.matcher(line)).matches())
            {
                final String name = matcher.group(1);
                final boolean ofFamily = name.equals(family) ||
                    (("summary".equals(type) || "histogram".equals(type)) &&
                    (name.equals(family + "_sum") || name.equals(family + "_count") || name.equals(family + "_bucket")));
                assertTrue(null != type && ofFamily, "sample outside its family: " + line);
                final String labels = null == matcher.group(2) ? "" : matcher.group(2);
                assertTrue(null == samples.put(name + labels, matcher.group(3)), "duplicate sample: " + line);
            }
            else
            {
                fail("not a valid exposition line: '" + line + "'");
            }
        }
        return samples;
    }
}
