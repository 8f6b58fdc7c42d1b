package io.switchml.appliance;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendProvider;
import io.switchml.appliance.backend.Backends;
import io.switchml.appliance.backend.SoftwareBackend;
import io.switchml.appliance.backend.UnavailableBackend;
import io.switchml.appliance.control.ControlServer;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.control.StartupRehearsal;
import io.switchml.appliance.journal.Journal;
import io.switchml.appliance.journal.JournalContext;
import io.switchml.appliance.telemetry.ApplianceMetrics;
import io.switchml.appliance.telemetry.HttpEndpoint;
import io.switchml.appliance.telemetry.Telemetry;
import io.switchml.appliance.transport.DataPlane;
import io.switchml.journal.JournalRecord;
import io.switchml.journal.JournalSeverity;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.telemetry.SystemCounter;
import org.agrona.LangUtil;
import org.agrona.concurrent.status.AtomicCounter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A running appliance: data-plane shards, control endpoint, job registry, telemetry (counters file,
 * error log, latency histograms) and the HTTP endpoint. Embeddable (tests, the demo) and the body of
 * {@code switchml appliance}.
 */
public final class Appliance implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(Appliance.class);

    /** How often offload backends' jobs and health are checked. */
    public static final long BACKEND_POLL_INTERVAL_MS = 50;
    /** How long shutdown waits for the backends to remove the aborted jobs before it closes them. */
    static final long SHUTDOWN_RELEASE_WAIT_MS = 10_000;

    /** How often shard counters are folded into the system totals. */
    public static final long AGGREGATE_INTERVAL_MS = 200;

    private final ApplianceContext context;
    private final Telemetry telemetry;
    private final JobRegistry registry;
    private final ScheduledExecutorService controlExecutor = Executors.newSingleThreadScheduledExecutor(
        runnable -> Thread.ofPlatform().name("switchml-control").daemon().unstarted(runnable));
    private final DataPlane dataPlane;
    private final ControlServer controlServer;
    private final HttpEndpoint httpEndpoint;
    private final Journal journal;
    private final List<Backend> backends;
    private final Map<String, AtomicCounter> fallbackCounters = new ConcurrentHashMap<>();
    private long lastSnapshotMs = System.currentTimeMillis();
    private final long startMs = System.currentTimeMillis();
    private volatile boolean closed;

    private Appliance(final ApplianceContext context) throws IOException, InterruptedException
    {
        this.context = context;
        final int shards = context.shards();
        final LossGenerator[] rxLoss = new LossGenerator[shards];
        final LossGenerator[] txLoss = new LossGenerator[shards];
        for (int shard = 0; shard < shards; shard++)
        {
            rxLoss[shard] = LossGenerator.of(context.lossRate(), context.lossSeed() * 1_000_003L + shard);
            txLoss[shard] = LossGenerator.of(context.lossRate(), context.lossSeed() * 31 + 7 + shard);
        }
        this.telemetry = new Telemetry(Path.of(context.dir()), shards);
        this.journal = Journal.open(new JournalContext().directory(Path.of(context.dir(), io.switchml.protocol.ApplianceDefaults.JOURNAL_DIRECTORY))
            .retainedCycles(context.journalRetainedCycles()).errorHandler(telemetry.errorLog()));
        this.registry = new JobRegistry(context.memoryBudgetBytes(), context.tenantMemoryQuotaBytes(),
            context.tenantMaxJobs(), shards, telemetry);
        registry.tenantOffloadSlots(context.tenantOffloadSlots());
        DataPlane plane = null;
        ControlServer control = null;
        HttpEndpoint http = null;
        try
        {
            plane = new DataPlane(context, registry, telemetry, rxLoss, txLoss, controlExecutor);
            control = new ControlServer(context.resolvedBindAddress(), context.controlPort(), registry,
                new ControlServer.ControlDefaults(context.defaultTenant(), context.slotTimeoutMs(), context.joinTimeoutMs(),
                    context.macEnabled()),
                plane.ports(), telemetry::snapshot, this::healthLine, multicastGroups(context, plane.ports()),
                () -> telemetry.system(SystemCounter.JOINS_REFUSED).increment(),
                () -> telemetry.system(SystemCounter.CONTROL_CONNECTIONS).increment(),
                () -> telemetry.system(SystemCounter.CONTROL_CONNECTIONS).decrement(),
                context.controlLimits(), context.controlTlsContext(), context.controlTlsClientAuth());
            control.credentials(context.controlCredentials());
            if (context.httpPort() >= 0)
            {
                final DataPlane shardPlane = plane;
                final ApplianceMetrics metrics = new ApplianceMetrics(
                    telemetry.countersFile().countersReader(), telemetry::slotLatencyTotals)
                    .memory(registry::memoryUsedBytes, registry::memoryBudgetBytes)
                    .shardCpu(context.shards(), shardPlane::shardThreadId)
                    .backends(registry::backends);
                http = new HttpEndpoint(context.resolvedBindAddress(), context.httpPort(), metrics,
                    context.httpMetricsToken(), () -> !closed, this::healthJson);
            }
        }
        catch (final IOException | RuntimeException | InterruptedException ex)
        {
            if (control != null)
            {
                control.close();
            }
            if (plane != null)
            {
                plane.close();
            }
            journal.close();
            telemetry.close();
            throw ex;
        }
        this.dataPlane = plane;
        this.controlServer = control;
        this.httpEndpoint = http;
        this.backends = startBackends(context, plane.ports());
        registry.placement(backends, context.multicastEnabled(), this::onFallback);
        registry.addEventListener(new RegistryJournal(journal));
        // clients only now: the credentials, the backends and the journal's listener are in place
        controlServer.start();
        controlExecutor.scheduleWithFixedDelay(() ->
        {
            registry.pollBackends(System.nanoTime());
            registry.reapUnjoined(System.currentTimeMillis());
        }, BACKEND_POLL_INTERVAL_MS, BACKEND_POLL_INTERVAL_MS, TimeUnit.MILLISECONDS);
        controlExecutor.scheduleAtFixedRate(telemetry::aggregate, AGGREGATE_INTERVAL_MS, AGGREGATE_INTERVAL_MS,
            TimeUnit.MILLISECONDS);
        controlExecutor.scheduleAtFixedRate(this::snapshotHistograms, context.histogramSnapshotIntervalMs(),
            context.histogramSnapshotIntervalMs(), TimeUnit.MILLISECONDS);
        journal.offerApplianceStarted("appliance started: " + context.shards() + " shard(s) on udp " +
            java.util.Arrays.toString(dataPlane.ports()) + " (" + dataPlane.transportName() + "), control tcp " +
            controlServer.port() + " on " + context.resolvedBindAddress().getHostAddress() + ", pid " + ProcessHandle.current().pid() +
            ", version " + io.switchml.protocol.BuildInfo.version() + "; " + String.join("; ", dataPlane.details()));
    }

    /**
     * Start the configured backends in order. An offload backend that fails to start is replaced by one that refuses
     * every job with that cause, so placement reports it and jobs fall back; the appliance itself keeps running.
     */
    private List<Backend> startBackends(final ApplianceContext context, final int[] dataPorts)
    {
        final List<Backend> started = new ArrayList<>();
        final Map<String, BackendProvider> providers = Backends.providers();
        for (final String name : context.backendList())
        {
            if (Backends.SOFTWARE.equals(name))
            {
                started.add(new SoftwareBackend());
                continue;
            }
            final Path stateDirectory = Path.of(context.dir(), "backends", name);
            final BackendEnvironment environment = new BackendEnvironment(context.backendOptions(name),
                "switchml.appliance." + name + ".", context.resolvedBindAddress(), dataPorts,
                context.multicastEnabled() ? context.resolvedMulticastBase() : 0, multicastPorts(context, dataPorts),
                metric -> telemetry.countersFile().allocateBackendCounter(name, metric, name + " " + metric),
                this::logBackend, stateDirectory);
            try
            {
                Files.createDirectories(stateDirectory);
                started.add(providers.get(name).create(environment));
            }
            catch (final IOException ex)
            {
                logBackend(name + ": not started: cannot create its state directory " + stateDirectory + ": " + ex +
                    "; jobs go to the next backend");
                started.add(new UnavailableBackend(name, "not started: cannot create its state directory " + stateDirectory));
            }
            catch (final BackendException | RuntimeException ex)
            {
                logBackend(name + ": not started: " + ex.getMessage() + "; jobs go to the next backend");
                started.add(new UnavailableBackend(name, "not started: " + ex.getMessage()));
            }
        }
        return started;
    }

    private static int[] multicastPorts(final ApplianceContext context, final int[] dataPorts)
    {
        if (!context.multicastEnabled())
        {
            return new int[0];
        }
        final int[] ports = new int[dataPorts.length];
        for (int shard = 0; shard < ports.length; shard++)
        {
            ports[shard] = context.multicastPort() != 0 ? context.multicastPort() : dataPorts[shard] + ApplianceContext.MULTICAST_PORT_OFFSET;
        }
        return ports;
    }

    private void logBackend(final String line)
    {
        LOG.info("{}", line);
        journal.offerFault(JournalSeverity.INFO, JournalRecord.NO_JOB_ID, null, null, line);
    }

    /** Distinct fallback reason classes counted per backend; later ones are counted as "other". */
    static final int MAX_FALLBACK_REASONS = 32;

    void onFallback(final String backend, final String reason)
    {
        final String reasonClass = fallbackClass(reason);
        AtomicCounter counter = fallbackCounters.get(backend + "\n" + reasonClass);
        if (counter == null)
        {
            synchronized (fallbackCounters)
            {
                final long classes = fallbackCounters.keySet().stream().filter(key -> key.startsWith(backend + "\n")).count();
                final String label = classes < MAX_FALLBACK_REASONS - 1 ? reasonClass : "other";
                counter = fallbackCounters.computeIfAbsent(backend + "\n" + label,
                    key -> telemetry.countersFile().allocateBackendCounter(backend, "fallbacks", label));
            }
        }
        counter.increment();
    }

    /**
     * @return the reason as a metric label of bounded cardinality: numbers become N and quoted names '*', since a
     * client chooses both (k, s, its tenant) and each distinct label holds a counter for the appliance's lifetime.
     * The full reason stays in the CREATE reply, JOBS and the journal.
     */
    static String fallbackClass(final String reason)
    {
        final String reasonClass = reason.replaceAll("'[^']*'", "'*'").replaceAll("\\d+", "N");
        return reasonClass.length() > 160 ? reasonClass.substring(0, 160) : reasonClass;
    }

    /**
     * @return the backends jobs are placed on, in order of preference.
     */
    public List<Backend> backends()
    {
        return backends;
    }

    /**
     * Validate the context and start an appliance.
     *
     * @param context configuration; {@link ApplianceContext#conclude()} is called here.
     * @return the running appliance.
     */
    public static Appliance launch(final ApplianceContext context) throws IOException, InterruptedException
    {
        return new Appliance(context.conclude());
    }

    /**
     * @return for a job id, "group:port0,port1,..." (one multicast port per shard) when results are
     * multicast, else null; workers join that group to receive completed results.
     */
    private static java.util.function.IntFunction<String> multicastGroups(final ApplianceContext context, final int[] shardPorts)
    {
        if (!context.multicastEnabled())
        {
            return jobId -> null;
        }
        final int[] groupPorts = multicastPorts(context, shardPorts);
        if (context.multicastPort() == 0)
        {
            warnIfEphemeral(groupPorts, Path.of("/proc/sys/net/ipv4/ip_local_port_range"));
        }
        final StringBuilder ports = new StringBuilder();
        for (int shard = 0; shard < groupPorts.length; shard++)
        {
            ports.append(shard == 0 ? "" : ",").append(groupPorts[shard]);
        }
        final int base = context.resolvedMulticastBase();
        final String portList = ports.toString();
        return jobId ->
        {
            final int address = base + (jobId & 0xFFFF);
            return ((address >>> 24) & 0xFF) + "." + ((address >>> 16) & 0xFF) + "." + ((address >>> 8) & 0xFF) + "." +
                (address & 0xFF) + ":" + portList;
        };
    }

    /**
     * A multicast port derived from an ephemeral data port (--data-port 0) lies in the kernel's ephemeral range, where
     * any socket on a worker host may already hold it; a worker then cannot bind its group socket and its join fails
     * ("bind(0.0.0.0:P) failed: errno 98"), as one loopback bench cell in five did (2026-11-26). Said once at start.
     *
     * @return the warning, or null when no port lies in the range or the range cannot be read.
     */
    static String warnIfEphemeral(final int[] groupPorts, final Path portRange)
    {
        final int low;
        final int high;
        try
        {
            final String[] bounds = Files.readString(portRange).strip().split("\\s+");
            low = Integer.parseInt(bounds[0]);
            high = Integer.parseInt(bounds[1]);
        }
        catch (final IOException | RuntimeException ex)
        {
            return null;
        }
        for (final int port : groupPorts)
        {
            if (port >= low && port <= high)
            {
                final String warning = "multicast port " + port + " (the data port + " +
                    ApplianceContext.MULTICAST_PORT_OFFSET + ") lies in this host's ephemeral port range " + low + "-" +
                    high + ", where another socket may already hold it and keep a worker from joining the group; set " +
                    ApplianceContext.MULTICAST_PORT_PROP + " (or a fixed data port) to a port outside it";
                LOG.warn("{}", warning);
                return warning;
            }
        }
        return null;
    }

    private void snapshotHistograms()
    {
        final long nowMs = System.currentTimeMillis();
        for (int shard = 0; shard < context.shards(); shard++)
        {
            journal.offerHistogramSnapshot(shard, lastSnapshotMs, nowMs, telemetry.slotLatency(shard).intervalSnapshot());
        }
        lastSnapshotMs = nowMs;
    }

    /**
     * Writes job lifecycle events to the journal.
     */
    private record RegistryJournal(Journal journal) implements JobRegistry.JobEventListener
    {
        public void onJobCreated(final io.switchml.appliance.control.Job job, final String description)
        {
            journal.offerJobCreated(job.jobId(), job.tenant(), job.name(), description);
        }

        public void onJobStarted(final io.switchml.appliance.control.Job job, final String description)
        {
            journal.offerJobStarted(job.jobId(), job.tenant(), job.name(), description);
        }

        public void onJobEnded(final io.switchml.appliance.control.Job job, final String reason, final boolean aborted)
        {
            if (aborted)
            {
                journal.offerJobAborted(job.jobId(), job.tenant(), job.name(), reason);
            }
            else
            {
                journal.offerJobEnded(job.jobId(), job.tenant(), job.name(), reason);
            }
        }
    }

    public Journal journal()
    {
        return journal;
    }

    private String healthLine()
    {
        return "status=up uptimeMs=" + (System.currentTimeMillis() - startMs) + " jobs=" + registry.jobCount() +
            " memoryUsedBytes=" + registry.memoryUsedBytes() + " memoryBudgetBytes=" + registry.memoryBudgetBytes() +
            " shards=" + context.shards() + " transport=" + dataPlane.transportName() + " backends=" +
            String.join(",", backends.stream().map(Backend::name).toList()) + " backendsDown=" +
            String.join(",", backends.stream().filter(backend -> backend.health() != null).map(Backend::name).toList()) + " auth=" +
            (context.controlCredentials() != null ? "on" : "off") + " tls=" + (context.controlTlsContext() != null ? "on" : "off") +
            " pid=" + ProcessHandle.current().pid();
    }

    private String healthJson()
    {
        return "{\"status\": \"" + (closed ? "stopping" : "up") + "\", \"uptimeMs\": " + (System.currentTimeMillis() - startMs) +
            ", \"jobs\": " + registry.jobCount() + ", \"memoryUsedBytes\": " + registry.memoryUsedBytes() +
            ", \"memoryBudgetBytes\": " + registry.memoryBudgetBytes() + ", \"shards\": " + context.shards() +
            ", \"transport\": \"" + dataPlane.transportName() + "\"}";
    }

    /**
     * @return system counters and shard counters summed over the shards (as "shard_" + name).
     */
    public Map<String, Long> counterSnapshot()
    {
        return telemetry.snapshot();
    }

    /**
     * @param name of a shard counter (e.g. "retransmissions_served", "drop_bad_mac") or a system counter.
     * @return its value summed over shards.
     */
    public long counter(final String name)
    {
        final Map<String, Long> snapshot = telemetry.snapshot();
        final Long shardValue = snapshot.get("shard_" + name);
        return shardValue != null ? shardValue : snapshot.getOrDefault(name, 0L);
    }

    public ApplianceContext context()
    {
        return context;
    }

    public JobRegistry registry()
    {
        return registry;
    }

    public Telemetry telemetry()
    {
        return telemetry;
    }

    /**
     * Run the start-up rehearsal ({@link StartupRehearsal}): two jobs of its own through
     * the shards, so that the first real job meets compiled code. Call once, after {@link #launch} and before saying
     * the appliance is ready.
     *
     * @return what it did.
     */
    public StartupRehearsal.Outcome rehearse()
    {
        return rehearse(StartupRehearsal.BUDGET_NS);
    }

    /**
     * @param budgetNs longest it runs.
     */
    public StartupRehearsal.Outcome rehearse(final long budgetNs)
    {
        if (context.lossRate() > 0)
        {
            return StartupRehearsal.Outcome.skipped(
                ApplianceContext.LOSS_RATE_PROP + " drops packets on purpose and the rehearsal does not resend");
        }
        return new StartupRehearsal(registry, context.resolvedBindAddress(), dataPlane.ports(),
            context.multicastEnabled(), budgetNs, () -> closed).run();
    }

    /**
     * @return the UDP port of the first shard.
     */
    public int dataPort()
    {
        return dataPlane.ports()[0];
    }

    public int[] dataPorts()
    {
        return dataPlane.ports();
    }

    public int controlPort()
    {
        return controlServer.port();
    }

    /**
     * @return the HTTP port, or -1 when the endpoint is off.
     */
    public int httpPort()
    {
        return httpEndpoint == null ? -1 : httpEndpoint.port();
    }

    public String transportName()
    {
        return dataPlane.transportName();
    }

    /**
     * @return whether {@link #close} has begun.
     */
    public boolean isClosing()
    {
        return closed;
    }

    /**
     * @return true while every data-plane shard's event loop is turning and the appliance is not closing.
     */
    public boolean isLive()
    {
        return !closed && dataPlane.isLive(1_000);
    }

    /**
     * @return a one-line status for systemd and logs.
     */
    public String statusLine()
    {
        return registry.jobCount() + " job(s), " + counter("packets_in") + " packets in, " +
            registry.memoryUsedBytes() + "/" + registry.memoryBudgetBytes() + " bytes of aggregator memory";
    }

    public List<String> pinning()
    {
        return dataPlane.pinning();
    }

    /**
     * @return one line per shard describing its transport.
     */
    public List<String> transportDetails()
    {
        return dataPlane.details();
    }

    /**
     * @return results the native transport dropped because a shard's send batch was full.
     */
    public long sendDrops()
    {
        return dataPlane.sendDrops();
    }

    /**
     * Abort running jobs with the reason, then stop the endpoints and flush telemetry.
     */
    /**
     * Stop everything in order: abort the jobs, let the backends remove them, close the backends (programs detached,
     * switch tables cleared), the control and data planes, the HTTP endpoint, then the journal and counters. Every step
     * runs even when one before it throws, since a step skipped here can leave an XDP program attached or a port bound
     * after the process goes on (an embedded appliance, a test); each failure is logged naming its step, and the first
     * is thrown at the end with the others suppressed.
     */
    public synchronized void close(final String reason)
    {
        if (closed)
        {
            return;
        }
        closed = true;
        final List<ShutdownStep> steps = new ArrayList<>();
        steps.add(new ShutdownStep("journal the stop", () -> journal.offerApplianceStopping("appliance stopping: " + reason)));
        steps.add(new ShutdownStep("abort the jobs", () -> registry.abortAll(reason)));
        steps.add(new ShutdownStep("wait for the backends to remove the jobs", () ->
        {
            if (!registry.awaitReleases(SHUTDOWN_RELEASE_WAIT_MS))
            {
                LOG.warn("backends still removing jobs after {} ms; closing them", SHUTDOWN_RELEASE_WAIT_MS);
            }
        }));
        for (final Backend backend : backends)
        {
            steps.add(new ShutdownStep("close backend " + backend.name(), backend::close));
        }
        steps.add(new ShutdownStep("close the control server", controlServer::close));
        steps.add(new ShutdownStep("close the data plane", dataPlane::close));
        if (httpEndpoint != null)
        {
            steps.add(new ShutdownStep("close the HTTP endpoint", httpEndpoint::close));
        }
        steps.add(new ShutdownStep("stop the control executor", controlExecutor::shutdownNow));
        steps.add(new ShutdownStep("snapshot the histograms", this::snapshotHistograms));
        steps.add(new ShutdownStep("close the journal", journal::close));
        steps.add(new ShutdownStep("fold the shard counters", telemetry::aggregate));
        steps.add(new ShutdownStep("close the telemetry", telemetry::close));
        Throwable first = null;
        for (final ShutdownStep step : steps)
        {
            try
            {
                step.action.run();
            }
            catch (final RuntimeException | Error ex)
            {
                LOG.error("appliance shutdown: {} failed; going on with the rest", step.name, ex);
                if (first == null)
                {
                    first = ex;
                }
                else
                {
                    first.addSuppressed(ex);
                }
            }
        }
        if (first != null)
        {
            LangUtil.rethrowUnchecked(first);
        }
    }

    private record ShutdownStep(String name, Runnable action)
    {
    }

    public void close()
    {
        close("appliance shutting down");
    }
}
