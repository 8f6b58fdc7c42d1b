package io.switchml.ops;

import io.switchml.protocol.ApplianceDefaults;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * {@code switchml ops}: the operator CLI. On the appliance host it reads the counters file and the journal
 * in the appliance's directory and asks the control endpoint; from elsewhere ({@code --url}) it reads the
 * HTTP endpoint's {@code /metrics} and {@code /health}. Every subcommand takes {@code --json}, and exits
 * with the codes listed in {@code --help}.
 */
@Command(name = "ops", mixinStandardHelpOptions = true, versionProvider = Version.class, sortOptions = false,
    description = {
        "Operator commands for a SwitchML appliance.",
        "",
        "Local mode (the default, on the appliance host) reads the counters file and the journal in --dir and asks " +
            "the control endpoint. Remote mode (--url http://host:7472) reads /metrics and /health; the commands that " +
            "need the journal (histograms over a window, events, job history) say so.",
        ""},
    subcommands = {
        StatusCommand.class, CountersCommand.class, HistogramsCommand.class, JobsCommand.class, EventsCommand.class,
        CommandLine.HelpCommand.class},
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {OpsCommand.EXIT_OK, OpsCommand.EXIT_FAILED, OpsCommand.EXIT_USAGE, OpsCommand.EXIT_TIMED_OUT,
        OpsCommand.EXIT_UNREACHABLE})
public final class OpsCommand implements Runnable
{
    static final String EXIT_OK = "0:success.";
    static final String EXIT_FAILED = "1:the appliance answered with an error, the job was not found, or there was nothing to show.";
    static final String EXIT_USAGE = "2:bad arguments (unknown option, bad value, a local-only command given --url).";
    static final String EXIT_TIMED_OUT = "3:events --follow --follow-ms ended before --max-events events came.";
    static final String EXIT_UNREACHABLE = "4:the appliance is not running or not reachable (no counters file, control or HTTP endpoint refused).";

    /** Environment variable naming the appliance directory, when --dir is not given. */
    static final String DIR_ENV = "SWITCHML_DIR";
    /** Control port when neither --control-port nor the journal says otherwise. */
    static final int CONTROL_PORT_DEFAULT = ApplianceDefaults.CONTROL_PORT;

    /** Where the package puts the appliance's control-channel certificate. */
    static final String DEFAULT_TLS_CA = "/etc/switchml/tls/ca.pem";

    @Option(names = "--tls-ca", paramLabel = "FILE", scope = CommandLine.ScopeType.INHERIT,
        defaultValue = "${env:SWITCHML_TLS_CA}",
        description = "PEM file of the appliance's certificate (or its CA): the control connection uses TLS and verifies " +
            "it (default: $SWITCHML_TLS_CA, else " + DEFAULT_TLS_CA + " when it exists; none: plain TCP).")
    String tlsCa;

    @Option(names = "--tls-keystore", paramLabel = "FILE", scope = CommandLine.ScopeType.INHERIT,
        defaultValue = "${env:SWITCHML_TLS_KEYSTORE}",
        description = "PKCS12 keystore of the operator's client certificate, for an appliance that requires one " +
            "(default: $SWITCHML_TLS_KEYSTORE).")
    String tlsKeystore;

    @Option(names = "--tls-password-file", paramLabel = "FILE", scope = CommandLine.ScopeType.INHERIT,
        defaultValue = "${env:SWITCHML_TLS_PASSWORD_FILE}",
        description = "File holding the --tls-keystore password (default: $SWITCHML_TLS_PASSWORD_FILE).")
    String tlsPasswordFile;

    @Option(names = "--metrics-token-file", paramLabel = "FILE", scope = CommandLine.ScopeType.INHERIT,
        defaultValue = "${env:SWITCHML_METRICS_TOKEN_FILE}",
        description = "Remote mode: file (mode 600) holding the token of an appliance whose /metrics requires one " +
            "(switchml.appliance.http.metrics.token.file; default: $SWITCHML_METRICS_TOKEN_FILE).")
    String metricsTokenFile;

