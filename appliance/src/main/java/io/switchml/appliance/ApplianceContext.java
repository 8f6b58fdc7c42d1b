package io.switchml.appliance;

import io.switchml.protocol.OnOff;

import java.io.PrintStream;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Locale;
import java.util.Properties;

/**
 * Configuration of an appliance: each option has a property name, a default and a line of doc in
 * this class; {@link #conclude()} validates everything once at start-up and fails naming the option.
 */
public final class ApplianceContext
{
    /** Address the data and control endpoints bind to. Loopback unless configured otherwise. */
    public static final String BIND_ADDRESS_PROP = "switchml.appliance.bind";
    public static final String BIND_ADDRESS_DEFAULT = "127.0.0.1";

    /** UDP port of the data plane; 0 picks a free port. */
    public static final String DATA_PORT_PROP = "switchml.appliance.data.port";
    public static final int DATA_PORT_DEFAULT = 7471;

    /** TCP port of the control endpoint (join, leave, jobs); 0 picks a free port. */
    public static final String CONTROL_PORT_PROP = "switchml.appliance.control.port";
    public static final int CONTROL_PORT_DEFAULT = io.switchml.protocol.ApplianceDefaults.CONTROL_PORT;

    /**
     * UDP transport: auto (native where it works, else epoll when available, else nio), native (recvmmsg and
     * sendmmsg through the JDK's foreign function interface, no allocation per packet), epoll, io_uring or
     * nio (Netty). The default is also read from the system property, so that a test run can choose it.
     */
    public static final String TRANSPORT_PROP = "switchml.appliance.transport";
    public static final String TRANSPORT_DEFAULT = "auto";

    /** Native transport: datagrams received per recvmmsg call (1..1024). */
    public static final String NATIVE_BATCH_PROP = "switchml.appliance.native.batch";
    public static final int NATIVE_BATCH_DEFAULT = 32;

    /**
     * Native transport: idle turns a shard spends re-reading its socket before it sleeps in poll(2) (which
     * wakes it when a datagram arrives). Each turn is a system call; a few catch the next datagram of a burst
     * without a sleep and wake-up. Raise it (thousands) only when shards have CPUs of their own: a spinning
     * shard takes a whole core from the workers on a shared host.
     */
    public static final String NATIVE_IDLE_SPINS_PROP = "switchml.appliance.native.idle.spins";
    public static final int NATIVE_IDLE_SPINS_DEFAULT = 4;

    /**
     * First IPv4 address of the result multicast groups, e.g. 239.192.0.0: job j's completed results go to
     * group base + (j mod 65536) as one datagram instead of one unicast per member (retransmitted results
     * stay unicast), so that the switch replicates them. Empty (the default) sends unicasts.
     */
    public static final String MULTICAST_BASE_PROP = "switchml.appliance.multicast.base";
    public static final String MULTICAST_BASE_DEFAULT = "";

    /** UDP port results are multicast to; 0 means each shard's data port + {@link #MULTICAST_PORT_OFFSET}. */
    public static final String MULTICAST_PORT_PROP = "switchml.appliance.multicast.port";
    public static final int MULTICAST_PORT_DEFAULT = 0;

    /** Added to a shard's data port to give its multicast port when none is configured. */
    public static final int MULTICAST_PORT_OFFSET = 1000;

    /**
     * Ordered preference list of aggregation backends: a job goes to the first that can take it (placement at
     * CREATE), and every backend passed over is recorded with its reason. {@code software} is the appliance's own
     * shards; others ({@code xdp}) come from offload modules on the class path. Options of backend NAME are
     * {@code switchml.appliance.NAME.*}. Without {@code software} in the list, a job no listed backend can take
     * is refused.
     */
    public static final String BACKENDS_PROP = "switchml.appliance.backends";
    public static final String BACKENDS_DEFAULT = "software";

    /** IP TTL of multicast results: 1 keeps them on the local network (the rack). */
    public static final String MULTICAST_TTL_PROP = "switchml.appliance.multicast.ttl";
    public static final int MULTICAST_TTL_DEFAULT = 1;

    /** Number of data-plane shards: single-threaded event loops, each with its own UDP port (data port + i). */
    public static final String SHARDS_PROP = "switchml.appliance.shards";
    public static final int SHARDS_DEFAULT = 1;

    /** CPUs to pin the shards to, comma-separated, one per shard; empty leaves them unpinned. */
    public static final String SHARD_CPUS_PROP = "switchml.appliance.shard.cpus";
    public static final String SHARD_CPUS_DEFAULT = "";

    /** Tenant a CREATE without one is charged to. */
    public static final String DEFAULT_TENANT_PROP = "switchml.appliance.tenant.default";
    public static final String DEFAULT_TENANT_DEFAULT = "default";

    /** Aggregator memory one tenant's jobs together may hold. */
    public static final String TENANT_MEMORY_QUOTA_BYTES_PROP = "switchml.appliance.tenant.memory.quota.bytes";
    public static final long TENANT_MEMORY_QUOTA_BYTES_DEFAULT = 1L << 30;

    /** Jobs one tenant may run at once. */
    public static final String TENANT_MAX_JOBS_PROP = "switchml.appliance.tenant.max.jobs";
    public static final int TENANT_MAX_JOBS_DEFAULT = 64;

    /**
     * Slot versions (2 per slot of s) of the offload backends (xdp, tofino) that one tenant's jobs may hold at once;
     * a job over it goes to the next backend with that reason, so that one tenant cannot take a scarce switch or NIC
     * from the others. 0: no limit.
     */
    public static final String TENANT_OFFLOAD_SLOTS_PROP = "switchml.appliance.tenant.offload.slots";
    public static final long TENANT_OFFLOAD_SLOTS_DEFAULT = 0;

