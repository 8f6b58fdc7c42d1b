package io.switchml.appliance;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Properties;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code switchml.appliance.http.metrics.token.file}: a whole appliance whose {@code /metrics} answers only a scrape that
 * carries the token, {@code /health} open to probes, and a token file that others may read, or that holds no token,
 * stopping the start naming the option.
 */
@Timeout(30)
final class MetricsTokenTest
{
    @TempDir
    Path dir;

    private Appliance appliance;

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    @Test
    void metricsAnswerOnlyTheTokenAndHealthStaysOpen() throws Exception
    {
        final Path token = secret("token", "s3cret-Token_0123\n");
        final Properties properties = new Properties();
        properties.setProperty(ApplianceContext.HTTP_METRICS_TOKEN_FILE_PROP, token.toString());
        appliance = Appliance.launch(new ApplianceContext().apply(properties).dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()));

        try (HttpClient client = HttpClient.newHttpClient())
        {
            final HttpResponse<String> none = get(client, "/metrics", null);
            assertEquals(401, none.statusCode());
            assertEquals("Bearer realm=\"switchml metrics\"", none.headers().firstValue("WWW-Authenticate").orElse(""));
            assertTrue(!none.body().contains("switchml_"), none.body());
            assertEquals(401, get(client, "/metrics", "Bearer s3cret-Token_012").statusCode(), "a prefix of the token");
            assertEquals(401, get(client, "/metrics", "Bearer s3cret-Token_01234").statusCode(), "the token and more");
            assertEquals(401, get(client, "/metrics", "Basic czNjcmV0LVRva2VuXzAxMjM=").statusCode());

            final HttpResponse<String> scrape = get(client, "/metrics", "Bearer s3cret-Token_0123");
            assertEquals(200, scrape.statusCode());
            assertTrue(scrape.body().contains("switchml_jobs_active"), scrape.body());
            assertEquals(200, get(client, "/health", null).statusCode(), "probes need no token");
        }
    }

    @Test
    void aTokenFileOthersMayReadOrWithoutATokenStopsTheStartNamingTheOption() throws Exception
    {
        final Path open = secret("open", "token\n");
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rw-r--r--"));
        final IllegalArgumentException readable = assertThrows(IllegalArgumentException.class,
            () -> new ApplianceContext().httpMetricsTokenFile(open.toString()).conclude());
        assertEquals(ApplianceContext.HTTP_METRICS_TOKEN_FILE_PROP + ": metrics token file " + open +
            " is readable or writable by other users [GROUP_READ, OTHERS_READ]: chmod 600 it", readable.getMessage());

        for (final String text : new String[] {"\n", "two words\n", "x".repeat(1025)})
        {
            final Path bad = secret("bad", text);
            final IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> new ApplianceContext().httpMetricsTokenFile(bad.toString()).conclude());
            assertTrue(refused.getMessage().startsWith(ApplianceContext.HTTP_METRICS_TOKEN_FILE_PROP + ": metrics token file " +
                bad + " must hold one token of 1..1024 printable ASCII characters without spaces"), refused.getMessage());
        }
        final IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
            () -> new ApplianceContext().httpMetricsTokenFile(dir.resolve("missing").toString()).conclude());
        assertTrue(missing.getMessage().startsWith(ApplianceContext.HTTP_METRICS_TOKEN_FILE_PROP + ": cannot read " +
            dir.resolve("missing")), missing.getMessage());
    }

    private Path secret(final String name, final String text) throws Exception
    {
        final Path file = dir.resolve(name);
        Files.deleteIfExists(file);
        Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(file, text);
        return file;
    }

    private HttpResponse<String> get(final HttpClient client, final String path, final String authorization) throws Exception
    {
        final HttpRequest.Builder request = HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + appliance.httpPort() + path)).GET();
        if (authorization != null)
        {
            request.header("Authorization", authorization);
        }
        return client.send(request.build(), HttpResponse.BodyHandlers.ofString());
    }
}
