package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;

/**
 * Configuration of a worker: where the appliance is, which job and rank, the slot geometry, and the
 * retransmission policy. {@link #conclude()} validates it once and fails naming the option.
 */
public final class WorkerContext
{
    /** Host of the appliance's control endpoint; the data address is the same host. */
    public static final String APPLIANCE_HOST_DEFAULT = "127.0.0.1";
    /** TCP port of the appliance's control endpoint. */
    public static final int CONTROL_PORT_DEFAULT = 7470;
    /**
     * Lanes per packet k: 8176 suits loopback: 32,744-byte datagrams, the largest of which two fit one 65,507-byte UDP
     * GSO message, so updates and results go two per send call (at 8192 every datagram went alone). Use 256 or 366 for
     * 1500-byte links, 2233 for 9000.
     */
    public static final int LANES_DEFAULT = 8176;
    /** Pool size s: packets in flight per worker. */
    public static final int SLOTS_DEFAULT = 32;
    /** Retransmission timeout before the first round-trip sample; then SRTT + 4 RTTVAR (RFC 6298). */
    public static final long RETRANSMIT_TIMEOUT_MS_DEFAULT = 20;
    /** Floor of the adaptive retransmission timeout (lowered to the initial timeout when that is smaller). */
    public static final long MIN_RETRANSMIT_TIMEOUT_MS_DEFAULT = 10;
    /** Largest retransmission timeout, also after exponential backoff. */
    public static final long MAX_RETRANSMIT_TIMEOUT_MS_DEFAULT = 500;
    /**
     * Floor of the reorder window of fast retransmission: a slot whose result is still missing this long
     * (or SRTT / 4 when that is longer) after the result of a packet sent later on the same shard arrived
     * is resent without waiting for its retransmission timer.
     */
    public static final long REORDER_WINDOW_US_DEFAULT = 250;
    /** Floor added to 2 SRTT in the tail-loss probe timeout: see {@link #fastRetransmit(boolean)}. */
    public static final long PROBE_TIMEOUT_US_DEFAULT = 1_000;
    /** An all-reduce that receives no result for this long fails with an error. */
    public static final long PROGRESS_TIMEOUT_MS_DEFAULT = 10_000;
    /** How long to wait for every rank to join. */
    public static final long JOIN_TIMEOUT_MS_DEFAULT = 60_000;
    /** Requested SO_RCVBUF and SO_SNDBUF of the data socket. */
    public static final int SOCKET_BUFFER_BYTES_DEFAULT = 4 << 20;
    /**
     * All-reduce calls that may be submitted and not yet finished before a submitting thread waits
     * (rounded up to a power of two): the length of each I/O agent's queue and window.
     */
    public static final int MAX_PENDING_ALL_REDUCES_DEFAULT = 1024;
    /** System property: the default of {@link #transport}: auto, native or nio. */
    public static final String TRANSPORT_PROP = "switchml.worker.transport";
    /** System property: idle duty cycles an I/O agent spins (polling its sockets) before it yields. */
    public static final String IDLE_SPINS_PROP = "switchml.worker.idle.spins";
    public static final int IDLE_SPINS_DEFAULT = 4;
    /** System property: idle duty cycles an I/O agent yields the CPU before it blocks in its selector. */
    public static final String IDLE_YIELDS_PROP = "switchml.worker.idle.yields";
    public static final int IDLE_YIELDS_DEFAULT = 2;
    /**
     * System property: the longest an idle I/O agent sleeps to read several results at once while its slots are in
     * flight ({@link ResultCoalescing}); 0 blocks in the selector for every result.
     */
    public static final String IDLE_COALESCE_MAX_US_PROP = "switchml.worker.idle.coalesce.max.us";
    public static final int IDLE_COALESCE_MAX_US_DEFAULT = 500;
    /** Longest coalescing sleep accepted (a sleep never crosses a loss-recovery timer either). */
    public static final int MAX_IDLE_COALESCE_US = (int)(ResultCoalescing.MAX_SLEEP_NS / 1000);