    /** Default for jobs that do not say: a slot partly filled for this long aborts the job naming the missing ranks. */
    public static final String SLOT_TIMEOUT_MS_PROP = "switchml.appliance.slot.timeout.ms";
    public static final long SLOT_TIMEOUT_MS_DEFAULT = 2_000;

    /** Default for jobs that do not say: whether data packets carry a SipHash-2-4 MAC (on) or not (off). */
    public static final String MAC_PROP = "switchml.appliance.mac";
    public static final boolean MAC_DEFAULT = true;

    /**
     * Whether the appliance runs two short jobs of its own through its shards before it says it is ready (on/off):
     * the first real job then meets compiled code ({@link io.switchml.appliance.control.StartupRehearsal}).
     */
    public static final String REHEARSAL_PROP = "switchml.appliance.rehearsal";
    public static final boolean REHEARSAL_DEFAULT = true;

    /** Directory of the counters file (counters.dat) and the event journal. */
    public static final String DIR_PROP = "switchml.appliance.dir";
    public static final String DIR_DEFAULT = io.switchml.protocol.ApplianceDefaults.DIR;

    /** TCP port of the HTTP endpoint (/metrics, /health) on the bind address; 0 picks a free port, -1 turns it off. */
    public static final String HTTP_PORT_PROP = "switchml.appliance.http.port";
    public static final int HTTP_PORT_DEFAULT = 7472;
    /**
     * A file (mode 600) holding the bearer token that {@code /metrics} requires, as Prometheus sends it with
     * {@code authorization: credentials_file:}; empty: {@code /metrics} is open to whoever reaches the port.
     */
    public static final String HTTP_METRICS_TOKEN_FILE_PROP = "switchml.appliance.http.metrics.token.file";

    /** Journal cycles (days) kept; older ones are deleted. */
    public static final String JOURNAL_RETAINED_CYCLES_PROP = "switchml.appliance.journal.retained.cycles";
    public static final int JOURNAL_RETAINED_CYCLES_DEFAULT = 7;

    /** How often each shard's slot-completion latency histogram is written to the journal. */
    public static final String HISTOGRAM_SNAPSHOT_INTERVAL_MS_PROP = "switchml.appliance.histogram.snapshot.interval.ms";
    public static final long HISTOGRAM_SNAPSHOT_INTERVAL_MS_DEFAULT = 10_000;

    /** How long a job waits for all its ranks to join before the joiners are refused. */
    public static final String JOIN_TIMEOUT_MS_PROP = "switchml.appliance.join.timeout.ms";
    public static final long JOIN_TIMEOUT_MS_DEFAULT = 30_000;
    /** Control connections in total and per client address; a connection holding no job closed after idling. */
    public static final String CONTROL_MAX_CONNECTIONS_PROP = "switchml.appliance.control.max.connections";
    public static final String CONTROL_MAX_CONNECTIONS_PER_ADDRESS_PROP = "switchml.appliance.control.max.connections.per.address";
    public static final String CONTROL_IDLE_TIMEOUT_MS_PROP = "switchml.appliance.control.idle.timeout.ms";
    /**
     * Credentials file of the control plane ({@link io.switchml.protocol.ControlCredentials}): when set, CREATE,
     * ABORTJOB, JOBS and STATS need an operator's or a tenant's credential; empty: authorization off.
     */
    public static final String CONTROL_CREDENTIALS_FILE_PROP = "switchml.appliance.control.credentials.file";
    /**
     * TLS for the control channel: a PKCS12 keystore with the appliance's certificate and key, and a file holding its
     * password; both empty: plain TCP (the start-up log warns: the JOIN reply carries the job's MAC key).
     */
    public static final String CONTROL_TLS_KEYSTORE_PROP = "switchml.appliance.control.tls.keystore";
    public static final String CONTROL_TLS_PASSWORD_FILE_PROP = "switchml.appliance.control.tls.password.file";
    /**
     * true: {@code switchml appliance} may serve the control channel over plain TCP (no keystore). The command refuses
     * to start without TLS unless this (or {@code --insecure-control}) says so; the embedded API does not check it.
     */
    public static final String CONTROL_INSECURE_PROP = "switchml.appliance.control.insecure";
    /** Mutual TLS: a PEM file of the CA (or certificates) that control clients' certificates must chain to; empty: none. */
    public static final String CONTROL_TLS_CLIENT_CA_PROP = "switchml.appliance.control.tls.client.ca";

    /** Aggregator memory all jobs together may hold (lanes of both pool versions plus bitmaps). */
    public static final String MEMORY_BUDGET_BYTES_PROP = "switchml.appliance.memory.budget.bytes";
    public static final long MEMORY_BUDGET_BYTES_DEFAULT = 1L << 30;

    /** Requested SO_RCVBUF and SO_SNDBUF of the data socket (the kernel caps it at net.core.rmem_max). */
    public static final String SOCKET_BUFFER_BYTES_PROP = "switchml.appliance.socket.buffer.bytes";
    public static final int SOCKET_BUFFER_BYTES_DEFAULT = 4 << 20;

    /** Probability of dropping each received and each sent data packet, for loss tests. */
    public static final String LOSS_RATE_PROP = "switchml.appliance.loss.rate";
    public static final double LOSS_RATE_DEFAULT = 0.0;