    /**
     * @return the token to send with HTTP requests, or null.
     * @throws OpsException {@link OpsException#USAGE} naming the file when others may read it or it cannot be read.
     */
    String metricsToken()
    {
        if (metricsTokenFile == null || metricsTokenFile.isEmpty())
        {
            return null;
        }
        final java.nio.file.Path file = java.nio.file.Path.of(metricsTokenFile);
        try
        {
            return io.switchml.protocol.SecretFiles.readToken(file, "--metrics-token-file",
                io.switchml.protocol.SecretFiles.MAX_TOKEN_CHARS);
        }
        catch (final IllegalArgumentException | java.io.IOException ex)
        {
            throw new OpsException(OpsException.USAGE, ex instanceof java.io.IOException ?
                "cannot read --metrics-token-file " + file + ": " + ex : ex.getMessage(), ex);
        }
    }

    /**
     * @return the certificate file to verify the control endpoint with, or null for plain TCP.
     */
    java.nio.file.Path tlsCa()
    {
        if (tlsCa != null && !tlsCa.isEmpty())
        {
            return java.nio.file.Path.of(tlsCa);
        }
        final java.nio.file.Path packaged = java.nio.file.Path.of(DEFAULT_TLS_CA);
        return java.nio.file.Files.isReadable(packaged) ? packaged : null;
    }

    /** Where the package puts the control plane's credentials. */
    static final String DEFAULT_CREDENTIALS_FILE = "/etc/switchml/credentials";

    /**
     * @return the operator secret to send, or null when none is configured (the appliance then answers what it
     * allows without one).
     */
    String credential()
    {
        String file = credentialFile;
        if (file == null || file.isEmpty())
        {
            final String secret = System.getenv("SWITCHML_CREDENTIAL");
            if (secret != null && !secret.isEmpty())
            {
                return secret;
            }
            file = java.nio.file.Files.isReadable(java.nio.file.Path.of(DEFAULT_CREDENTIALS_FILE)) ? DEFAULT_CREDENTIALS_FILE : null;
        }
        if (file == null)
        {
            return null;
        }
        try
        {
            return io.switchml.protocol.ControlCredentials.secretFor(java.nio.file.Path.of(file),
                io.switchml.protocol.ControlCredentials.OPERATOR, null);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new OpsException(OpsException.USAGE, ex.getMessage(), ex);
        }
    }

    @Option(names = "--dir", paramLabel = "DIR", scope = CommandLine.ScopeType.INHERIT,
        description = "Appliance directory (counters.dat, journal/); default $" + DIR_ENV +
            ", else the package's " + PACKAGED_DIR + " when it holds a counters file, else the appliance's default " +
            "${java.io.tmpdir}/switchml.")
    Path dir;

    @Option(names = "--url", paramLabel = "URL", scope = CommandLine.ScopeType.INHERIT,
        description = "Remote mode: the appliance's HTTP endpoint, e.g. http://host:7472.")
    String url;

    @Option(names = "--host", paramLabel = "HOST", defaultValue = "127.0.0.1", scope = CommandLine.ScopeType.INHERIT,
        description = "Host of the control endpoint (default ${DEFAULT-VALUE}; the --url host in remote mode).")
    String host;

    @Option(names = "--control-port", paramLabel = "PORT", scope = CommandLine.ScopeType.INHERIT,
        description = "Control port (default: the one the running appliance announced in its journal, else " +
            ApplianceDefaults.CONTROL_PORT + ").")
    Integer controlPort;

    @Option(names = "--credential-file", paramLabel = "FILE", scope = CommandLine.ScopeType.INHERIT,
        defaultValue = "${env:SWITCHML_CREDENTIAL_FILE}",
        description = "Control-plane credentials file; its first operator line authorizes jobs, counters and abort when " +
            "the appliance has authorization on (default: $SWITCHML_CREDENTIAL_FILE, else " + DEFAULT_CREDENTIALS_FILE +
            " when readable; $SWITCHML_CREDENTIAL may hold the secret itself).")
    String credentialFile;