    private String applianceHost = APPLIANCE_HOST_DEFAULT;
    private int controlPort = CONTROL_PORT_DEFAULT;
    private String jobName;
    private String tenant = "default";
    private String backend = io.switchml.protocol.ControlProtocol.BACKEND_AUTO;
    private String token;
    private boolean macEnabled = true;
    private long slotTimeoutMs;
    private int worldSize = -1;
    private int rank = -1;
    private byte elementType = ElementType.FLOAT32;
    private int lanes = LANES_DEFAULT;
    private int slots = SLOTS_DEFAULT;
    private long retransmitTimeoutMs = RETRANSMIT_TIMEOUT_MS_DEFAULT;
    private long minRetransmitTimeoutMs = MIN_RETRANSMIT_TIMEOUT_MS_DEFAULT;
    private long maxRetransmitTimeoutMs = MAX_RETRANSMIT_TIMEOUT_MS_DEFAULT;
    private long progressTimeoutMs = PROGRESS_TIMEOUT_MS_DEFAULT;
    private boolean fastRetransmit = true;
    private io.switchml.worker.transport.TransportKind transport =
        io.switchml.worker.transport.TransportKind.parse(System.getProperty(TRANSPORT_PROP, "auto"));
    private boolean gso = true;
    private boolean gro = true;
    private String credential;
    private String tlsCa;
    private String tlsKeystore;
    private String tlsPasswordFile;
    private LossRecovery.Factory lossRecovery = AdaptiveLossRecovery::new;
    private long reorderWindowUs = REORDER_WINDOW_US_DEFAULT;
    private long probeTimeoutUs = PROBE_TIMEOUT_US_DEFAULT;
    private long joinTimeoutMs = JOIN_TIMEOUT_MS_DEFAULT;
    private boolean warmUpUntilFirstCall;
    private int socketBufferBytes = SOCKET_BUFFER_BYTES_DEFAULT;
    private int maxPendingAllReduces = MAX_PENDING_ALL_REDUCES_DEFAULT;
    private double lossRate;
    private long lossSeed = 1;
    private int idleSpins = Integer.getInteger(IDLE_SPINS_PROP, IDLE_SPINS_DEFAULT);
    private int idleYields = Integer.getInteger(IDLE_YIELDS_PROP, IDLE_YIELDS_DEFAULT);
    private int idleCoalesceMaxUs = Integer.getInteger(IDLE_COALESCE_MAX_US_PROP, IDLE_COALESCE_MAX_US_DEFAULT);

    /**
     * Validate every option.
     *
     * @return this for a fluent API.
     * @throws IllegalArgumentException naming the first bad option.
     */
    public WorkerContext conclude()
    {
        if (worldSize < 1 || worldSize > DataHeaderFlyweight.MAX_WORKERS)
        {
            throw new IllegalArgumentException("world size must be within 1.." + DataHeaderFlyweight.MAX_WORKERS + ": " + worldSize);
        }
        if (rank < 0 || rank >= worldSize)
        {
            throw new IllegalArgumentException("rank must be within 0.." + (worldSize - 1) + ": " + rank);
        }
        if (jobName == null || !jobName.matches("[0-9A-Za-z_.\\-]{1,128}"))
        {
            throw new IllegalArgumentException("job name must be 1 to 128 characters of [0-9A-Za-z_.-]: " + jobName);
        }
        if (!tenant.matches("[0-9A-Za-z_.\\-]{1,64}"))
        {
            throw new IllegalArgumentException("tenant must be 1 to 64 characters of [0-9A-Za-z_.-]: " + tenant);
        }
        if (backend == null || !backend.matches("[a-z][a-z0-9_\\-]{0,31}"))
        {
            throw new IllegalArgumentException("backend must be auto or a backend's name (software, xdp, tofino): " + backend);
        }
        if (token == null || !token.matches("[0-9A-Za-z_\\-]{8,128}"))
        {
            throw new IllegalArgumentException("job token is required: 8 to 128 characters of [0-9A-Za-z_-], the same on every rank");
        }
        if (!ElementType.isValid(elementType))
        {
            throw new IllegalArgumentException("element type must be int32, float32, float16 or bfloat16: " + elementType);
        }
        if (slotTimeoutMs < 0)
        {
            throw new IllegalArgumentException("slot timeout must not be negative: " + slotTimeoutMs);
        }
        if (lanes < 1 || lanes > DataHeaderFlyweight.MAX_ELEMENTS)
        {
            throw new IllegalArgumentException("k (lanes) must be within 1.." + DataHeaderFlyweight.MAX_ELEMENTS + ": " + lanes);
        }
        if (slots < 1 || slots > 65_536)
        {
            throw new IllegalArgumentException("s (slots) must be within 1..65536: " + slots);
        }
        if (minRetransmitTimeoutMs < 1 || retransmitTimeoutMs < 1 ||
            maxRetransmitTimeoutMs < retransmitTimeoutMs || maxRetransmitTimeoutMs < minRetransmitTimeoutMs)
        {
            throw new IllegalArgumentException("retransmit timeouts must be >= 1 ms and the minimum and initial ones " +
                "<= the maximum: min " + minRetransmitTimeoutMs + ", initial " + retransmitTimeoutMs + ", max " +
                maxRetransmitTimeoutMs);
        }
        if (reorderWindowUs < 0 || probeTimeoutUs < 0)
        {
            throw new IllegalArgumentException("reorder window and probe timeout must not be negative: " +
                reorderWindowUs + " us, " + probeTimeoutUs + " us");
        }
        if (idleSpins < 0 || idleYields < 0)
        {
            throw new IllegalArgumentException(IDLE_SPINS_PROP + " and " + IDLE_YIELDS_PROP + " must not be negative: " +
                idleSpins + ", " + idleYields);
        }
        if (idleCoalesceMaxUs < 0 || idleCoalesceMaxUs > MAX_IDLE_COALESCE_US)
        {
            throw new IllegalArgumentException(IDLE_COALESCE_MAX_US_PROP + " must be 0 (off) to " + MAX_IDLE_COALESCE_US +
                " us: " + idleCoalesceMaxUs);
        }
        if (progressTimeoutMs < 1 || joinTimeoutMs < 1)
        {
            throw new IllegalArgumentException("progress and join timeouts must be positive");
        }
        if (controlPort < 1 || controlPort > 65_535)
        {
            throw new IllegalArgumentException("control port must be within 1..65535: " + controlPort);
        }
        if (maxPendingAllReduces < 1 || maxPendingAllReduces > 1 << 20)
        {
            throw new IllegalArgumentException("max pending all-reduces must be within 1.." + (1 << 20) + ": " +
                maxPendingAllReduces);
        }
        if (!(lossRate >= 0.0 && lossRate < 1.0))
        {
            throw new IllegalArgumentException("loss rate must be within [0, 1): " + lossRate);
        }
        return this;
    }