    /** Seed of the loss generator. */
    public static final String LOSS_SEED_PROP = "switchml.appliance.loss.seed";
    public static final long LOSS_SEED_DEFAULT = 1;

    private String dir = DIR_DEFAULT;
    private int journalRetainedCycles = JOURNAL_RETAINED_CYCLES_DEFAULT;
    private long histogramSnapshotIntervalMs = HISTOGRAM_SNAPSHOT_INTERVAL_MS_DEFAULT;
    private int httpPort = HTTP_PORT_DEFAULT;
    private int shards = SHARDS_DEFAULT;
    private String shardCpus = SHARD_CPUS_DEFAULT;
    private String defaultTenant = DEFAULT_TENANT_DEFAULT;
    private long tenantMemoryQuotaBytes = TENANT_MEMORY_QUOTA_BYTES_DEFAULT;
    private int tenantMaxJobs = TENANT_MAX_JOBS_DEFAULT;
    private long tenantOffloadSlots = TENANT_OFFLOAD_SLOTS_DEFAULT;
    private long slotTimeoutMs = SLOT_TIMEOUT_MS_DEFAULT;
    private boolean macEnabled = MAC_DEFAULT;
    private boolean rehearsal = REHEARSAL_DEFAULT;
    private int[] resolvedShardCpus = new int[0];
    private String bindAddress = BIND_ADDRESS_DEFAULT;
    private int dataPort = DATA_PORT_DEFAULT;
    private int controlPort = CONTROL_PORT_DEFAULT;
    private String transport = System.getProperty(TRANSPORT_PROP, TRANSPORT_DEFAULT);
    private int nativeBatch = NATIVE_BATCH_DEFAULT;
    private int nativeIdleSpins = NATIVE_IDLE_SPINS_DEFAULT;
    private String multicastBase = MULTICAST_BASE_DEFAULT;
    private String backends = BACKENDS_DEFAULT;
    private final java.util.Map<String, java.util.Map<String, String>> backendOptions = new java.util.TreeMap<>();
    private int multicastPort = MULTICAST_PORT_DEFAULT;
    private int multicastTtl = MULTICAST_TTL_DEFAULT;
    private int resolvedMulticastBase;
    private long joinTimeoutMs = JOIN_TIMEOUT_MS_DEFAULT;
    private int controlMaxConnections = io.switchml.appliance.control.ControlServer.Limits.DEFAULT.maxConnections();
    private int controlMaxConnectionsPerAddress =
        io.switchml.appliance.control.ControlServer.Limits.DEFAULT.maxConnectionsPerAddress();
    private long controlIdleTimeoutMs = io.switchml.appliance.control.ControlServer.Limits.DEFAULT.idleTimeoutMs();
    private String controlCredentialsFile = "";
    private String httpMetricsTokenFile = "";
    private String httpMetricsToken;
    private String controlTlsKeystore = "";
    private String controlTlsPasswordFile = "";
    private boolean controlInsecure;
    private String controlTlsClientCa = "";
    private javax.net.ssl.SSLContext controlTls;
    private io.switchml.protocol.ControlCredentials controlCredentials;
    private long memoryBudgetBytes = MEMORY_BUDGET_BYTES_DEFAULT;
    private int socketBufferBytes = SOCKET_BUFFER_BYTES_DEFAULT;
    private double lossRate = LOSS_RATE_DEFAULT;
    private long lossSeed = LOSS_SEED_DEFAULT;

    private InetAddress resolvedBindAddress;

