package io.switchml.appliance;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The fallback counter's reason label stays few-valued whatever clients send: numbers and quoted names (k, s, a
 * tenant, all the client's choice) are folded, and past {@link Appliance#MAX_FALLBACK_REASONS} classes per backend
 * the rest count as "other", so that CREATEs cannot fill the counters file (which would then refuse jobs).
 */
final class FallbackReasonsTest
{
    @TempDir
    Path dir;

    @Test
    void reasonsAreFoldedIntoClassesAndCappedPerBackend() throws Exception
    {
        assertEquals("k=N exceeds N", Appliance.fallbackClass("k=8192 exceeds 358"));
        assertEquals("tenant '*' would hold N offload slot versions, over its quota of N (switchml.appliance.tenant.offload.slots)",
            Appliance.fallbackClass("tenant 'team-7' would hold 20 offload slot versions, over its quota of 16 " +
                "(switchml.appliance.tenant.offload.slots)"));
        try (Appliance appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())))
        {
            for (int k = 300; k < 400; k++)
            {
                appliance.onFallback("xdp", "k=" + k + " exceeds 256");
                appliance.onFallback("xdp", "tenant 't" + k + "' would hold " + k + " offload slot versions, over its quota of 16");
            }
            // 2 classes so far, so 29 more get their own label, "other" is the 32nd, and it counts the last 11
            for (int i = 0; i < 40; i++)
            {
                appliance.onFallback("xdp", "reason kind " + (char)('a' + i % 26) + (char)('a' + i / 26));
            }
            final String metrics;
            try (HttpClient client = HttpClient.newHttpClient())
            {
                metrics = client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + appliance.httpPort() + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            }
            final List<String> lines = metrics.lines().filter(line -> line.startsWith("switchml_backend_fallbacks_total{backend=\"xdp\"")).toList();
            assertEquals(Appliance.MAX_FALLBACK_REASONS, lines.size(), String.join("\n", lines));
            assertTrue(lines.contains("switchml_backend_fallbacks_total{backend=\"xdp\",reason=\"k=N exceeds N\"} 100.0"), metrics);
            assertTrue(lines.stream().anyMatch(line -> line.startsWith("switchml_backend_fallbacks_total{backend=\"xdp\"," +
                "reason=\"tenant '*' would hold N offload slot versions, over its quota of N\"} 100.0")), String.join("\n", lines));
            assertTrue(lines.contains("switchml_backend_fallbacks_total{backend=\"xdp\",reason=\"other\"} 11.0"), String.join("\n", lines));
        }
    }
}
