package io.switchml.appliance;

import io.switchml.appliance.control.StartupRehearsal;
import io.switchml.protocol.logging.LogLevelOption;
import io.switchml.protocol.logging.Logging;
import io.switchml.service.SystemdNotifier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;

/**
 * {@code switchml appliance}: run the aggregation service until SIGTERM.
 */
@Command(name = "appliance", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = "Run the SwitchML aggregation appliance (UDP data plane, TCP control endpoint) until SIGTERM.")
public final class ApplianceCommand implements Callable<Integer>
{
    private static final Logger LOG = LoggerFactory.getLogger(ApplianceCommand.class);

    @Option(names = "--config", paramLabel = "FILE",
        description = "Properties file with switchml.appliance.* options; command-line options override it.")
    private Path config;

    @Option(names = "--bind", description = "Address to bind (default " + ApplianceContext.BIND_ADDRESS_DEFAULT + ").")
    private String bind;

    @Option(names = "--data-port", description = "UDP data port, 0 for any (default " + ApplianceContext.DATA_PORT_DEFAULT + ").")
    private Integer dataPort;

    @Option(names = "--control-port", description = "TCP control port, 0 for any (default " + ApplianceContext.CONTROL_PORT_DEFAULT + ").")
    private Integer controlPort;

    @Option(names = "--transport", description = "auto, native, epoll, io_uring or nio (default auto: native where it works).")
    private String transport;

    @Option(names = "--join-timeout-ms", description = "How long a job waits for all ranks (default " + ApplianceContext.JOIN_TIMEOUT_MS_DEFAULT + ").")
    private Long joinTimeoutMs;

    @Option(names = "--loss-rate", description = "Drop this fraction of data packets in each direction, for tests (default 0).")
    private Double lossRate;

    @Option(names = "--loss-seed", description = "Seed of the loss generator (default 1).")
    private Long lossSeed;

    @Option(names = "--shards", description = "Data-plane shards, one UDP port each from the data port up (default " +
        ApplianceContext.SHARDS_DEFAULT + ").")
    private Integer shards;

    @Option(names = "--shard-cpus", description = "CPU of each shard, comma-separated (default: unpinned).")
    private String shardCpus;

    @Option(names = "--multicast", paramLabel = "GROUP", description = "Multicast completed results: job j's go to " +
        "group GROUP + j (an IPv4 multicast address such as 239.192.0.0; the network must route 224.0.0.0/4 to the " +
        "workers); one datagram per result instead of one per worker (default: unicast).")
    private String multicast;

    @Option(names = "--backends", paramLabel = "LIST", description = "Aggregation backends in order of preference, e.g. " +
        "xdp,software: a job goes to the first that can take it and every one passed over is reported (default " +
        ApplianceContext.BACKENDS_DEFAULT + "). Options of backend NAME are switchml.appliance.NAME.* in --config.")
    private String backends;

    @Option(names = "--mac", description = "Default for jobs: on or off (default on).")
    private String mac;

    @Option(names = "--rehearsal", description = "Run two short jobs of its own through the shards before saying it " +
        "is ready, so that the first job meets compiled code: on or off (default on).")
    private String rehearsal;

    @Option(names = "--slot-timeout-ms", description = "Default for jobs: abort when a slot stays partly filled this long (default " +
        ApplianceContext.SLOT_TIMEOUT_MS_DEFAULT + ").")
    private Long slotTimeoutMs;

    @Option(names = "--dir", description = "Directory of the counters file and journal (default " + "${java.io.tmpdir}/switchml" + ").")
    private String dir;

    @Option(names = "--http-port", description = "HTTP /metrics and /health port, 0 for any, -1 off (default " +
        ApplianceContext.HTTP_PORT_DEFAULT + ").")
    private Integer httpPort;

    @Option(names = "--insecure-control", description = "Serve the control channel over plain TCP when no TLS keystore " +
        "is configured (" + ApplianceContext.CONTROL_INSECURE_PROP + "=true); without it the appliance refuses to start " +
        "without TLS. The start-up log and `ops status` say so.")
    private boolean insecureControl;

    @Option(names = "--print-config", description = "Print the resolved configuration and exit.")
    private boolean printConfig;

    @Mixin
    private LogLevelOption logLevel;