    @Option(names = "--timeout-ms", paramLabel = "MS", defaultValue = "3000", scope = CommandLine.ScopeType.INHERIT,
        description = "Connect and read timeout of the control and HTTP endpoints (default ${DEFAULT-VALUE}).")
    int timeoutMs;

    @Option(names = "--json", scope = CommandLine.ScopeType.INHERIT,
        description = "Print JSON (one document; one line per event or refresh for --follow and --watch).")
    boolean json;

    @Option(names = "--ascii", scope = CommandLine.ScopeType.INHERIT,
        description = "Draw charts with ASCII only (the default when stdout is not UTF-8).")
    boolean ascii;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    Boolean terminalOverride;

    /**
     * Without a subcommand: a usage error (exit code 2) that lists the subcommands.
     */
    public void run()
    {
        throw new CommandLine.ParameterException(spec.commandLine(),
            "missing subcommand: status, counters, histograms, jobs or events");
    }

    /**
     * @return where the appliance is, from the global options.
     * @throws CommandLine.ParameterException when --url is not an http(s) URL or a number is out of range.
     */
    Target target()
    {
        if (timeoutMs <= 0)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--timeout-ms must be positive: " + timeoutMs);
        }
        if (controlPort != null && (controlPort < 1 || controlPort > 65_535))
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--control-port must be within 1..65535: " + controlPort);
        }
        URI uri = null;
        if (url != null)
        {
            try
            {
                uri = new URI(url.endsWith("/") ? url : url + "/");
            }
            catch (final URISyntaxException ex)
            {
                throw new CommandLine.ParameterException(spec.commandLine(), "--url is not a URL: " + ex.getMessage());
            }
            if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme()) || uri.getHost() == null)
            {
                throw new CommandLine.ParameterException(spec.commandLine(),
                    "--url must be http://HOST:PORT (the appliance's HTTP endpoint): '" + url + "'");
            }
        }
        return new Target(resolvedDir(), uri, host, controlPort, timeoutMs).credential(this::credential).tlsCa(this::tlsCa)
            .metricsToken(this::metricsToken)
            .tlsClient(tlsKeystore == null || tlsKeystore.isEmpty() ? null : java.nio.file.Path.of(tlsKeystore),
                tlsPasswordFile == null || tlsPasswordFile.isEmpty() ? null : java.nio.file.Path.of(tlsPasswordFile));
    }

    Path resolvedDir()
    {
        if (dir != null)
        {
            return dir;
        }
        final String fromEnv = System.getenv(DIR_ENV);
        if (fromEnv != null && !fromEnv.isBlank())
        {
            return Path.of(fromEnv);
        }
        // the packaged appliance's state directory when it holds a counters file, else the appliance's own default
        final Path packaged = Path.of(PACKAGED_DIR);
        return java.nio.file.Files.isReadable(packaged.resolve(io.switchml.protocol.telemetry.CountersFileDescriptor.FILENAME)) ?
            packaged : Path.of(ApplianceDefaults.DIR);
    }

    /** Where the package's appliance keeps its counters file and journal. */
    static final String PACKAGED_DIR = "/var/lib/switchml";

    /**
     * @return whether stdout is a terminal (and TERM is not "dumb"): only then are cursor escapes written.
     */
    boolean isTerminal()
    {
        if (terminalOverride != null)
        {
            return terminalOverride;
        }
        final java.io.Console console = System.console();
        return console != null && console.isTerminal() && !"dumb".equals(System.getenv("TERM"));
    }

    /**
     * @return whether charts may use block characters: stdout encodes UTF-8 and --ascii is not set.
     */
    boolean unicode()
    {
        if (ascii)
        {
            return false;
        }
        final String encoding = System.getProperty("stdout.encoding", System.getProperty("native.encoding", "UTF-8"));
        try
        {
            return StandardCharsets.UTF_8.equals(Charset.forName(encoding));
        }
        catch (final RuntimeException ex)
        {
            return false;
        }
    }

    /**
     * Run the ops CLI on its own.
     */
    public static void main(final String[] args)
    {
        System.exit(io.switchml.protocol.UsageErrorHandler.install(new CommandLine(new OpsCommand())).execute(args));
    }
}