    /**
     * Apply options from properties (a file or system properties); unknown switchml.appliance.*
     * keys are an error so that a typo does not silently fall back to a default.
     *
     * @param properties to read.
     * @return this for a fluent API.
     */
    public ApplianceContext apply(final Properties properties)
    {
        for (final String key : properties.stringPropertyNames())
        {
            final String value = properties.getProperty(key).strip();
            if (!key.startsWith("switchml.appliance."))
            {
                continue;
            }
            try
            {
                switch (key)
                {
                    case BIND_ADDRESS_PROP -> bindAddress = value;
                    case DATA_PORT_PROP -> dataPort = Integer.parseInt(value);
                    case CONTROL_PORT_PROP -> controlPort = Integer.parseInt(value);
                    case TRANSPORT_PROP -> transport = value;
                    case NATIVE_BATCH_PROP -> nativeBatch = Integer.parseInt(value);
                    case NATIVE_IDLE_SPINS_PROP -> nativeIdleSpins = Integer.parseInt(value);
                    case MULTICAST_BASE_PROP -> multicastBase = value;
                    case MULTICAST_PORT_PROP -> multicastPort = Integer.parseInt(value);
                    case MULTICAST_TTL_PROP -> multicastTtl = Integer.parseInt(value);
                    case JOIN_TIMEOUT_MS_PROP -> joinTimeoutMs = Long.parseLong(value);
                    case CONTROL_MAX_CONNECTIONS_PROP -> controlMaxConnections = Integer.parseInt(value);
                    case CONTROL_MAX_CONNECTIONS_PER_ADDRESS_PROP -> controlMaxConnectionsPerAddress = Integer.parseInt(value);
                    case CONTROL_IDLE_TIMEOUT_MS_PROP -> controlIdleTimeoutMs = Long.parseLong(value);
                    case CONTROL_CREDENTIALS_FILE_PROP -> controlCredentialsFile = value;
                    case CONTROL_TLS_KEYSTORE_PROP -> controlTlsKeystore = value;
                    case CONTROL_TLS_PASSWORD_FILE_PROP -> controlTlsPasswordFile = value;
                    case CONTROL_INSECURE_PROP -> controlInsecure = parseBoolean(CONTROL_INSECURE_PROP, value);
                    case CONTROL_TLS_CLIENT_CA_PROP -> controlTlsClientCa = value;
                    case MEMORY_BUDGET_BYTES_PROP -> memoryBudgetBytes = Long.parseLong(value);
                    case SOCKET_BUFFER_BYTES_PROP -> socketBufferBytes = Integer.parseInt(value);
                    case LOSS_RATE_PROP -> lossRate = Double.parseDouble(value);
                    case LOSS_SEED_PROP -> lossSeed = Long.parseLong(value);
                    case SHARDS_PROP -> shards = Integer.parseInt(value);
                    case DIR_PROP -> dir = value;
                    case JOURNAL_RETAINED_CYCLES_PROP -> journalRetainedCycles = Integer.parseInt(value);
                    case HISTOGRAM_SNAPSHOT_INTERVAL_MS_PROP -> histogramSnapshotIntervalMs = Long.parseLong(value);
                    case HTTP_PORT_PROP -> httpPort = Integer.parseInt(value);
                    case HTTP_METRICS_TOKEN_FILE_PROP -> httpMetricsTokenFile = value;
                    case SHARD_CPUS_PROP -> shardCpus = value;
                    case DEFAULT_TENANT_PROP -> defaultTenant = value;
                    case TENANT_MEMORY_QUOTA_BYTES_PROP -> tenantMemoryQuotaBytes = Long.parseLong(value);
                    case TENANT_MAX_JOBS_PROP -> tenantMaxJobs = Integer.parseInt(value);
                    case TENANT_OFFLOAD_SLOTS_PROP -> tenantOffloadSlots = Long.parseLong(value);
                    case SLOT_TIMEOUT_MS_PROP -> slotTimeoutMs = Long.parseLong(value);
                    case MAC_PROP -> macEnabled = parseOnOff(key, value);
                    case REHEARSAL_PROP -> rehearsal = parseOnOff(key, value);
                    case BACKENDS_PROP -> backends = value;
                    default ->
                    {
                        final String rest = key.substring("switchml.appliance.".length());
                        final int dot = rest.indexOf('.');
                        final String backend = dot > 0 ? rest.substring(0, dot) : "";
                        if (dot <= 0 || !io.switchml.appliance.backend.Backends.isOffloadName(backend))
                        {
                            throw new IllegalArgumentException("unknown option " + key);
                        }
                        backendOptions.computeIfAbsent(backend, b -> new java.util.TreeMap<>()).put(rest.substring(dot + 1), value);
                    }
                }
            }
            catch (final NumberFormatException ex)
            {
                throw new IllegalArgumentException("option " + key + " is not a number: '" + value + "'", ex);
            }
        }
        return this;
    }