    @Override
    public Integer call() throws InterruptedException
    {
        Logging.logUncaughtExceptions();
        try
        {
            return run();
        }
        catch (final RuntimeException ex)
        {
            if (isExpected(ex))
            {
                LOG.error("cannot start: {}", describe(ex));
                return 1;
            }
            LOG.error("bug: the appliance failed", ex);
            return 70;
        }
    }

    private int run() throws InterruptedException
    {
        final ApplianceContext context = new ApplianceContext();
        try
        {
            configure(context);
        }
        catch (final IllegalArgumentException | IllegalStateException ex)
        {
            LOG.error("bad configuration: {}", ex.getMessage());
            return 2;
        }
        catch (final IOException ex)
        {
            LOG.error("bad configuration: cannot read --config {}: {}", config, describe(ex));
            return 2;
        }
        if (insecureControl)
        {
            context.controlInsecure(true);
        }
        if (printConfig)
        {
            context.print(System.out);
            return 0;
        }
        if (context.controlTlsContext() == null && !context.controlInsecure())
        {
            LOG.error("bad configuration: the control channel has no TLS (JOIN replies carry " +
                "jobs' MAC keys): set " + ApplianceContext.CONTROL_TLS_KEYSTORE_PROP + " and " +
                ApplianceContext.CONTROL_TLS_PASSWORD_FILE_PROP + ", or pass --insecure-control (" +
                ApplianceContext.CONTROL_INSECURE_PROP + "=true) to serve plain TCP");
            return 2;
        }

        final SystemdNotifier notifier = SystemdNotifier.fromEnvironment();
        io.switchml.appliance.engine.EngineWarmUp.maybeStart();
        final Appliance appliance;
        try
        {
            appliance = Appliance.launch(context);
        }
        catch (final IOException ex)
        {
            LOG.error("cannot start: {}", describe(ex));
            return 1;
        }
        final CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            notifier.stopping("aborting jobs: appliance received a termination signal");
            appliance.close("appliance received a termination signal");
            notifier.close();
            stopped.countDown();
        }, "switchml-shutdown"));
        appliance.pinning().forEach(line -> LOG.info("{}", line));
        if (context.rehearsal())
        {
            final StartupRehearsal.Outcome rehearsal = appliance.rehearse();
            // a warning when it stopped early (the shards stopped completing slots); skipping it is not one
            if (rehearsal.stopped() == null)
            {
                LOG.info("{}", rehearsal.describe());
            }
            else
            {
                LOG.warn("{}", rehearsal.describe());
            }
            if (stopped.getCount() == 0 || appliance.isClosing())
            {
                // a termination signal came during the rehearsal: the shutdown hook closed the appliance; not ready
                stopped.await();
                return 0;
            }
        }
        LOG.info("switchml appliance ready: data udp " + context.resolvedBindAddress().getHostAddress() + ":" +
            appliance.dataPort() + " (" + context.shards() + " shard(s), " + appliance.transportName() + "), control tcp " +
            context.resolvedBindAddress().getHostAddress() + ":" + appliance.controlPort() +
            (appliance.httpPort() >= 0 ? ", http " + context.resolvedBindAddress().getHostAddress() + ":" + appliance.httpPort() : "") +
            ", counters " + appliance.telemetry().countersFile().file() + "; packet MACs " +
            io.switchml.protocol.security.PacketMacBatch.description());
        if (context.controlCredentials() != null)
        {
            LOG.info("control authorization on: " + context.controlCredentials().size() + " credential(s) from " +
                context.controlCredentialsFile());
        }
        else
        {
            LOG.warn("control authorization OFF: anyone who reaches the control port may create, list and " +
                "abort jobs; set " + ApplianceContext.CONTROL_CREDENTIALS_FILE_PROP);
        }
        if (context.controlTlsContext() != null)
        {
            LOG.info("control channel TLS on (" + context.controlTlsKeystore() +
                (context.controlTlsClientAuth() ? "; client certificates required" : "") + ")");
        }
        else
        {
            LOG.warn("control channel is plain TCP: JOIN replies carry jobs' MAC keys and clients' " +
                "auth= secrets in clear text; set " + ApplianceContext.CONTROL_TLS_KEYSTORE_PROP + " and " +
                ApplianceContext.CONTROL_TLS_PASSWORD_FILE_PROP);
        }
        if (context.httpPort() >= 0)
        {
            if (context.httpMetricsToken() != null)
            {
                LOG.info("/metrics needs the token in " + context.httpMetricsTokenFile());
            }
            else if (!context.resolvedBindAddress().isLoopbackAddress())
            {
                LOG.warn("/metrics on " + context.resolvedBindAddress().getHostAddress() + " needs no token, and its labels " +
                    "name every tenant's jobs; set " + ApplianceContext.HTTP_METRICS_TOKEN_FILE_PROP);
            }
        }
        if (notifier.isEnabled())
        {
            final String failure = notifier.ready("serving: " + appliance.statusLine());
            if (failure != null)
            {
                LOG.warn("systemd notify failed: {}", failure);
            }
            notifier.startWatchdog(appliance::isLive, appliance.telemetry().errorLog());
            Thread.ofPlatform().daemon().name("switchml-status").start(() ->
            {
                while (!Thread.currentThread().isInterrupted())
                {
                    try
                    {
                        Thread.sleep(5_000);
                    }
                    catch (final InterruptedException ex)
                    {
                        return;
                    }
                    notifier.status("serving: " + appliance.statusLine());
                }
            });
        }
        stopped.await();
        return 0;
    }

    /**
     * @return whether a failure to start comes from the environment (an address in use or not available, a file
     * that cannot be read or written), which the operator fixes, rather than from a bug.
     */
    static boolean isExpected(final Throwable failure)
    {
        for (Throwable cause = failure; cause != null; cause = cause.getCause())
        {
            if (cause instanceof IOException || cause instanceof UncheckedIOException)
            {
                return true;
            }
        }
        return false;
    }

    /**
     * @return the failure in one line: its message, and its innermost cause's where that adds something.
     */
    static String describe(final Throwable failure)
    {
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root)
        {
            root = root.getCause();
        }
        final String message = failure.getMessage() != null ? failure.getMessage() : failure.toString();
        final String rootMessage = root.getMessage() != null ? root.getMessage() : root.toString();
        return root == failure || message.contains(rootMessage) ? message : message + ": " + rootMessage;
    }

    private void configure(final ApplianceContext context) throws IOException
    {
        if (config != null)
        {
            final Properties properties = new Properties();
            try (Reader reader = Files.newBufferedReader(config, StandardCharsets.UTF_8))
            {
                properties.load(reader);
            }
            context.apply(properties);
        }
        context.apply(System.getProperties());
        if (bind != null)
        {
            context.bindAddress(bind);
        }
        if (dataPort != null)
        {
            context.dataPort(dataPort);
        }
        if (controlPort != null)
        {
            context.controlPort(controlPort);
        }
        if (transport != null)
        {
            context.transport(transport);
        }
        if (joinTimeoutMs != null)
        {
            context.joinTimeoutMs(joinTimeoutMs);
        }
        if (lossRate != null)
        {
            context.lossRate(lossRate);
        }
        if (lossSeed != null)
        {
            context.lossSeed(lossSeed);
        }
        if (shards != null)
        {
            context.shards(shards);
        }
        if (dir != null)
        {
            context.dir(dir);
        }
        if (httpPort != null)
        {
            context.httpPort(httpPort);
        }
        if (shardCpus != null)
        {
            context.shardCpus(shardCpus);
        }
        if (backends != null)
        {
            context.backends(backends);
        }
        if (multicast != null)
        {
            context.multicastBase(multicast);
        }
        if (mac != null)
        {
            final Properties override = new Properties();
            override.setProperty(ApplianceContext.MAC_PROP, mac);
            context.apply(override);
        }
        if (rehearsal != null)
        {
            final Properties override = new Properties();
            override.setProperty(ApplianceContext.REHEARSAL_PROP, rehearsal);
            context.apply(override);
        }
        if (slotTimeoutMs != null)
        {
            context.slotTimeoutMs(slotTimeoutMs);
        }
        context.conclude();
    }

    public static void main(final String[] args)
    {
        System.exit(io.switchml.protocol.UsageErrorHandler.install(new CommandLine(new ApplianceCommand())).execute(args));
    }
}
