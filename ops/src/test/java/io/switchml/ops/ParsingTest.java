package io.switchml.ops;

import io.switchml.protocol.Json;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The CLI's small parsers and formatters: JSON, Prometheus text, times, numbers.
 */
class ParsingTest
{
    @Test
    void jsonRoundTripsWhatTheCommandsWrite()
    {
        final Map<String, Object> value = new LinkedHashMap<>();
        value.put("text", "a \"quoted\"\nline\\ with \u0001");
        value.put("count", 42L);
        value.put("rate", 1.5);
        value.put("nan", Double.NaN);
        value.put("none", null);
        value.put("flag", true);
        value.put("list", List.of(1L, "two", Map.of()));
        final Object compact = Json.parse(Json.write(value));
        final Object pretty = Json.parse(Json.pretty(value));
        value.put("nan", null);
        assertEquals(value, compact);
        assertEquals(value, pretty);
        assertTrue(Json.write(value).indexOf('\n') < 0);
        assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\": 1,}"));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("{} x"));
    }

    @Test
    void prometheusTextBecomesCounterRows()
    {
        final String text = """
            # HELP switchml_received_packets_total Datagrams received
            # TYPE switchml_received_packets_total counter
            switchml_received_packets_total 42.0
            # TYPE switchml_jobs_active gauge
            switchml_jobs_active 1.0
            # TYPE switchml_shard_dropped_packets_total counter
            switchml_shard_dropped_packets_total{reason="bad_mac",shard="1"} 3.0
            # TYPE switchml_job_slots_completed_total counter
            switchml_job_slots_completed_total{job_name="res\\"net",sml_job="7",tenant="acme"} 9.0
            # TYPE switchml_shard_duty_cycle_max_seconds gauge
            switchml_shard_duty_cycle_max_seconds{shard="0"} 1.234E-6
            # TYPE switchml_backend_fallbacks_total counter
            switchml_backend_fallbacks_total{backend="xdp",reason="k=8192 exceeds 256"} 2.0
            # TYPE switchml_slot_latency_seconds histogram
            switchml_slot_latency_seconds_bucket{shard="0",le="1.0E-5"} 4
            switchml_slot_latency_seconds_bucket{shard="0",le="+Inf"} 10
            switchml_slot_latency_seconds_count{shard="0"} 10
            # TYPE switchml_shard_cpu_seconds_total counter
            switchml_shard_cpu_seconds_total{shard="0"} 1.5
            # TYPE switchml_build_info gauge
            switchml_build_info{commit="abc",version="1"} 1
            # TYPE process_cpu_seconds_total counter
            process_cpu_seconds_total 3.0
            """;
        final List<PrometheusParser.Sample> samples = PrometheusParser.parse(text);
        assertEquals(12, samples.size());
        assertEquals("histogram", samples.get(6).type());
        assertEquals(1.234e-6, samples.get(4).value());
        final List<CounterRow> rows = CounterRow.fromSamples(samples);
        assertEquals(6, rows.size(), rows::toString);
        assertEquals(new CounterRow(-1, "system", 1, "packets_in", "", "", false, 42, "switchml_received_packets_total"),
            rows.get(0));
        assertTrue(rows.get(1).gauge());
        assertEquals("jobs_active", rows.get(1).name());
        assertEquals("shard 1", rows.get(2).owner());
        assertEquals("drop_bad_mac", rows.get(2).name());
        assertEquals(3, rows.get(2).value());
        assertEquals("job 7 acme/res\"net", rows.get(3).owner());
        assertEquals("slots_completed", rows.get(3).name());
        assertEquals("duty_cycle_max_ns", rows.get(4).name());
        assertEquals(1234, rows.get(4).value());
        assertEquals("backend xdp", rows.get(5).type());
        assertEquals("fallbacks", rows.get(5).name());
        assertEquals("k=8192 exceeds 256", rows.get(5).label());
        assertThrows(IllegalArgumentException.class, () -> PrometheusParser.parse("switchml_x{a=b} 1"));
    }

    @Test
    void bucketQuantilesInterpolateLikeHistogramQuantile()
    {
        final TreeMap<Double, Double> buckets = new TreeMap<>(Map.of(
            1e-5, 10.0, 5e-5, 50.0, 1e-4, 100.0, Double.POSITIVE_INFINITY, 100.0));
        assertEquals(5e-6, HistogramsCommand.bucketQuantile(0.05, buckets), 1e-12);
        assertEquals(3e-5, HistogramsCommand.bucketQuantile(0.3, buckets), 1e-12);
        assertEquals(9e-5, HistogramsCommand.bucketQuantile(0.9, buckets), 1e-12);
        buckets.put(Double.POSITIVE_INFINITY, 200.0);
        assertEquals(1e-4, HistogramsCommand.bucketQuantile(0.99, buckets), 1e-12);
        assertTrue(Double.isNaN(HistogramsCommand.bucketQuantile(0.5, new TreeMap<>(Map.of(Double.POSITIVE_INFINITY, 0.0)))));
    }

    @Test
    void timesAreAgesInstantsOrLocalTimes()
    {
        final long nowMs = Instant.parse("2026-11-05T14:00:00Z").toEpochMilli();
        assertEquals(nowMs, TimeSpec.parse("now", nowMs));
        assertEquals(nowMs - 90_000, TimeSpec.parse("90s", nowMs));
        assertEquals(nowMs - 15 * 60_000, TimeSpec.parse("15m", nowMs));
        assertEquals(nowMs - 2 * 3_600_000, TimeSpec.parse("2h", nowMs));
        assertEquals(nowMs - 86_400_000, TimeSpec.parse("1d", nowMs));
        assertEquals(nowMs - 500, TimeSpec.parse("500ms", nowMs));
        assertEquals(nowMs - 1_800_000, TimeSpec.parse("2026-11-05T13:30:00Z", nowMs));
        assertEquals(nowMs - 1_800_000, TimeSpec.parse("2026-11-05T15:30:00+02:00", nowMs));
        assertTrue(TimeSpec.parse("2026-11-05 13:30", nowMs) > 0);
        final CommandLine.TypeConversionException bad = assertThrows(CommandLine.TypeConversionException.class,
            () -> TimeSpec.parse("last tuesday", nowMs));
        assertTrue(bad.getMessage().contains("'last tuesday' is not a time"), bad.getMessage());
    }

    @Test
    void formatsForPeople()
    {
        assertEquals("1,234,567", Format.count(1_234_567));
        assertEquals("512 B", Format.bytes(512));
        assertEquals("1.00 GiB", Format.bytes(1L << 30));
        assertEquals("85.3 us", Format.latency(85_300, false));
        assertEquals("85.3 µs", Format.latency(85_300, true));
        assertEquals("1.20 ms", Format.latency(1_200_000, true));
        assertEquals("1h 2m 3s", Format.duration(3_723_000));
        assertEquals("2.5k", Format.siTrim(2_500));
        assertEquals("20k", Format.siTrim(20_000));
        assertEquals("0", Format.siTrim(0));
        assertEquals("1.6k", Format.siTrim(1_600));
        assertTrue(CountersCommand.compile("drop_*").matcher("drop_bad_mac").find());
        assertTrue(!CountersCommand.compile("drop_*").matcher("shard_drop_x").find());
        assertTrue(CountersCommand.compile("retrans").matcher("retransmissions_served").find());
    }

    @Test
    void chartsFallBackToAscii()
    {
        assertEquals("████▌     ", TerminalChart.bar(45, 100, 10, true));
        assertEquals("####      ", TerminalChart.bar(44, 100, 10, false));
        assertEquals("▏         ", TerminalChart.bar(0.1, 100, 10, true));
        assertEquals("▁▅█ ", TerminalChart.sparkline(List.of(0.0, 50.0, 100.0, Double.NaN), true));
        assertEquals("_=# ", TerminalChart.sparkline(List.of(0.0, 60.0, 100.0, Double.NaN), false));
    }
}