    public String applianceHost()
    {
        return applianceHost;
    }

    public WorkerContext applianceHost(final String applianceHost)
    {
        this.applianceHost = applianceHost;
        return this;
    }

    public int controlPort()
    {
        return controlPort;
    }

    public WorkerContext controlPort(final int controlPort)
    {
        this.controlPort = controlPort;
        return this;
    }

    public String jobName()
    {
        return jobName;
    }

    /**
     * @param jobName the job's name: every rank of a job uses the same name, tenant and token; the
     *                first rank to arrive creates the job.
     */
    public WorkerContext jobName(final String jobName)
    {
        this.jobName = jobName;
        return this;
    }

    public String tenant()
    {
        return tenant;
    }

    public WorkerContext tenant(final String tenant)
    {
        this.tenant = tenant;
        return this;
    }

    public String backend()
    {
        return backend;
    }

    /**
     * @param backend where the appliance aggregates the job: {@link io.switchml.protocol.ControlProtocol#BACKEND_AUTO} (its preference list, falling
     *                back with a reason it reports) or a backend's name (software, xdp, tofino): the job is
     *                refused, naming why, when that backend cannot take it, and a rank that asks for a backend
     *                other than the one its job already runs on is refused too.
     */
    public WorkerContext backend(final String backend)
    {
        this.backend = backend;
        return this;
    }

    public String token()
    {
        return token;
    }

    /**
     * @param token shared secret of the job's ranks; a rank without it cannot join.
     */
    public WorkerContext token(final String token)
    {
        this.token = token;
        return this;
    }

    public boolean macEnabled()
    {
        return macEnabled;
    }

    /**
     * @param macEnabled whether data packets carry a SipHash-2-4 MAC (default on); off for a trusted rack.
     */
    public WorkerContext macEnabled(final boolean macEnabled)
    {
        this.macEnabled = macEnabled;
        return this;
    }

    public long slotTimeoutMs()
    {
        return slotTimeoutMs;
    }

    /**
     * @param slotTimeoutMs how long the appliance lets a slot stay partly filled before it aborts the
     *                      job naming the missing ranks; 0 takes the appliance's default.
     */
    public WorkerContext slotTimeoutMs(final long slotTimeoutMs)
    {
        this.slotTimeoutMs = slotTimeoutMs;
        return this;
    }

    public int worldSize()
    {
        return worldSize;
    }

    public WorkerContext worldSize(final int worldSize)
    {
        this.worldSize = worldSize;
        return this;
    }

    public int rank()
    {
        return rank;
    }

    public WorkerContext rank(final int rank)
    {
        this.rank = rank;
        return this;
    }

    public byte elementType()
    {
        return elementType;
    }

    public WorkerContext elementType(final byte elementType)
    {
        this.elementType = elementType;
        return this;
    }

    public int lanes()
    {
        return lanes;
    }

    public WorkerContext lanes(final int lanes)
    {
        this.lanes = lanes;
        return this;
    }