    /**
     * Validate all options and resolve derived values.
     *
     * @return this for a fluent API.
     * @throws IllegalArgumentException naming the first bad option.
     */
    public ApplianceContext conclude()
    {
        io.switchml.appliance.backend.Backends.validate(BACKENDS_PROP, backends, backendOptions.keySet());
        requirePort(DATA_PORT_PROP, dataPort);
        requirePort(CONTROL_PORT_PROP, controlPort);
        final String t = transport.toLowerCase(Locale.ROOT);
        if (!t.equals("auto") && !t.equals("native") && !t.equals("epoll") && !t.equals("io_uring") && !t.equals("nio"))
        {
            throw new IllegalArgumentException(TRANSPORT_PROP + " must be auto, native, epoll, io_uring or nio: '" + transport + "'");
        }
        if (nativeBatch < 1 || nativeBatch > 1024)
        {
            throw new IllegalArgumentException(NATIVE_BATCH_PROP + " must be within 1..1024: " + nativeBatch);
        }
        if (nativeIdleSpins < 0)
        {
            throw new IllegalArgumentException(NATIVE_IDLE_SPINS_PROP + " must not be negative: " + nativeIdleSpins);
        }
        requirePort(MULTICAST_PORT_PROP, multicastPort);
        if (multicastTtl < 0 || multicastTtl > 255)
        {
            throw new IllegalArgumentException(MULTICAST_TTL_PROP + " must be within 0..255: " + multicastTtl);
        }
        resolvedMulticastBase = 0;
        if (!multicastBase.isBlank())
        {
            final InetAddress group;
            try
            {
                group = InetAddress.getByName(multicastBase.strip());
            }
            catch (final UnknownHostException ex)
            {
                throw new IllegalArgumentException(MULTICAST_BASE_PROP + " is not an address: '" + multicastBase + "'", ex);
            }
            if (!(group instanceof java.net.Inet4Address) || !group.isMulticastAddress() ||
                (group.hashCode() + 0xFFFF) >>> 28 != 0xE)
            {
                throw new IllegalArgumentException(MULTICAST_BASE_PROP + " must be an IPv4 multicast address (224.0.0.0/4) " +
                    "with 65536 group addresses above it still multicast, e.g. 239.192.0.0: '" + multicastBase + "'");
            }
            resolvedMulticastBase = group.hashCode();
        }
        if (httpPort < -1 || httpPort > 65_535)
        {
            throw new IllegalArgumentException(HTTP_PORT_PROP + " must be -1 (off) or within 0..65535: " + httpPort);
        }
        if (journalRetainedCycles < 1)
        {
            throw new IllegalArgumentException(JOURNAL_RETAINED_CYCLES_PROP + " must be positive: " + journalRetainedCycles);
        }
        if (histogramSnapshotIntervalMs < 100)
        {
            throw new IllegalArgumentException(HISTOGRAM_SNAPSHOT_INTERVAL_MS_PROP + " must be at least 100: " +
                histogramSnapshotIntervalMs);
        }
        if (dir.isBlank())
        {
            throw new IllegalArgumentException(DIR_PROP + " must name a directory");
        }
        if (shards < 1 || shards > 64)
        {
            throw new IllegalArgumentException(SHARDS_PROP + " must be within 1..64: " + shards);
        }
        if (dataPort != 0 && dataPort + shards - 1 > 65_535)
        {
            throw new IllegalArgumentException(DATA_PORT_PROP + " + " + SHARDS_PROP + " exceeds 65535");
        }
        resolvedShardCpus = new int[0];
        if (!shardCpus.isBlank())
        {
            final String[] parts = shardCpus.split(",");
            if (parts.length != shards)
            {
                throw new IllegalArgumentException(SHARD_CPUS_PROP + " must list one CPU per shard (" + shards + "): '" + shardCpus + "'");
            }
            resolvedShardCpus = new int[parts.length];
            for (int i = 0; i < parts.length; i++)
            {
                try
                {
                    resolvedShardCpus[i] = Integer.parseInt(parts[i].strip());
                }
                catch (final NumberFormatException ex)
                {
                    throw new IllegalArgumentException(SHARD_CPUS_PROP + " has a non-numeric CPU: '" + parts[i] + "'");
                }
                if (resolvedShardCpus[i] < 0)
                {
                    throw new IllegalArgumentException(SHARD_CPUS_PROP + " has a negative CPU: " + resolvedShardCpus[i]);
                }
            }
        }
        if (!defaultTenant.matches("[0-9A-Za-z_.\\-]{1,64}"))
        {
            throw new IllegalArgumentException(DEFAULT_TENANT_PROP + " must be 1 to 64 characters of [0-9A-Za-z_.-]: '" + defaultTenant + "'");
        }
        if (tenantMemoryQuotaBytes <= 0)
        {
            throw new IllegalArgumentException(TENANT_MEMORY_QUOTA_BYTES_PROP + " must be positive: " + tenantMemoryQuotaBytes);
        }
        if (tenantMaxJobs < 1)
        {
            throw new IllegalArgumentException(TENANT_MAX_JOBS_PROP + " must be positive: " + tenantMaxJobs);
        }
        if (tenantOffloadSlots < 0)
        {
            throw new IllegalArgumentException(TENANT_OFFLOAD_SLOTS_PROP + " must be 0 (no limit) or positive: " + tenantOffloadSlots);
        }
        if (slotTimeoutMs < 10)
        {
            throw new IllegalArgumentException(SLOT_TIMEOUT_MS_PROP + " must be at least 10: " + slotTimeoutMs);
        }
        transport = t;
        if (joinTimeoutMs <= 0 || joinTimeoutMs > io.switchml.appliance.control.JobSpec.MAX_TIMEOUT_MS)
        {
            throw new IllegalArgumentException(JOIN_TIMEOUT_MS_PROP + " must be within 1.." +
                io.switchml.appliance.control.JobSpec.MAX_TIMEOUT_MS + ": " + joinTimeoutMs);
        }
        if (controlMaxConnections < 1 || controlMaxConnectionsPerAddress < 1 ||
            controlMaxConnectionsPerAddress > controlMaxConnections)
        {
            throw new IllegalArgumentException(CONTROL_MAX_CONNECTIONS_PROP + " and " + CONTROL_MAX_CONNECTIONS_PER_ADDRESS_PROP +
                " must be positive, the second no larger than the first: " + controlMaxConnections + ", " +
                controlMaxConnectionsPerAddress);
        }
        httpMetricsToken = httpMetricsTokenFile.isEmpty() ? null : readMetricsToken(httpMetricsTokenFile);
        if (!controlCredentialsFile.isEmpty())
        {
            try
            {
                controlCredentials = io.switchml.protocol.ControlCredentials.load(java.nio.file.Path.of(controlCredentialsFile));
            }
            catch (final IllegalArgumentException ex)
            {
                throw new IllegalArgumentException(CONTROL_CREDENTIALS_FILE_PROP + ": " + ex.getMessage(), ex);
            }
        }
        if (controlTlsKeystore.isEmpty() != controlTlsPasswordFile.isEmpty())
        {
            throw new IllegalArgumentException(CONTROL_TLS_KEYSTORE_PROP + " and " + CONTROL_TLS_PASSWORD_FILE_PROP +
                " go together: set both for TLS on the control channel, or neither");
        }
        if (!controlTlsClientCa.isEmpty() && controlTlsKeystore.isEmpty())
        {
            throw new IllegalArgumentException(CONTROL_TLS_CLIENT_CA_PROP + " needs " + CONTROL_TLS_KEYSTORE_PROP +
                ": client certificates are part of TLS");
        }
        if (!controlTlsKeystore.isEmpty())
        {
            try
            {
                controlTls = io.switchml.protocol.ControlTls.serverContext(java.nio.file.Path.of(controlTlsKeystore),
                    java.nio.file.Path.of(controlTlsPasswordFile),
                    controlTlsClientCa.isEmpty() ? null : java.nio.file.Path.of(controlTlsClientCa));
            }
            catch (final IllegalArgumentException ex)
            {
                throw new IllegalArgumentException(CONTROL_TLS_KEYSTORE_PROP + ": " + ex.getMessage(), ex);
            }
        }
        if (controlIdleTimeoutMs < 100 || controlIdleTimeoutMs > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException(CONTROL_IDLE_TIMEOUT_MS_PROP + " must be within 100.." + Integer.MAX_VALUE + ": " +
                controlIdleTimeoutMs);
        }
        if (memoryBudgetBytes <= 0)
        {
            throw new IllegalArgumentException(MEMORY_BUDGET_BYTES_PROP + " must be positive: " + memoryBudgetBytes);
        }
        if (socketBufferBytes < 65_536)
        {
            throw new IllegalArgumentException(SOCKET_BUFFER_BYTES_PROP + " must be at least 65536: " + socketBufferBytes);
        }
        if (!(lossRate >= 0.0 && lossRate < 1.0))
        {
            throw new IllegalArgumentException(LOSS_RATE_PROP + " must be within [0, 1): " + lossRate);
        }
        try
        {
            resolvedBindAddress = InetAddress.getByName(bindAddress);
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalArgumentException(BIND_ADDRESS_PROP + " cannot be resolved: '" + bindAddress + "'", ex);
        }
        if (!(resolvedBindAddress instanceof java.net.Inet4Address))
        {
            throw new IllegalArgumentException(BIND_ADDRESS_PROP + " must be an IPv4 address (the data plane identifies " +
                "members by IPv4 address and port): '" + bindAddress + "'");
        }
        return this;
    }

