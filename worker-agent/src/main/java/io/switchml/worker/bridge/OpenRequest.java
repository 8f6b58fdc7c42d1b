package io.switchml.worker.bridge;

import io.switchml.protocol.ControlProtocol;
import io.switchml.worker.TransportOptions;
import io.switchml.worker.WorkerContext;

import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * A host agent's {@code OPEN} line ({@link HostAgent}) turned into the configuration of the session's bridge: the host
 * agent's own options first, then the job's fields the client may set, each checked and named when bad.
 */
final class OpenRequest
{
    /** The fields {@code OPEN} may carry. */
    static final Set<String> OPEN_FIELDS = Set.of("", "job", "rank", "world", "token", "appliance", "controlPort",
        "backend", "k", "s", "mac", "shmBytes", "joinTimeoutMs", "int32", "tenant", "localRank", "localWorld",
        "slotTimeoutMs", "progressTimeoutMs");

    /** Longest slot timeout an OPEN may ask for (the appliance's limit); a progress timeout may be twice as long. */
    static final long MAX_TIMEOUT_MS = 3_600_000;

    /**
     * The bridge configuration for one {@code OPEN}: the host's options, then the client's job fields.
     *
     * @param open        the parsed line.
     * @param hostOptions a fresh context with the host agent's options, per call.
     * @param maxShmBytes the most shared memory a session may ask for.
     * @param pipelineDepth requests the client may have outstanding.
     * @param shmPath     the session's shared-memory file.
     * @param maxLocalWorld the most ranks of a job a group may sum on this host (the agent's session limit).
     * @throws IllegalArgumentException naming the first bad or unknown field.
     */
    static BridgeContext context(final Map<String, String> open, final Supplier<WorkerContext> hostOptions,
        final long maxShmBytes, final int pipelineDepth, final Path shmPath, final int maxLocalWorld)
    {
        if (!HostAgent.OPEN.equals(open.get("")))
        {
            throw new IllegalArgumentException("expected OPEN job=... rank=... world=... token=..., got '" +
                open.get("") + "'");
        }
        for (final String key : open.keySet())
        {
            if (!OPEN_FIELDS.contains(key))
            {
                throw new IllegalArgumentException("unknown OPEN field '" + key + "'; known: job, rank, world, token, " +
                    "appliance, controlPort, backend, k, s, mac, shmBytes, joinTimeoutMs, int32, tenant, localRank, localWorld, " +
                    "slotTimeoutMs, progressTimeoutMs");
            }
        }
        final WorkerContext worker = hostOptions.get();
        final WorkerContext own = hostOptions.get();
        final String tenant = open.get("tenant");
        if (tenant != null && !tenant.equals(own.tenant()))
        {
            // a check, not a choice: the tenant (and its credential) is the agent's
            throw new IllegalArgumentException("this host agent serves tenant " + own.tenant() + ", not " + tenant +
                " (its --tenant)");
        }
        final String job = ControlProtocol.requiredField(open, "job");
        worker.jobName(job).token(open.get("token")).worldSize(ControlProtocol.intField(open, "world"))
            .rank(ControlProtocol.intField(open, "rank"));
        final String appliance = open.get("appliance");
        if (appliance != null)
        {
            final int colon = appliance.lastIndexOf(':');
            worker.applianceHost(colon < 0 ? appliance : appliance.substring(0, colon));
            if (colon >= 0)
            {
                worker.controlPort(port(appliance.substring(colon + 1), "appliance"));
            }
        }
        if (open.containsKey("controlPort"))
        {
            worker.controlPort(port(open.get("controlPort"), "controlPort"));
        }
        final boolean elsewhere = !worker.applianceHost().equals(own.applianceHost()) || worker.controlPort() != own.controlPort();
        if (elsewhere && worker.credential() != null && worker.tlsCa() == null)
        {
            // the CREATE carries the tenant's credential: only to the agent's own appliance, or to one its TLS verifies
            throw new IllegalArgumentException("OPEN may not name another appliance: this host agent sends its " +
                "tenant's credential with every job and has no --tls-ca to verify an appliance it did not choose");
        }
        if (open.containsKey("backend"))
        {
            worker.backend(open.get("backend"));
        }
        // the agent's k, s and join timeout are the most a session may ask: a session's packet buffers (k x s) and
        // the time it holds a session slot while its job waits for peers are what one client can make the agent spend
        if (open.containsKey("k"))
        {
            worker.lanes(atMost(ControlProtocol.intField(open, "k"), own.lanes(), "k", "-k"));
        }
        if (open.containsKey("s"))
        {
            worker.slots(atMost(ControlProtocol.intField(open, "s"), own.slots(), "s", "-s"));
        }
        if (open.containsKey("mac"))
        {
            worker.macEnabled(TransportOptions.onOff("mac", open.get("mac")));
        }
        if (open.containsKey("joinTimeoutMs"))
        {
            final long joinTimeoutMs = BridgeContext.requireJoinTimeoutMs(longField(open, "joinTimeoutMs"), "joinTimeoutMs");
            worker.joinTimeoutMs(atMost(joinTimeoutMs, own.joinTimeoutMs(), "joinTimeoutMs", "--join-timeout-ms"));
        }
        // how long the job waits for a late rank: the training framework's own collective timeout (torch's
        // process-group timeout), so that a rank busy between steps is waited for as its framework would wait
        if (open.containsKey("slotTimeoutMs"))
        {
            worker.slotTimeoutMs(timeoutField(open, "slotTimeoutMs", 10, MAX_TIMEOUT_MS));
        }
        if (open.containsKey("progressTimeoutMs"))
        {
            worker.progressTimeoutMs(timeoutField(open, "progressTimeoutMs", 1, 2 * MAX_TIMEOUT_MS));
        }
        final long shmBytes = open.containsKey("shmBytes") ? longField(open, "shmBytes") :
            Math.min(BridgeContext.SHM_BYTES_DEFAULT, maxShmBytes);
        if (shmBytes > maxShmBytes)
        {
            throw new IllegalArgumentException("shmBytes " + shmBytes + " exceeds this host agent's --max-shm-bytes " +
                maxShmBytes);
        }
        worker.conclude();
        final boolean int32 = !open.containsKey("int32") || TransportOptions.onOff("int32", open.get("int32"));
        final WorkerContext int32Worker = int32 ? BridgeContext.int32JobOf(worker, hostOptions.get()) : null;
        if (open.containsKey("localRank") != open.containsKey("localWorld"))
        {
            throw new IllegalArgumentException("OPEN needs localRank and localWorld together (or neither)");
        }
        final int localWorld = open.containsKey("localWorld") ? ControlProtocol.intField(open, "localWorld") : 1;
        final int localRank = open.containsKey("localRank") ? ControlProtocol.intField(open, "localRank") : 0;
        if (localWorld < 1 || localWorld > maxLocalWorld)
        {
            throw new IllegalArgumentException("localWorld must be 1.." + maxLocalWorld + " (this host agent's " +
                "--max-sessions): " + localWorld);
        }
        return new BridgeContext().worker(worker).int32Worker(int32Worker).pipelineDepth(pipelineDepth)
            .shmPath(shmPath).shmBytes(shmBytes).local(localRank, localWorld).conclude();
    }

    private static long timeoutField(final Map<String, String> open, final String field, final long minimum,
        final long maximum)
    {
        final long value = longField(open, field);
        if (value < minimum || value > maximum)
        {
            throw new IllegalArgumentException(field + " must be " + minimum + ".." + maximum + ": " + value);
        }
        return value;
    }

    private static int atMost(final long value, final long limit, final String field, final String option)
    {
        if (value > limit)
        {
            throw new IllegalArgumentException(field + " " + value + " exceeds this host agent's " + option + " " + limit);
        }
        return (int)Math.min(Integer.MAX_VALUE, value);
    }

    private static int port(final String value, final String field)
    {
        try
        {
            final int port = Integer.parseInt(value);
            if (port >= 1 && port <= 65535)
            {
                return port;
            }
        }
        catch (final NumberFormatException ignore)
        {
            // reported below
        }
        throw new IllegalArgumentException(field + " port must be 1..65535: '" + value + "'");
    }

    private static long longField(final Map<String, String> open, final String key)
    {
        try
        {
            return Long.parseLong(open.get(key));
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("field '" + key + "' is not an integer: '" + open.get(key) + "'");
        }
    }

    private OpenRequest()
    {
    }
}
