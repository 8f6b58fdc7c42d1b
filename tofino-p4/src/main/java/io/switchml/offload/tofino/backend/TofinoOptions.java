package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.BackendException;
import io.switchml.offload.tofino.JobInstaller;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The options of the {@code tofino} and {@code tofino-model} backends ({@code switchml.appliance.tofino.*}),
 * checked at start-up; every error names the option.
 * <ul>
 *     <li>{@code switch}: host:port of the switch's P4Runtime server (bf_switchd, Stratum). Required for
 *     {@code tofino}; for {@code tofino-model} absent means an embedded model behind a P4Runtime server on
 *     loopback, reached over TCP like a switch.</li>
 *     <li>{@code device-id} (1), {@code election-id} (1): P4Runtime arbitration.</li>
 *     <li>{@code registers}: slots of the register arrays this appliance may use (each holds both pool versions;
 *     all the program has, 2048, by default).</li>
 *     <li>{@code multicast-groups}: the range of PRE multicast group ids this appliance may use, {@code first-last}
 *     (1-1024), within 1..{@link JobInstaller#MAX_GROUP} (a replica's 16-bit replication id is group * 32 + rank: a
 *     higher group would alias another's replicas).</li>
 *     <li>{@code ports}: which switch port each worker host is on, {@code 10.0.0.1=1,10.0.0.2=2}; required for
 *     {@code tofino}, where results are replicated to those ports; {@code tofino-model} numbers members' hosts
 *     itself when absent.</li>
 *     <li>{@code timeout-ms} (2000): deadline of every P4Runtime call.</li>
 *     <li>{@code pipeline-config}: file holding the compiled program's device config (bf-p4c's output, in the
 *     form the switch's P4Runtime server takes) to push with SetForwardingPipelineConfig; absent: the switch must
 *     already run the program, whose P4Info is read back and matched with ours by name (a compiler's pipeline
 *     prefix and ids are fine; a missing or different table, action, parameter or register is refused naming it).</li>
 *     <li>{@code tls-ca}: PEM file of the certificate (or its CA) of the switch's P4Runtime server: the session uses
 *     TLS and verifies it (the certificate must name the switch's host); absent: plaintext gRPC.
 *     {@code tls-keystore} and {@code tls-password-file}: a PKCS12 keystore and its password, for a server that
 *     requires a client certificate. Only for {@code tofino}: the model's server is in-process on loopback.</li>
 *     <li>{@code p4info}: with {@code pipeline-config}, required for {@code tofino}: the compiler's P4Info of that
 *     program (bf-p4c {@code --p4runtime-files}, text or binary), pushed with it and checked against ours at start-up;
 *     its ids are the ones the compiled program knows.</li>
 * </ul>
 */
record TofinoOptions(
    String switchAddress,
    int switchPort,
    long deviceId,
    long electionId,
    int registers,
    int firstGroup,
    int lastGroup,
    Map<Integer, Integer> hostPorts,
    long timeoutMs,
    String pipelineConfig,
    String p4info,
    String tlsCa,
    String tlsKeystore,
    String tlsPasswordFile)
{
    static final Set<String> NAMES = Set.of("switch", "device-id", "election-id", "registers", "multicast-groups", "ports",
        "timeout-ms", "pipeline-config", "p4info", "tls-ca", "tls-keystore", "tls-password-file");

    static TofinoOptions parse(
        final Map<String, String> options, final String prefix, final boolean model, final int registerCapacity) throws BackendException
    {
        for (final String option : options.keySet())
        {
            if (!NAMES.contains(option))
            {
                throw new BackendException("unknown option " + prefix + option + " (known: " +
                    String.join(", ", NAMES.stream().sorted().toList()) + ")");
            }
        }
        String host = null;
        int port = 0;
        final String address = options.get("switch");
        if (address != null && !address.isBlank())
        {
            final int colon = address.lastIndexOf(':');
            if (colon <= 0)
            {
                throw new BackendException(prefix + "switch must be host:port (the switch's P4Runtime server): '" + address + "'");
            }
            host = address.substring(0, colon).strip();
            port = parseInt(prefix + "switch", address.substring(colon + 1), 1, 65535);
        }
        else if (!model)
        {
            throw new BackendException(prefix + "switch is required: host:port of the switch's P4Runtime server");
        }
        final long deviceId = parseLong(prefix + "device-id", options.getOrDefault("device-id", "1"), 0, Long.MAX_VALUE);
        final long electionId = parseLong(prefix + "election-id", options.getOrDefault("election-id", "1"), 1, Long.MAX_VALUE);
        final int registers = parseInt(prefix + "registers", options.getOrDefault("registers", Integer.toString(registerCapacity)),
            1, registerCapacity);
        final String groups = options.getOrDefault("multicast-groups", "1-1024");
        final int dash = groups.indexOf('-');
        if (dash <= 0)
        {
            throw new BackendException(prefix + "multicast-groups must be first-last: '" + groups + "'");
        }
        final int first = parseInt(prefix + "multicast-groups", groups.substring(0, dash), 1, JobInstaller.MAX_GROUP);
        final int last = parseInt(prefix + "multicast-groups", groups.substring(dash + 1), first, JobInstaller.MAX_GROUP);
        final Map<Integer, Integer> hostPorts = parsePorts(prefix + "ports", options.get("ports"));
        if (!model && hostPorts.isEmpty())
        {
            throw new BackendException(prefix + "ports is required: which switch port each worker host is on (10.0.0.1=1,...)");
        }
        final long timeoutMs = parseLong(prefix + "timeout-ms", options.getOrDefault("timeout-ms", "2000"), 10, 600_000);
        final String pipelineConfig = options.get("pipeline-config");
        final String p4info = options.get("p4info");
        if (p4info != null && pipelineConfig == null)
        {
            throw new BackendException(prefix + "p4info is used only with " + prefix + "pipeline-config (without it the " +
                "switch's own P4Info is read back and checked)");
        }
        if (pipelineConfig != null && p4info == null && !model)
        {
            throw new BackendException(prefix + "pipeline-config needs " + prefix + "p4info: the compiler's P4Info of that " +
                "program (bf-p4c --p4runtime-files), whose ids the compiled program uses");
        }
        final String tlsCa = options.get("tls-ca");
        final String tlsKeystore = options.get("tls-keystore");
        final String tlsPasswordFile = options.get("tls-password-file");
        if (model && (tlsCa != null || tlsKeystore != null || tlsPasswordFile != null))
        {
            throw new BackendException(prefix + "tls-* apply to a switch's P4Runtime server (the tofino backend); the model's " +
                "server is in-process on loopback");
        }
        if (tlsCa == null && tlsKeystore != null)
        {
            throw new BackendException(prefix + "tls-keystore needs " + prefix + "tls-ca: the certificate that the switch's " +
                "P4Runtime server must present");
        }
        if ((tlsKeystore == null) != (tlsPasswordFile == null))
        {
            throw new BackendException(prefix + "tls-keystore and " + prefix + "tls-password-file go together");
        }
        return new TofinoOptions(host, port, deviceId, electionId, registers, first, last, hostPorts, timeoutMs,
            pipelineConfig, p4info, tlsCa, tlsKeystore, tlsPasswordFile);
    }

    private static Map<Integer, Integer> parsePorts(final String option, final String value) throws BackendException
    {
        if (value == null || value.isBlank())
        {
            return Map.of();
        }
        final Map<Integer, Integer> ports = new HashMap<>();
        for (final String pair : List.of(value.split(",")))
        {
            final int equals = pair.indexOf('=');
            if (equals <= 0)
            {
                throw new BackendException(option + " must be host=port pairs separated by commas: '" + pair.strip() + "'");
            }
            final String host = pair.substring(0, equals).strip();
            final int ipv4;
            try
            {
                final byte[] bytes = InetAddress.getByName(host).getAddress();
                if (bytes.length != 4)
                {
                    throw new BackendException(option + ": " + host + " is not an IPv4 address");
                }
                ipv4 = ((bytes[0] & 0xFF) << 24) | ((bytes[1] & 0xFF) << 16) | ((bytes[2] & 0xFF) << 8) | (bytes[3] & 0xFF);
            }
            catch (final UnknownHostException ex)
            {
                throw new BackendException(option + ": unknown host " + host);
            }
            ports.put(ipv4, parseInt(option, pair.substring(equals + 1), 0, 511));
        }
        return Collections.unmodifiableMap(ports);
    }

    private static int parseInt(final String option, final String value, final int min, final int max) throws BackendException
    {
        final long parsed = parseLong(option, value, min, max);
        return (int)parsed;
    }

    private static long parseLong(final String option, final String value, final long min, final long max) throws BackendException
    {
        try
        {
            final long parsed = Long.parseLong(value.strip());
            if (parsed < min || parsed > max)
            {
                throw new BackendException(option + " must be within " + min + ".." + max + ": " + parsed);
            }
            return parsed;
        }
        catch (final NumberFormatException ex)
        {
            throw new BackendException(option + " is not an integer: '" + value + "'");
        }
    }
}