    private static boolean parseOnOff(final String key, final String value)
    {
        return OnOff.parse(value, () -> new IllegalArgumentException("option " + key + " must be on or off: '" + value + "'"));
    }

    private static void requirePort(final String name, final int port)
    {
        if (port < 0 || port > 65_535)
        {
            throw new IllegalArgumentException(name + " must be within 0..65535: " + port);
        }
    }

    /**
     * Print the resolved configuration, one property per line, in properties-file syntax.
     *
     * @param out to print to.
     */
    public void print(final PrintStream out)
    {
        out.println(BIND_ADDRESS_PROP + "=" + bindAddress);
        out.println(DATA_PORT_PROP + "=" + dataPort);
        out.println(CONTROL_PORT_PROP + "=" + controlPort);
        out.println(TRANSPORT_PROP + "=" + transport);
        out.println(NATIVE_BATCH_PROP + "=" + nativeBatch);
        out.println(NATIVE_IDLE_SPINS_PROP + "=" + nativeIdleSpins);
        out.println(BACKENDS_PROP + "=" + backends);
        backendOptions.forEach((backend, options) -> options.forEach(
            (name, value) -> out.println("switchml.appliance." + backend + "." + name + "=" + value)));
        out.println(MULTICAST_BASE_PROP + "=" + multicastBase);
        out.println(MULTICAST_PORT_PROP + "=" + multicastPort);
        out.println(MULTICAST_TTL_PROP + "=" + multicastTtl);
        out.println(JOIN_TIMEOUT_MS_PROP + "=" + joinTimeoutMs);
        out.println(CONTROL_MAX_CONNECTIONS_PROP + "=" + controlMaxConnections);
        out.println(CONTROL_MAX_CONNECTIONS_PER_ADDRESS_PROP + "=" + controlMaxConnectionsPerAddress);
        out.println(CONTROL_IDLE_TIMEOUT_MS_PROP + "=" + controlIdleTimeoutMs);
        out.println(CONTROL_CREDENTIALS_FILE_PROP + "=" + controlCredentialsFile);
        out.println(CONTROL_TLS_KEYSTORE_PROP + "=" + controlTlsKeystore);
        out.println(CONTROL_TLS_PASSWORD_FILE_PROP + "=" + controlTlsPasswordFile);
        out.println(CONTROL_INSECURE_PROP + "=" + controlInsecure);
        out.println(CONTROL_TLS_CLIENT_CA_PROP + "=" + controlTlsClientCa);
        out.println(MEMORY_BUDGET_BYTES_PROP + "=" + memoryBudgetBytes);
        out.println(SOCKET_BUFFER_BYTES_PROP + "=" + socketBufferBytes);
        out.println(LOSS_RATE_PROP + "=" + lossRate);
        out.println(LOSS_SEED_PROP + "=" + lossSeed);
        out.println(DIR_PROP + "=" + dir);
        out.println(HTTP_PORT_PROP + "=" + httpPort);
        out.println(HTTP_METRICS_TOKEN_FILE_PROP + "=" + httpMetricsTokenFile);
        out.println(JOURNAL_RETAINED_CYCLES_PROP + "=" + journalRetainedCycles);
        out.println(HISTOGRAM_SNAPSHOT_INTERVAL_MS_PROP + "=" + histogramSnapshotIntervalMs);
        out.println(SHARDS_PROP + "=" + shards);
        out.println(SHARD_CPUS_PROP + "=" + shardCpus);
        out.println(DEFAULT_TENANT_PROP + "=" + defaultTenant);
        out.println(TENANT_MEMORY_QUOTA_BYTES_PROP + "=" + tenantMemoryQuotaBytes);
        out.println(TENANT_MAX_JOBS_PROP + "=" + tenantMaxJobs);
        out.println(TENANT_OFFLOAD_SLOTS_PROP + "=" + tenantOffloadSlots);
        out.println(SLOT_TIMEOUT_MS_PROP + "=" + slotTimeoutMs);
        out.println(MAC_PROP + "=" + (macEnabled ? "on" : "off"));
        out.println(REHEARSAL_PROP + "=" + (rehearsal ? "on" : "off"));
    }

    public ApplianceContext dir(final String dir)
    {
        this.dir = dir;
        return this;
    }

    public String dir()
    {
        return dir;
    }

    public int journalRetainedCycles()
    {
        return journalRetainedCycles;
    }

