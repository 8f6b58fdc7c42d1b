package io.switchml.appliance.telemetry;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * HTTP endpoint for monitoring, on the JDK's {@link HttpServer}, each exchange on a virtual thread of its own, so that
 * a client that sends half a request and stops holds up nobody else's scrape or health check; the server closes such
 * a connection after {@link #MAX_EXCHANGE_SECONDS} and holds at most {@link #MAX_CONNECTIONS} at once (the JDK
 * server's {@code sun.net.httpserver.*} properties, set here unless given on the command line):
 * <ul>
 *   <li>{@code GET /metrics}: the {@link ApplianceMetrics} registry, written by the Prometheus client's own
 *   exposition writers: OpenMetrics 1.0 when the {@code Accept} header asks for it (as Prometheus does), else the
 *   text format 0.0.4. With a token, only to a request that carries it ({@code Authorization: Bearer TOKEN}, what
 *   Prometheus sends with {@code authorization: credentials_file:}); else 401. Its labels name tenants and jobs.</li>
 *   <li>{@code GET /health}: 200 with the supplied JSON body when the readiness check passes, else 503
 *   with the same body; open to all, for probes.</li>
 *   <li>Any other path: 404. Any other method on a known path: 405.</li>
 * </ul>
 * Scrapes read the counters file through a reader, so they never touch the shards' state.
 * <p>
 * The client's own server ({@code prometheus-metrics-exporter-httpserver}) is the same JDK server with the same
 * writers behind it; it is not used because {@code /health} with its 503, and 404/405 for anything else, would have
 * to be added to it anyway, and it would bring a second configuration surface (its properties) for no gain.
 */
public final class HttpEndpoint implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(HttpEndpoint.class);

    /** Path of the Prometheus metrics. */
    public static final String METRICS_PATH = "/metrics";
    /** Path of the health check. */
    public static final String HEALTH_PATH = "/health";

    /** Longest a request may take to arrive, and a response to leave, before the connection is closed. */
    static final int MAX_EXCHANGE_SECONDS = 10;
    /** Most connections the endpoint holds at once. */
    static final int MAX_CONNECTIONS = 64;

    static
    {
        // read once by the JDK server's configuration class, when the first server is created
        setIfUnset("sun.net.httpserver.maxReqTime", Integer.toString(MAX_EXCHANGE_SECONDS));
        setIfUnset("sun.net.httpserver.maxRspTime", Integer.toString(MAX_EXCHANGE_SECONDS));
        setIfUnset("sun.net.httpserver.maxConnections", Integer.toString(MAX_CONNECTIONS));
    }

    private static void setIfUnset(final String property, final String value)
    {
        if (System.getProperty(property) == null)
        {
            System.setProperty(property, value);
        }
    }

    private static final String JSON_CONTENT_TYPE = "application/json; charset=utf-8";
    private static final String TEXT_CONTENT_TYPE = "text/plain; charset=utf-8";

    private static final String BEARER = "Bearer ";

    private final ApplianceMetrics metrics;
    private final byte[] metricsToken;
    private final BooleanSupplier ready;
    private final Supplier<String> healthJson;
    private final HttpServer server;
    private final ExecutorService executor;

    /**
     * Bind and start serving.
     *
     * @param bindAddress   address to listen on.
     * @param port          port to listen on; 0 for any free port (see {@link #port()}).
     * @param metrics       what {@code /metrics} exports.
     * @param ready         readiness check for {@code /health}.
     * @param healthJson    body of {@code /health}, a small JSON object.
     * @throws UncheckedIOException if the address cannot be bound.
     */
    public HttpEndpoint(
        final InetAddress bindAddress,
        final int port,
        final ApplianceMetrics metrics,
        final BooleanSupplier ready,
        final Supplier<String> healthJson)
    {
        this(bindAddress, port, metrics, null, ready, healthJson);
    }

    /**
     * Bind and start serving, {@code /metrics} only to requests that carry the token.
     *
     * @param metricsToken  the bearer token {@code /metrics} requires (ASCII); null: none.
     */
    public HttpEndpoint(
        final InetAddress bindAddress,
        final int port,
        final ApplianceMetrics metrics,
        final String metricsToken,
        final BooleanSupplier ready,
        final Supplier<String> healthJson)
    {
        this.metrics = metrics;
        this.metricsToken = metricsToken == null ? null : (BEARER + metricsToken).getBytes(StandardCharsets.US_ASCII);
        this.ready = ready;
        this.healthJson = healthJson;
        try
        {
            this.server = HttpServer.create(new InetSocketAddress(bindAddress, port), 16);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(
                "cannot bind the HTTP endpoint to " + bindAddress.getHostAddress() + ":" + port + ": " + ex, ex);
        }
        this.executor = Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("switchml-http-", 0).factory());
        server.setExecutor(executor);
        server.createContext("/", this::handle);
        server.start();
    }

    /**
     * @return the port the endpoint is bound to.
     */
    public int port()
    {
        return server.getAddress().getPort();
    }

    /**
     * @return the address and port the endpoint is bound to.
     */
    public InetSocketAddress localAddress()
    {
        return server.getAddress();
    }

    /**
     * Stop listening and release the threads. Idempotent.
     */
    public void close()
    {
        server.stop(0);
        executor.shutdownNow();
    }

    private void handle(final HttpExchange exchange) throws IOException
    {
        try (exchange)
        {
            final String path = exchange.getRequestURI().getPath();
            final boolean isGet = "GET".equals(exchange.getRequestMethod());
            if (!METRICS_PATH.equals(path) && !HEALTH_PATH.equals(path))
            {
                send(exchange, 404, TEXT_CONTENT_TYPE, "not found: " + path + "\n");
            }
            else if (!isGet)
            {
                exchange.getResponseHeaders().set("Allow", "GET");
                send(exchange, 405, TEXT_CONTENT_TYPE, "method not allowed: " + exchange.getRequestMethod() + "\n");
            }
            else if (METRICS_PATH.equals(path) && !authorized(exchange.getRequestHeaders().getFirst("Authorization")))
            {
                exchange.getResponseHeaders().set("WWW-Authenticate", "Bearer realm=\"switchml metrics\"");
                send(exchange, 401, TEXT_CONTENT_TYPE, "/metrics needs the appliance's metrics token " +
                    "(Authorization: Bearer TOKEN)\n");
            }
            else
            {
                final int status;
                final String contentType;
                final byte[] body;
                try
                {
                    if (METRICS_PATH.equals(path))
                    {
                        final ByteArrayOutputStream out = new ByteArrayOutputStream(16 * 1024);
                        contentType = metrics.write(exchange.getRequestHeaders().getFirst("Accept"), out);
                        body = out.toByteArray();
                        status = 200;
                    }
                    else
                    {
                        status = ready.getAsBoolean() ? 200 : 503;
                        body = healthJson.get().getBytes(StandardCharsets.UTF_8);
                        contentType = JSON_CONTENT_TYPE;
                    }
                }
                catch (final RuntimeException ex)
                {
                    LOG.error("bug: {} failed", path, ex);
                    send(exchange, 500, TEXT_CONTENT_TYPE, "internal error: " + ex + "\n");
                    return;
                }
                send(exchange, status, contentType, body);
            }
        }
    }

    private boolean authorized(final String authorization)
    {
        // compared in constant time, whatever the header's length
        return metricsToken == null || MessageDigest.isEqual(metricsToken,
            authorization == null ? new byte[0] : authorization.getBytes(StandardCharsets.US_ASCII));
    }

    private static void send(final HttpExchange exchange, final int status, final String contentType, final String body)
        throws IOException
    {
        send(exchange, status, contentType, body.getBytes(StandardCharsets.UTF_8));
    }

    private static void send(final HttpExchange exchange, final int status, final String contentType, final byte[] bytes)
        throws IOException
    {
        exchange.getResponseHeaders().set("Content-Type", contentType);
        exchange.sendResponseHeaders(status, 0 == bytes.length ? -1 : bytes.length);
        if (bytes.length > 0)
        {
            try (OutputStream out = exchange.getResponseBody())
            {
                out.write(bytes);
            }
        }
    }
}
