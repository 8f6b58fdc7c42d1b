package io.switchml.appliance.telemetry;

import io.switchml.protocol.DropReason;
import io.switchml.protocol.telemetry.SystemCounter;
import org.HdrHistogram.Histogram;
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
import java.util.TreeMap;
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
    private static final Pattern TYPE = Pattern.compile("# TYPE ([a-z_][a-z0-9_]*) (counter|gauge|summary|untyped)");
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
            countersFile.countersReader(),
            () -> Map.of(latency.shardId(), latency.totalSnapshot()),
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

        final Map<String, String> samples = parse(response.body());
        assertEquals("4", samples.get("switchml_packets_in"), response.body());
        assertEquals("310", samples.get("switchml_bytes_in"));
        assertEquals("1", samples.get("switchml_jobs_active"));
        assertEquals("1", samples.get("switchml_drops"));
        assertEquals("0", samples.get("switchml_control_connections"));
        assertEquals("3", samples.get("switchml_shard_packets_in{shard=\"0\"}"));
        assertEquals("1", samples.get("switchml_shard_packets_in{shard=\"1\"}"));
        assertEquals("1", samples.get("switchml_shard_drop_bad_magic{shard=\"0\"}"));
        assertEquals("1234", samples.get("switchml_shard_duty_cycle_max_ns{shard=\"0\"}"));
        assertEquals("2", samples.get("switchml_job_packets_in{job=\"7\",tenant=\"acme\",name=\"resnet\"}"));
        assertEquals("200", samples.get("switchml_job_bytes_in{job=\"7\",tenant=\"acme\",name=\"resnet\"}"));
        assertEquals("1",
            samples.get("switchml_job_slots_completed{job=\"9\",tenant=\"we\\\"ird\\\\\",name=\"line\\nbreak\"}"));
        assertEquals("100", samples.get("switchml_slot_latency_seconds_count{shard=\"0\"}"));
        final double p99 =
            Double.parseDouble(samples.get("switchml_slot_latency_seconds{shard=\"0\",quantile=\"0.99\"}"));
        assertEquals(99e-6, p99, 0.5e-6);
        final double sum = Double.parseDouble(samples.get("switchml_slot_latency_seconds_sum{shard=\"0\"}"));
        assertEquals(5050e-6, sum, 10e-6);

        assertTrue(response.body().contains("# TYPE switchml_jobs_active gauge\n"));
        assertTrue(response.body().contains("# TYPE switchml_packets_in counter\n"));
        assertTrue(response.body().contains("# TYPE switchml_shard_duty_cycle_max_ns gauge\n"));
        assertTrue(response.body().contains("# TYPE switchml_slot_latency_seconds summary\n"));

        job.close();
        final Map<String, String> afterClose = parse(get("/metrics").body());
        assertTrue(afterClose.keySet().stream().noneMatch((name) -> name.contains("job=\"7\"")), afterClose.toString());
    }

    @Test
    void emptyLatencyHistogramsExportNaNQuantiles() throws Exception
    {
        final Map<String, String> samples = parse(get("/metrics").body());
        assertEquals("NaN", samples.get("switchml_slot_latency_seconds{shard=\"0\",quantile=\"0.5\"}"));
        assertEquals("0", samples.get("switchml_slot_latency_seconds_count{shard=\"0\"}"));
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

    @Test
    void renderedNamesAreSanitised()
    {
        assertEquals("drop_bad_magic", PrometheusText.sanitize("Drop Bad-Magic"));
        assertEquals("_9lives", PrometheusText.sanitize("9lives"));
        assertEquals("_", PrometheusText.sanitize(""));
        final Histogram empty = SlotLatency.newHistogram();
        final String text = PrometheusText.render(countersFile.countersReader(), new TreeMap<>(Map.of(2, empty)));
        parse(text);
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
                    ("summary".equals(type) && (name.equals(family + "_sum") || name.equals(family + "_count")));
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