    public ApplianceContext journalRetainedCycles(final int journalRetainedCycles)
    {
        this.journalRetainedCycles = journalRetainedCycles;
        return this;
    }

    public long histogramSnapshotIntervalMs()
    {
        return histogramSnapshotIntervalMs;
    }

    public ApplianceContext histogramSnapshotIntervalMs(final long histogramSnapshotIntervalMs)
    {
        this.histogramSnapshotIntervalMs = histogramSnapshotIntervalMs;
        return this;
    }

    public ApplianceContext httpPort(final int httpPort)
    {
        this.httpPort = httpPort;
        return this;
    }

    public int httpPort()
    {
        return httpPort;
    }

    /**
     * @param file a file (mode 600) holding the token {@code /metrics} requires; null or empty: none.
     */
    public ApplianceContext httpMetricsTokenFile(final String file)
    {
        this.httpMetricsTokenFile = file == null ? "" : file;
        return this;
    }

    public String httpMetricsTokenFile()
    {
        return httpMetricsTokenFile;
    }

    /**
     * @return the token {@code /metrics} requires, read by {@link #conclude()}; null: none.
     */
    public String httpMetricsToken()
    {
        return httpMetricsToken;
    }

    private static String readMetricsToken(final String file)
    {
        try
        {
            return io.switchml.protocol.SecretFiles.readToken(java.nio.file.Path.of(file), "metrics token file",
                io.switchml.protocol.SecretFiles.MAX_TOKEN_CHARS);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(HTTP_METRICS_TOKEN_FILE_PROP + ": " + ex.getMessage(), ex);
        }
        catch (final java.io.IOException ex)
        {
            throw new IllegalArgumentException(HTTP_METRICS_TOKEN_FILE_PROP + ": cannot read " + file + ": " + ex, ex);
        }
    }

    public ApplianceContext shards(final int shards)
    {
        this.shards = shards;
        return this;
    }

    public int shards()
    {
        return shards;
    }

    public ApplianceContext shardCpus(final String shardCpus)
    {
        this.shardCpus = shardCpus;
        return this;
    }

    /**
     * @return the CPU of each shard after {@link #conclude()}, empty when unpinned.
     */
    public int[] resolvedShardCpus()
    {
        return resolvedShardCpus.clone();
    }

    public ApplianceContext defaultTenant(final String defaultTenant)
    {
        this.defaultTenant = defaultTenant;
        return this;
    }

    public String defaultTenant()
    {
        return defaultTenant;
    }

    public ApplianceContext tenantMemoryQuotaBytes(final long tenantMemoryQuotaBytes)
    {
        this.tenantMemoryQuotaBytes = tenantMemoryQuotaBytes;
        return this;
    }

    public long tenantMemoryQuotaBytes()
    {
        return tenantMemoryQuotaBytes;
    }

    public ApplianceContext tenantMaxJobs(final int tenantMaxJobs)
    {
        this.tenantMaxJobs = tenantMaxJobs;
        return this;
    }

    public int tenantMaxJobs()
    {
        return tenantMaxJobs;
    }

    public ApplianceContext tenantOffloadSlots(final long tenantOffloadSlots)
    {
        this.tenantOffloadSlots = tenantOffloadSlots;
        return this;
    }

    public long tenantOffloadSlots()
    {
        return tenantOffloadSlots;
    }

    public ApplianceContext slotTimeoutMs(final long slotTimeoutMs)
    {
        this.slotTimeoutMs = slotTimeoutMs;
        return this;
    }

    public long slotTimeoutMs()
    {
        return slotTimeoutMs;
    }

    public ApplianceContext macEnabled(final boolean macEnabled)
    {
        this.macEnabled = macEnabled;
        return this;
    }

    public boolean macEnabled()
    {
        return macEnabled;
    }

    public ApplianceContext rehearsal(final boolean rehearsal)
    {
        this.rehearsal = rehearsal;
        return this;
    }

    public boolean rehearsal()
    {
        return rehearsal;
    }

    public ApplianceContext bindAddress(final String bindAddress)
    {
        this.bindAddress = bindAddress;
        return this;
    }

    public InetAddress resolvedBindAddress()
    {
        return resolvedBindAddress;
    }

    public ApplianceContext dataPort(final int dataPort)
    {
        this.dataPort = dataPort;
        return this;
    }

    public int dataPort()
    {
        return dataPort;
    }

    public ApplianceContext controlPort(final int controlPort)
    {
        this.controlPort = controlPort;
        return this;
    }

    public int controlPort()
    {
        return controlPort;
    }

    public ApplianceContext transport(final String transport)
    {
        this.transport = transport;
        return this;
    }

    public String transport()
    {
        return transport;
    }

    public ApplianceContext nativeBatch(final int nativeBatch)
    {
        this.nativeBatch = nativeBatch;
        return this;
    }

    public int nativeBatch()
    {
        return nativeBatch;
    }

    public ApplianceContext nativeIdleSpins(final int nativeIdleSpins)
    {
        this.nativeIdleSpins = nativeIdleSpins;
        return this;
    }

    public int nativeIdleSpins()
    {
        return nativeIdleSpins;
    }

    /**
     * @param backends comma-separated preference list, see {@link #BACKENDS_PROP}.
     */
    public ApplianceContext backends(final String backends)
    {
        this.backends = backends;
        return this;
    }

    /**
     * @return the preference list, in order.
     */
    public java.util.List<String> backendList()
    {
        return io.switchml.appliance.backend.Backends.parseList(backends);
    }