    public int slots()
    {
        return slots;
    }

    public WorkerContext slots(final int slots)
    {
        this.slots = slots;
        return this;
    }

    public long retransmitTimeoutMs()
    {
        return retransmitTimeoutMs;
    }

    public WorkerContext retransmitTimeoutMs(final long retransmitTimeoutMs)
    {
        this.retransmitTimeoutMs = retransmitTimeoutMs;
        return this;
    }

    public long minRetransmitTimeoutMs()
    {
        return minRetransmitTimeoutMs;
    }

    public WorkerContext minRetransmitTimeoutMs(final long minRetransmitTimeoutMs)
    {
        this.minRetransmitTimeoutMs = minRetransmitTimeoutMs;
        return this;
    }

    public long maxRetransmitTimeoutMs()
    {
        return maxRetransmitTimeoutMs;
    }

    public WorkerContext maxRetransmitTimeoutMs(final long maxRetransmitTimeoutMs)
    {
        this.maxRetransmitTimeoutMs = maxRetransmitTimeoutMs;
        return this;
    }

    public io.switchml.worker.transport.TransportKind transport()
    {
        return transport;
    }

    /**
     * @param transport the agents' packet I/O: native, nio or auto (native where available).
     */
    public WorkerContext transport(final io.switchml.worker.transport.TransportKind transport)
    {
        this.transport = java.util.Objects.requireNonNull(transport, "transport");
        return this;
    }

    public LossRecovery.Factory lossRecovery()
    {
        return lossRecovery;
    }

    /**
     * @param lossRecovery the loss recovery policy of each I/O agent (default {@link AdaptiveLossRecovery}).
     */
    public WorkerContext lossRecovery(final LossRecovery.Factory lossRecovery)
    {
        this.lossRecovery = java.util.Objects.requireNonNull(lossRecovery, "lossRecovery");
        return this;
    }

    /**
     * @return the PEM file of certificates the appliance's control endpoint is verified against (TLS), or null for
     * plain TCP.
     */
    public String tlsCa()
    {
        return tlsCa;
    }

    /**
     * @param keystore     PKCS12 keystore of this worker's client certificate, for an appliance that requires one
     *                     (mutual TLS); null or empty: none.
     * @param passwordFile file holding its password.
     */
    public WorkerContext tlsClientCertificate(final String keystore, final String passwordFile)
    {
        this.tlsKeystore = keystore == null || keystore.isEmpty() ? null : keystore;
        this.tlsPasswordFile = passwordFile == null || passwordFile.isEmpty() ? null : passwordFile;
        return this;
    }

    public String tlsKeystore()
    {
        return tlsKeystore;
    }

    public String tlsPasswordFile()
    {
        return tlsPasswordFile;
    }

    /**
     * @param tlsCa PEM file of the appliance's certificate or its CA: the control connection uses TLS and checks the
     *              appliance's name; null or empty for plain TCP.
     */
    public WorkerContext tlsCa(final String tlsCa)
    {
        this.tlsCa = tlsCa == null || tlsCa.isEmpty() ? null : tlsCa;
        return this;
    }

    /**
     * @return the secret sent as {@code auth=} with the CREATE, or null.
     */
    public String credential()
    {
        return credential;
    }

    /**
     * @param credential the tenant's (or an operator's) control-plane secret, needed to create a job on an appliance
     *                   with authorization on; null for none.
     */
    public WorkerContext credential(final String credential)
    {
        if (credential != null && !io.switchml.protocol.ControlCredentials.isSecret(credential))
        {
            throw new IllegalArgumentException("a credential is 16 to 128 characters of [0-9A-Za-z_-]");
        }
        this.credential = credential;
        return this;
    }

    public boolean gso()
    {
        return gso;
    }

    /**
     * @param gso false to send every datagram on its own even with the native transport.
     */
    public WorkerContext gso(final boolean gso)
    {
        this.gso = gso;
        return this;
    }

    public boolean gro()
    {
        return gro;
    }

    /**
     * @param gro false to receive every datagram on its own even with the native transport.
     */
    public WorkerContext gro(final boolean gro)
    {
        this.gro = gro;
        return this;
    }

    public boolean fastRetransmit()
    {
        return fastRetransmit;
    }

