package io.switchml.worker;

import picocli.CommandLine.Option;

/**
 * Command-line options shared by {@code worker run}, {@code worker bench} and {@code worker serve}: where
 * the appliance is, the data-plane shape of the job, and loss recovery. A picocli mixin; {@link #applyTo}
 * copies them into a {@link WorkerContext}, whose {@link WorkerContext#conclude()} validates them.
 */
public final class TransportOptions
{
    @Option(names = "--appliance", description = "Appliance host (default ${DEFAULT-VALUE}).", defaultValue = "127.0.0.1")
    private String applianceHost;

    @Option(names = "--control-port", description = "Appliance control port (default ${DEFAULT-VALUE}).", defaultValue = "7470")
    private int controlPort;

    @Option(names = "--tenant", description = "Tenant the job belongs to (default ${DEFAULT-VALUE}).", defaultValue = "default")
    private String tenant;

    @Option(names = "--backend", description = "Where the appliance aggregates the job: auto (its preference list; a job " +
        "that does not get the first choice is told why) or a backend's name: software, xdp (its SmartNIC/XDP offload), " +
        "tofino; a named backend that cannot take the job refuses it, naming why (default: $SWITCHML_BACKEND, else auto).",
        defaultValue = "${env:SWITCHML_BACKEND:-auto}")
    private String backend;

    @Option(names = "--mac", description = "on: data packets carry a SipHash-2-4 MAC; off: trusted rack (default ${DEFAULT-VALUE}).",
        defaultValue = "on")
    private String mac;

    @Option(names = "--slot-timeout-ms", description = "Abort the job when a slot stays partly filled this long (default: the appliance's).",
        defaultValue = "0")
    private long slotTimeoutMs;

    @Option(names = {"-k", "--lanes"}, description = "Elements per packet (default ${DEFAULT-VALUE}: two datagrams fit one UDP GSO " +
        "message on loopback).", defaultValue = "8176")
    private int lanes;

    @Option(names = {"-s", "--slots"}, description = "Pool size, packets in flight (default ${DEFAULT-VALUE}).", defaultValue = "32")
    private int slots;

    @Option(names = "--rto-ms", description = "Initial retransmission timeout (default ${DEFAULT-VALUE}).", defaultValue = "20")
    private long rtoMs;

    @Option(names = "--fast-retransmit", description = "on: probe the appliance about a slot once later packets' results " +
        "show it missing (or the stream goes quiet), and resend the update when it answers with a NACK; off: the " +
        "retransmission timer alone, as in the paper (default ${DEFAULT-VALUE}).",
        defaultValue = "on")
    private String fastRetransmit;

    @Option(names = "--reorder-window-us", description = "Floor of the wait between seeing a hole and probing it; the " +
        "window is max(this, SRTT/4) (default ${DEFAULT-VALUE}).", defaultValue = "" + WorkerContext.REORDER_WINDOW_US_DEFAULT)
    private long reorderWindowUs;

    @Option(names = "--probe-timeout-us", description = "Added to 2 SRTT in the tail-loss probe timeout (for a " +
        "stream's only update before its first result, min(10 ms, the minimum RTO) more) (default ${DEFAULT-VALUE}).", defaultValue = "" + WorkerContext.PROBE_TIMEOUT_US_DEFAULT)
    private long probeTimeoutUs;

    @Option(names = "--transport", description = "Packet I/O of the worker's agents (default: the system property switchml.worker.transport, else auto): native (Linux: sendmmsg with UDP " +
        "GSO, recvmmsg, through FFM), nio (DatagramChannel, one datagram per system call, any platform) or auto " +
        "(native where available; the choice and any reason for NIO are printed at start-up).")
    private String transport;

    @Option(names = "--gso", description = "on: the native transport sends a burst of equal-size updates as one UDP " +
        "GSO message (default ${DEFAULT-VALUE}).", defaultValue = "on")
    private String gso;

    @Option(names = "--gro", description = "on: the native transport takes a burst of results the appliance sent as " +
        "one GSO message as one coalesced buffer (UDP GRO) and splits it itself (default ${DEFAULT-VALUE}).",
        defaultValue = "on")
    private String gro;