    /**
     * Set an option of an offload backend ({@code switchml.appliance.NAME.OPTION}).
     */
    public ApplianceContext backendOption(final String backend, final String option, final String value)
    {
        backendOptions.computeIfAbsent(backend, b -> new java.util.TreeMap<>()).put(option, value);
        return this;
    }

    /**
     * @return the options of a backend with the prefix removed; empty when none were given.
     */
    public java.util.Map<String, String> backendOptions(final String backend)
    {
        return java.util.Map.copyOf(backendOptions.getOrDefault(backend, java.util.Map.of()));
    }

    public ApplianceContext multicastBase(final String multicastBase)
    {
        this.multicastBase = multicastBase;
        return this;
    }

    public String multicastBase()
    {
        return multicastBase;
    }

    /**
     * @return whether completed results are multicast, after {@link #conclude()}.
     */
    public boolean multicastEnabled()
    {
        return resolvedMulticastBase != 0;
    }

    /**
     * @return the first group address in host order (first octet most significant) after
     * {@link #conclude()}, 0 when multicast is off.
     */
    public int resolvedMulticastBase()
    {
        return resolvedMulticastBase;
    }

    public ApplianceContext multicastPort(final int multicastPort)
    {
        this.multicastPort = multicastPort;
        return this;
    }

    public int multicastPort()
    {
        return multicastPort;
    }

    public ApplianceContext multicastTtl(final int multicastTtl)
    {
        this.multicastTtl = multicastTtl;
        return this;
    }

    public int multicastTtl()
    {
        return multicastTtl;
    }

    public ApplianceContext joinTimeoutMs(final long joinTimeoutMs)
    {
        this.joinTimeoutMs = joinTimeoutMs;
        return this;
    }

    public long joinTimeoutMs()
    {
        return joinTimeoutMs;
    }

    /**
     * @param maxConnections           control connections in total.
     * @param maxConnectionsPerAddress control connections from one client address.
     * @param idleTimeoutMs            how long a connection that holds no job may stay without a complete line.
     */
    public ApplianceContext controlLimits(final int maxConnections, final int maxConnectionsPerAddress, final long idleTimeoutMs)
    {
        this.controlMaxConnections = maxConnections;
        this.controlMaxConnectionsPerAddress = maxConnectionsPerAddress;
        this.controlIdleTimeoutMs = idleTimeoutMs;
        return this;
    }

    /**
     * @param file the control plane's credentials file; null or empty turns authorization off.
     */
    public ApplianceContext controlCredentialsFile(final String file)
    {
        this.controlCredentialsFile = file == null ? "" : file;
        return this;
    }

    public String controlCredentialsFile()
    {
        return controlCredentialsFile;
    }

    /**
     * @param keystore     PKCS12 keystore of the control endpoint's certificate and key; null or empty: plain TCP.
     * @param passwordFile file holding the keystore's password.
     */
    public ApplianceContext controlTls(final String keystore, final String passwordFile)
    {
        this.controlTlsKeystore = keystore == null ? "" : keystore;
        this.controlTlsPasswordFile = passwordFile == null ? "" : passwordFile;
        return this;
    }

    /**
     * @param insecure true to allow {@code switchml appliance} a plain-TCP control channel.
     */
    public ApplianceContext controlInsecure(final boolean insecure)
    {
        this.controlInsecure = insecure;
        return this;
    }

    public boolean controlInsecure()
    {
        return controlInsecure;
    }

    private static boolean parseBoolean(final String option, final String value)
    {
        return switch (value.strip())
        {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException(option + " must be true or false: " + value);
        };
    }

    /**
     * @param clientCa PEM file that control clients' certificates must chain to (mutual TLS); null or empty: none.
     */
    public ApplianceContext controlTlsClientCa(final String clientCa)
    {
        this.controlTlsClientCa = clientCa == null ? "" : clientCa;
        return this;
    }

    public boolean controlTlsClientAuth()
    {
        return !controlTlsClientCa.isEmpty();
    }

    public String controlTlsKeystore()
    {
        return controlTlsKeystore;
    }

    /**
     * @return the control endpoint's TLS context made at {@code conclude()}, or null for plain TCP.
     */
    public javax.net.ssl.SSLContext controlTlsContext()
    {
        return controlTls;
    }

    /**
     * @return the credentials read at {@code conclude()}, or null when authorization is off.
     */
    public io.switchml.protocol.ControlCredentials controlCredentials()
    {
        return controlCredentials;
    }

    public io.switchml.appliance.control.ControlServer.Limits controlLimits()
    {
        return new io.switchml.appliance.control.ControlServer.Limits(controlMaxConnections, controlMaxConnectionsPerAddress,
            controlIdleTimeoutMs);
    }

    public ApplianceContext memoryBudgetBytes(final long memoryBudgetBytes)
    {
        this.memoryBudgetBytes = memoryBudgetBytes;
        return this;
    }

    public long memoryBudgetBytes()
    {
        return memoryBudgetBytes;
    }

    public ApplianceContext socketBufferBytes(final int socketBufferBytes)
    {
        this.socketBufferBytes = socketBufferBytes;
        return this;
    }

    public int socketBufferBytes()
    {
        return socketBufferBytes;
    }

    public ApplianceContext lossRate(final double lossRate)
    {
        this.lossRate = lossRate;
        return this;
    }

    public double lossRate()
    {
        return lossRate;
    }

    public ApplianceContext lossSeed(final long lossSeed)
    {
        this.lossSeed = lossSeed;
        return this;
    }

    public long lossSeed()
    {
        return lossSeed;
    }
}