    /**
     * Recover losses before the retransmission timer, as TCP's RACK and tail-loss probe do, without
     * resending what the appliance already has: each shard numbers its transmissions, and a slot still
     * waiting a reorder window after the result of a packet sent after it has arrived is suspect (its
     * update or its result was lost, or another rank's update was). The agent then sends a 40-byte probe
     * naming the update; the appliance answers with the result from the shadow copy if the slot completed,
     * with a NACK if it has not got this rank's update (the agent resends it at once), or with a PENDING if
     * it holds the update and waits for another rank (nothing is resent). When no result at all
     * arrives for 2 SRTT plus the probe timeout (plus min(10 ms, the minimum RTO) for a stream's only update
     * before its first result), the newest outstanding update is probed, again at doubling intervals until a result
     * arrives. None of this backs off the retransmission timer, which stays as the fallback. On by default.
     *
     * @param fastRetransmit false to recover losses by the retransmission timer alone (the paper's scheme).
     * @return this for a fluent API.
     */
    public WorkerContext fastRetransmit(final boolean fastRetransmit)
    {
        this.fastRetransmit = fastRetransmit;
        return this;
    }

    public long reorderWindowUs()
    {
        return reorderWindowUs;
    }

    public WorkerContext reorderWindowUs(final long reorderWindowUs)
    {
        this.reorderWindowUs = reorderWindowUs;
        return this;
    }

    public long probeTimeoutUs()
    {
        return probeTimeoutUs;
    }

    public WorkerContext probeTimeoutUs(final long probeTimeoutUs)
    {
        this.probeTimeoutUs = probeTimeoutUs;
        return this;
    }

    public long progressTimeoutMs()
    {
        return progressTimeoutMs;
    }

    public WorkerContext progressTimeoutMs(final long progressTimeoutMs)
    {
        this.progressTimeoutMs = progressTimeoutMs;
        return this;
    }

    public long joinTimeoutMs()
    {
        return joinTimeoutMs;
    }

    public WorkerContext joinTimeoutMs(final long joinTimeoutMs)
    {
        this.joinTimeoutMs = joinTimeoutMs;
        return this;
    }

    public boolean warmUpUntilFirstCall()
    {
        return warmUpUntilFirstCall;
    }

    /**
     * @param warmUpUntilFirstCall true: the join completes without waiting for the data path's warm-up, which goes on
     *                             in the background until the first call stops it (an agent whose readiness gates a
     *                             training process's own start-up: {@code worker serve}); false (default): the join
     *                             waits for its grace (a program that calls at once after connecting). See
     *                             {@link DataPathWarmUp}.
     */
    public WorkerContext warmUpUntilFirstCall(final boolean warmUpUntilFirstCall)
    {
        this.warmUpUntilFirstCall = warmUpUntilFirstCall;
        return this;
    }

    public int socketBufferBytes()
    {
        return socketBufferBytes;
    }

    public WorkerContext socketBufferBytes(final int socketBufferBytes)
    {
        this.socketBufferBytes = socketBufferBytes;
        return this;
    }

    public int maxPendingAllReduces()
    {
        return maxPendingAllReduces;
    }

    /**
     * @param maxPendingAllReduces calls submitted and not finished before a submitting thread waits.
     */
    public WorkerContext maxPendingAllReduces(final int maxPendingAllReduces)
    {
        this.maxPendingAllReduces = maxPendingAllReduces;
        return this;
    }

    public double lossRate()
    {
        return lossRate;
    }

    public WorkerContext lossRate(final double lossRate)
    {
        this.lossRate = lossRate;
        return this;
    }

    public long lossSeed()
    {
        return lossSeed;
    }

    public WorkerContext lossSeed(final long lossSeed)
    {
        this.lossSeed = lossSeed;
        return this;
    }

    /** @param idleSpins idle duty cycles an I/O agent spins before it yields (default {@value #IDLE_SPINS_DEFAULT}). */
    public WorkerContext idleSpins(final int idleSpins)
    {
        this.idleSpins = idleSpins;
        return this;
    }

    public int idleSpins()
    {
        return idleSpins;
    }

    /** @param idleYields idle duty cycles an I/O agent yields before it blocks (default {@value #IDLE_YIELDS_DEFAULT}). */
    public WorkerContext idleYields(final int idleYields)
    {
        this.idleYields = idleYields;
        return this;
    }

    public int idleYields()
    {
        return idleYields;
    }

    /**
     * @param idleCoalesceMaxUs the longest an idle I/O agent sleeps to read several results at once, 0 (off) to
     *                          {@value #MAX_IDLE_COALESCE_US} (default {@value #IDLE_COALESCE_MAX_US_DEFAULT}).
     */
    public WorkerContext idleCoalesceMaxUs(final int idleCoalesceMaxUs)
    {
        this.idleCoalesceMaxUs = idleCoalesceMaxUs;
        return this;
    }

    public int idleCoalesceMaxUs()
    {
        return idleCoalesceMaxUs;
    }
}