    @Option(names = "--credential-file", description = "Control-plane credentials file (lines 'tenant NAME SECRET' or " +
        "'operator NAME SECRET'): the line of --tenant, else an operator's, is sent with the CREATE; needed when the " +
        "appliance has authorization on (default: $SWITCHML_CREDENTIAL_FILE; $SWITCHML_CREDENTIAL may hold the secret " +
        "itself instead).", defaultValue = "${env:SWITCHML_CREDENTIAL_FILE}")
    private String credentialFile;

    @Option(names = "--tls-ca", description = "PEM file of the appliance's certificate (or its CA): the control " +
        "connection uses TLS and verifies the appliance (default: $SWITCHML_TLS_CA; none: plain TCP).",
        defaultValue = "${env:SWITCHML_TLS_CA}")
    private String tlsCa;

    @Option(names = "--tls-keystore", description = "PKCS12 keystore of this worker's client certificate, for an appliance " +
        "that requires one (default: $SWITCHML_TLS_KEYSTORE).", defaultValue = "${env:SWITCHML_TLS_KEYSTORE}")
    private String tlsKeystore;

    @Option(names = "--tls-password-file", description = "File holding the --tls-keystore password (default: " +
        "$SWITCHML_TLS_PASSWORD_FILE).", defaultValue = "${env:SWITCHML_TLS_PASSWORD_FILE}")
    private String tlsPasswordFile;

    @Option(names = "--progress-timeout-ms", description = "Fail an all-reduce when no result arrives for this long " +
        "(default ${DEFAULT-VALUE}).", defaultValue = "10000")
    private long progressTimeoutMs;

    public int lanes()
    {
        return lanes;
    }

    public int slots()
    {
        return slots;
    }

    public String tenant()
    {
        return tenant;
    }

    /**
     * @return the secret from --credential-file (the tenant's line, else an operator's) or $SWITCHML_CREDENTIAL, or null.
     * @throws IllegalArgumentException naming the file when it has none that fits.
     */
    public String credential()
    {
        if (credentialFile != null && !credentialFile.isEmpty())
        {
            return io.switchml.protocol.ControlCredentials.secretFor(java.nio.file.Path.of(credentialFile),
                io.switchml.protocol.ControlCredentials.TENANT, tenant);
        }
        final String secret = System.getenv("SWITCHML_CREDENTIAL");
        return secret == null || secret.isEmpty() ? null : secret;
    }

    public boolean fastRetransmit()
    {
        return onOff("--fast-retransmit", fastRetransmit);
    }

    public boolean macEnabled()
    {
        return onOff("--mac", mac);
    }

    /**
     * Copy the options into a context.
     *
     * @return the context, for a fluent API.
     * @throws IllegalArgumentException naming an on/off option with another value.
     */
    public WorkerContext applyTo(final WorkerContext context)
    {
        if (transport != null)
        {
            // else the context's default, which reads the system property
            context.transport(io.switchml.worker.transport.TransportKind.parse(transport));
        }
        return context.applianceHost(applianceHost).controlPort(controlPort).tenant(tenant).backend(backend)
            .macEnabled(macEnabled())
            .slotTimeoutMs(slotTimeoutMs).lanes(lanes).slots(slots).retransmitTimeoutMs(rtoMs)
            .fastRetransmit(fastRetransmit()).reorderWindowUs(reorderWindowUs)
            .probeTimeoutUs(probeTimeoutUs).progressTimeoutMs(progressTimeoutMs)
            .gso(onOff("--gso", gso)).gro(onOff("--gro", gro))
            .credential(credential()).tlsCa(tlsCa).tlsClientCertificate(tlsKeystore, tlsPasswordFile);
    }

    /**
     * @return true for "on", false for "off".
     * @throws IllegalArgumentException naming the option for anything else.
     */
    public static boolean onOff(final String option, final String value)
    {
        return switch (value)
        {
            case "on" -> true;
            case "off" -> false;
            default -> throw new IllegalArgumentException(option + " must be on or off: " + value);
        };
    }
}
