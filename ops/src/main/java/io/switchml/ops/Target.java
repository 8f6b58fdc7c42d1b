package io.switchml.ops;

import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.protocol.telemetry.CountersFile;
import io.switchml.protocol.telemetry.CountersFileDescriptor;
import io.switchml.protocol.telemetry.CountersFileReader;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where a command finds the appliance: locally, the counters file and journal in a directory plus the
 * control endpoint; remotely, the HTTP endpoint ({@code /metrics}, {@code /health}). Turns "not there"
 * into {@link OpsException}s with exit code {@link OpsException#UNREACHABLE} and a message saying what
 * was looked for where.
 */
final class Target
{
    /** Name of the journal directory inside the appliance directory. */
    static final String JOURNAL_DIRECTORY = io.switchml.protocol.ApplianceDefaults.JOURNAL_DIRECTORY;

    private static final Pattern CONTROL_PORT = Pattern.compile("control tcp (\\d+)");
    private static final Pattern CONTROL_ADDRESS = Pattern.compile("control tcp \\d+ on ([0-9A-Fa-f:.]+)");
    private static final Pattern VERSION = Pattern.compile(", version ([^,;\\s]+)");
    private static final Pattern PID = Pattern.compile("pid (\\d+)");

    private final Path dir;
    private final URI url;
    private final String host;
    private final Integer controlPortOption;
    private final int timeoutMs;
    private int discoveredControlPort = -1;
    /** The address the running appliance announced its control endpoint on, or null. */
    private String discoveredControlAddress;
    /** The version the running appliance announced, or null. */
    private String announcedVersion;
    private String controlPortOrigin;

    Target(final Path dir, final URI url, final String host, final Integer controlPortOption, final int timeoutMs)
    {
        this.dir = dir;
        this.url = url;
        this.host = host;
        this.controlPortOption = controlPortOption;
        this.timeoutMs = timeoutMs;
    }

    boolean isRemote()
    {
        return url != null;
    }

    Path dir()
    {
        return dir;
    }

    URI url()
    {
        return url;
    }

    private java.util.function.Supplier<String> credential = () -> null;

    /**
     * @param credential supplies the operator secret for control requests, read when a request needs it.
     */
    Target credential(final java.util.function.Supplier<String> credential)
    {
        this.credential = credential;
        return this;
    }

    private java.util.function.Supplier<java.nio.file.Path> tlsCa = () -> null;
    private java.util.function.Supplier<String> metricsToken = () -> null;

    /**
     * @param metricsToken supplies the bearer token sent with HTTP requests (an appliance's /metrics may require one),
     *                     read when a request is made; null from it: none.
     */
    Target metricsToken(final java.util.function.Supplier<String> metricsToken)
    {
        this.metricsToken = metricsToken;
        return this;
    }

    /**
     * @param tlsCa supplies the PEM file to verify the control endpoint with (TLS), or null for plain TCP.
     */
    Target tlsCa(final java.util.function.Supplier<java.nio.file.Path> tlsCa)
    {
        this.tlsCa = tlsCa;
        return this;
    }

    private java.nio.file.Path tlsKeystore;
    private java.nio.file.Path tlsPasswordFile;

    /**
     * @param keystore     PKCS12 keystore of the client certificate (mutual TLS), or null.
     * @param passwordFile its password file.
     */
    Target tlsClient(final java.nio.file.Path keystore, final java.nio.file.Path passwordFile)
    {
        this.tlsKeystore = keystore;
        this.tlsPasswordFile = passwordFile;
        return this;
    }

    int timeoutMs()
    {
        return timeoutMs;
    }

    Path journalDir()
    {
        return dir.resolve(JOURNAL_DIRECTORY);
    }

    /**
     * Fail with a usage error when in remote mode: the command reads files on the appliance host.
     */
    void requireLocal(final String what)
    {
        if (isRemote())
        {
            throw new OpsException(OpsException.USAGE, what + " reads the appliance's journal and counters file, " +
                "so it runs on the appliance host (with --dir); it cannot work through --url " + url);
        }
    }

    /**
     * @return whether the directory exists and this user may not list or enter it.
     */
    private static boolean denied(final Path directory)
    {
        return Files.isDirectory(directory) && !(Files.isReadable(directory) && Files.isExecutable(directory));
    }

    /**
     * Map the counters file read-only.
     *
     * @throws OpsException {@link OpsException#UNREACHABLE} when there is none or it is not readable.
     */
    CountersFileReader openCounters()
    {
        final Path file = dir.resolve(CountersFileDescriptor.FILENAME);
        final Path packaged = Path.of(OpsCommand.PACKAGED_DIR);
        if (!Files.exists(file) && (denied(dir) || (!dir.equals(packaged) && denied(packaged))))
        {
            // the package's state directory is mode 750, owner switchml: another user cannot even see the counters
            throw new OpsException(OpsException.UNREACHABLE, "this user cannot read " + (denied(dir) ? dir : packaged) +
                " (the package's " + OpsCommand.PACKAGED_DIR + " is mode 750, owner switchml): run switchml ops as root " +
                "or as a member of group switchml, or use --url for /metrics");
        }
        if (!Files.exists(file))
        {
            throw new OpsException(OpsException.UNREACHABLE, "no appliance in " + dir + ": no " +
                CountersFileDescriptor.FILENAME + " there (is the appliance running? set --dir or SWITCHML_DIR " +
                "to its switchml.appliance.dir, or use --url for a remote one)");
        }
        try
        {
            return CountersFile.open(file, 500);
        }
        catch (final IllegalStateException ex)
        {
            throw new OpsException(OpsException.UNREACHABLE, ex.getMessage(), ex);
        }
    }

    /**
     * Open the journal read-only at its oldest event.
     *
     * @throws OpsException {@link OpsException#UNREACHABLE} when the directory holds no journal.
     */
    JournalReader openJournal()
    {
        try
        {
            return JournalReader.open(journalDir());
        }
        catch (final IllegalArgumentException ex)
        {
            throw new OpsException(OpsException.UNREACHABLE, ex.getMessage() +
                ": has an appliance run with --dir " + dir + "? (set --dir or SWITCHML_DIR)", ex);
        }
    }

    /**
     * @return the host of the control endpoint: --host, or the host of --url in remote mode.
     */
    String controlHost()
    {
        if (isRemote())
        {
            return "127.0.0.1".equals(host) && url.getHost() != null ? url.getHost() : host;
        }
        discover();
        // an appliance bound to one rack-facing address (appliance.properties' bind) does not listen on loopback
        return "127.0.0.1".equals(host) && discoveredControlAddress != null ? discoveredControlAddress : host;
    }

    /**
     * @return locally, the version the running appliance announced in its journal; null when it did not (or remotely).
     */
    String announcedVersion()
    {
        discover();
        return announcedVersion;
    }

    /**
     * @return --control-port when given; else, locally, the port the running appliance announced in its
     * journal (APPLIANCE_STARTED of the process that wrote the counters file); else the default 7470.
     */
    int controlPort()
    {
        if (controlPortOption != null)
        {
            controlPortOrigin = "--control-port";
            return controlPortOption;
        }
        discover();
        return discoveredControlPort;
    }

    /**
     * Read, once, where the running appliance announced its control endpoint (port and address).
     */
    private void discover()
    {
        if (discoveredControlPort < 0)
        {
            discoveredControlPort = isRemote() ? -1 : discoverControlPort();
            if (controlPortOption == null)
            {
                controlPortOrigin = discoveredControlPort > 0 ? "announced in " + journalDir() : "default";
            }
            if (discoveredControlPort <= 0)
            {
                discoveredControlPort = OpsCommand.CONTROL_PORT_DEFAULT;
            }
        }
    }

    private int discoverControlPort()
    {
        final Path counters = dir.resolve(CountersFileDescriptor.FILENAME);
        if (!Files.isRegularFile(journalDir().resolve("metadata.cq4t")) || !Files.exists(counters))
        {
            return -1;
        }
        final long pid;
        try (CountersFileReader reader = CountersFile.open(counters, 200))
        {
            pid = reader.pid();
        }
        catch (final IllegalStateException ex)
        {
            return -1;
        }
        int port = -1;
        try (JournalReader reader = JournalReader.open(journalDir()))
        {
            reader.types(JournalEvent.APPLIANCE_STARTED);
            JournalRecord record;
            while ((record = reader.poll()) != null)
            {
                final String message = record.message() == null ? "" : record.message();
                final Matcher portMatcher = CONTROL_PORT.matcher(message);
                final Matcher pidMatcher = PID.matcher(message);
                if (portMatcher.find() && pidMatcher.find() && Long.parseLong(pidMatcher.group(1)) == pid)
                {
                    port = Integer.parseInt(portMatcher.group(1));
                    final Matcher addressMatcher = CONTROL_ADDRESS.matcher(message);
                    discoveredControlAddress = addressMatcher.find() ? listening(addressMatcher.group(1)) : null;
                    final Matcher versionMatcher = VERSION.matcher(message);
                    announcedVersion = versionMatcher.find() ? versionMatcher.group(1) : null;
                }
            }
        }
        catch (final RuntimeException ex)
        {
            return -1;
        }
        return port;
    }

    /**
     * @return the address to reach an endpoint bound to this one from this host: null (loopback will do) for a
     * wildcard or loopback address, else the address itself.
     */
    private static String listening(final String address)
    {
        try
        {
            final java.net.InetAddress bound = java.net.InetAddress.ofLiteral(address);
            return bound.isAnyLocalAddress() || bound.isLoopbackAddress() ? null : bound.getHostAddress();
        }
        catch (final IllegalArgumentException ex)
        {
            return null;
        }
    }

    /**
     * Open a control connection.
     *
     * @throws OpsException {@link OpsException#UNREACHABLE} naming the address when nothing answers.
     */
    ControlClient control()
    {
        final int port = controlPort();
        try
        {
            return new ControlClient(controlHost(), port, timeoutMs, credential, tlsCa, tlsKeystore, tlsPasswordFile);
        }
        catch (final IOException ex)
        {
            final String stopped = isRemote() ? null : stoppedWriter();
            if (stopped != null)
            {
                throw new OpsException(OpsException.UNREACHABLE, stopped, ex);
            }
            throw new OpsException(OpsException.UNREACHABLE, "the appliance's control endpoint " + controlHost() + ":" +
                port + " (" + controlPortOrigin + ") does not answer: " + ex.getMessage() +
                (isRemote() ? "" : " (is the appliance running? pass --control-port if it listens elsewhere)"), ex);
        }
    }

    /**
     * @return "the appliance is not running: ..." when the counters file in --dir was written by a process
     * that is gone, else null.
     */
    private String stoppedWriter()
    {
        final Path file = dir.resolve(CountersFileDescriptor.FILENAME);
        if (!Files.exists(file))
        {
            return null;
        }
        try (CountersFileReader reader = CountersFile.open(file, 200))
        {
            return reader.isWriterAlive() ? null : "the appliance is not running: pid " + reader.pid() + " that wrote " +
                file + " is gone";
        }
        catch (final IllegalStateException ex)
        {
            return null;
        }
    }

    /**
     * GET a path of the HTTP endpoint.
     *
     * @return the status code and body.
     * @throws OpsException {@link OpsException#UNREACHABLE} when nothing answers at --url.
     */
    HttpResponse<String> httpGet(final String path)
    {
        final URI uri = url.resolve(path);
        try (HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(timeoutMs)).build())
        {
            final HttpRequest.Builder request = HttpRequest.newBuilder(uri).timeout(Duration.ofMillis(timeoutMs)).GET();
            final String token = metricsToken.get();
            if (token != null)
            {
                request.header("Authorization", "Bearer " + token);
            }
            return client.send(request.build(), HttpResponse.BodyHandlers.ofString());
        }
        catch (final ConnectException | HttpConnectTimeoutException ex)
        {
            throw new OpsException(OpsException.UNREACHABLE, "no appliance answers at " + uri + ": " +
                (ex instanceof HttpConnectTimeoutException ? "connect timed out after " + timeoutMs + " ms" :
                    ex.getMessage() == null ? "connection refused" : ex.getMessage()), ex);
        }
        catch (final IOException ex)
        {
            throw new OpsException(OpsException.UNREACHABLE, "cannot read " + uri + ": " + ex, ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new OpsException(OpsException.FAILED, "interrupted while reading " + uri, ex);
        }
    }

    /**
     * GET a path that must answer 200.
     *
     * @throws OpsException {@link OpsException#FAILED} with the status and body otherwise.
     */
    String httpGetOk(final String path)
    {
        final HttpResponse<String> response = httpGet(path);
        if (response.statusCode() != 200)
        {
            throw new OpsException(OpsException.FAILED, "GET " + response.uri() + " answered " + response.statusCode() +
                ": " + response.body().strip() + (response.statusCode() == 401 ? " (give --metrics-token-file)" : ""));
        }
        return response.body();
    }
}
