package io.switchml.appliance.control;

import io.switchml.protocol.BuildInfo;
import io.switchml.protocol.ControlCredentials;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.OnOff;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * TCP control endpoint. Workers create and join jobs and leave them; operators list jobs, read
 * counters and abort jobs. Each connection is served by its own virtual thread. A member whose
 * connection drops without LEAVE while its job runs aborts the job, and the other members are told
 * which rank went away.
 * <p>
 * Everything a stranger can send is bounded: a line is at most {@link ControlConnection#MAX_LINE_BYTES} (a longer
 * one gets ERR and the connection is closed), a connection that holds no job membership is closed after
 * {@link Limits#idleTimeoutMs} without a complete line (however often bytes come), and so is a member's connection that
 * long after its job was aborted by someone else (it was told why in an ABORT line), connections are limited per client
 * address and in total, a message with a field its verb does not take is refused naming the field, and what a client
 * sends is quoted back at most {@link #MAX_QUOTED_CHARS} characters long. A send that a peer blocks by not reading
 * its replies is cut off after {@link #SEND_DEADLINE_MS} (the connection is closed), and the registry sends nothing
 * under its lock, so that one connection cannot hold up another tenant's requests.
 */
public final class ControlServer implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(ControlServer.class);
    /** Longest a reply or ABORT may stay blocked on a peer that does not read before its connection is closed. */
    public static final long SEND_DEADLINE_MS = 5_000;
    /** Longest quote of what a client sent (a verb, an abort reason) in a reply or in a reason others are told. */
    static final int MAX_QUOTED_CHARS = 256;

    private final ServerSocket serverSocket;
    private final JobRegistry registry;
    private final ControlDefaults defaults;
    private final int[] dataPorts;
    private final Supplier<Map<String, Long>> counters;
    private final Supplier<String> health;
    private final java.util.function.IntFunction<String> multicastGroup;
    private final Runnable joinsRefused;
    private final Runnable connectionOpened;
    private final Runnable connectionClosed;
    private final ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
    private final Thread acceptThread;
    private final Thread watchdogThread;
    private final Set<ControlConnection> live = ConcurrentHashMap.newKeySet();
    private volatile boolean running = true;

    /**
     * Bounds on what clients may hold: connections per client address and in total, and how long a connection that
     * holds no job membership may stay without sending a complete line (and a member's, once its job was aborted).
     */
    public record Limits(int maxConnections, int maxConnectionsPerAddress, long idleTimeoutMs)
    {
        public static final Limits DEFAULT = new Limits(1024, 256, 30_000);
    }

    /**
     * Appended to the refusal of a field or verb this appliance does not know: the control protocol carries no version
     * number (its verbs and fields are its version: new fields are optional, and one an older appliance does not know
     * is refused by name rather than ignored), so the refusal says which release answered, for the operator of a
     * fleet upgraded in steps.
     */
    private static final String RELEASE_NOTE = "; this appliance runs switchml " + BuildInfo.version();

    /** The fields each verb takes; any other field is refused by name. */
    private static final Map<String, Set<String>> FIELDS = Map.of(
        ControlProtocol.CREATE, Set.of("", "name", "tenant", "world", "type", "k", "s", "mac", "token", "ifAbsent",
            "slotTimeoutMs", "joinTimeoutMs", "backend", "auth"),
        ControlProtocol.JOIN, Set.of("", "job", "rank", "token", "ports"),
        ControlProtocol.HEALTH, Set.of(""),
        ControlProtocol.JOBS, Set.of("", "auth"),
        ControlProtocol.STATS, Set.of("", "auth"),
        ControlProtocol.BACKENDS, Set.of("", "auth"),
        ControlProtocol.ABORT_JOB, Set.of("", "job", "reason", "auth", "token"));

    private final Limits limits;
    private volatile ControlCredentials credentials;
    private final AtomicInteger connections = new AtomicInteger();
    private final ConcurrentHashMap<InetAddress, AtomicInteger> connectionsByAddress = new ConcurrentHashMap<>();

    /**
     * Defaults the appliance applies to a CREATE that leaves a field out.
     */
    public record ControlDefaults(String tenant, long slotTimeoutMs, long joinTimeoutMs, boolean macEnabled)
    {
    }

    /**
     * @param limits     connections and idle time allowed to clients.
     * @param tls        the TLS context of the endpoint, or null for plain TCP.
     * @param clientAuth with TLS: require a client certificate that the context's trust managers accept.
     */
    public ControlServer(
        final InetAddress bindAddress,
        final int port,
        final JobRegistry registry,
        final ControlDefaults defaults,
        final int[] dataPorts,
        final Supplier<Map<String, Long>> counters,
        final Supplier<String> health,
        final java.util.function.IntFunction<String> multicastGroup,
        final Runnable joinsRefused,
        final Runnable connectionOpened,
        final Runnable connectionClosed,
        final Limits limits,
        final javax.net.ssl.SSLContext tls,
        final boolean clientAuth) throws IOException
    {
        this.limits = limits;
        this.joinsRefused = joinsRefused;
        this.multicastGroup = multicastGroup;
        this.connectionOpened = connectionOpened;
        this.connectionClosed = connectionClosed;
        if (tls != null)
        {
            final javax.net.ssl.SSLServerSocket secure =
                (javax.net.ssl.SSLServerSocket)tls.getServerSocketFactory().createServerSocket();
            secure.setEnabledProtocols(io.switchml.protocol.ControlTls.protocols());
            secure.setNeedClientAuth(clientAuth);
            this.serverSocket = secure;
        }
        else
        {
            this.serverSocket = new ServerSocket();
        }
        serverSocket.setReuseAddress(true);
        serverSocket.bind(new InetSocketAddress(bindAddress, port), 128);
        this.registry = registry;
        this.defaults = defaults;
        this.dataPorts = dataPorts.clone();
        this.counters = counters;
        this.health = health;
        this.acceptThread = Thread.ofPlatform().daemon().name("switchml-control-accept").unstarted(this::acceptLoop);
        this.watchdogThread = Thread.ofPlatform().daemon().name("switchml-control-watchdog").unstarted(this::watchSends);
    }

    /**
     * Start taking connections, once the credentials are set ({@link #credentials}): none is served before.
     */
    public void start()
    {
        acceptThread.start();
        watchdogThread.start();
    }

    private void watchSends()
    {
        while (running)
        {
            try
            {
                Thread.sleep(SEND_DEADLINE_MS / 5);
            }
            catch (final InterruptedException ex)
            {
                return;
            }
            final long nowNs = System.nanoTime();
            for (final ControlConnection connection : live)
            {
                if (connection.closeIfSendStuck(nowNs, SEND_DEADLINE_MS * 1_000_000L))
                {
                    LOG.warn("closed the control connection from {}: it read no reply for {} ms",
                        connection.socket().getInetAddress().getHostAddress(), SEND_DEADLINE_MS);
                }
                else if (connection.closeIfMembershipEndedFor(nowNs, limits.idleTimeoutMs() * 1_000_000L))
                {
                    LOG.info("closed the control connection from {}: its job was aborted {} ms ago and it stayed open",
                        connection.socket().getInetAddress().getHostAddress(), limits.idleTimeoutMs());
                }
            }
        }
    }

    /**
     * @return text a client sent, cut to {@link #MAX_QUOTED_CHARS} characters (marked when it was longer).
     */
    static String quoted(final String text)
    {
        return text == null || text.length() <= MAX_QUOTED_CHARS ? text : text.substring(0, MAX_QUOTED_CHARS) + "...";
    }

    /**
     * Turn authorization on: CREATE, ABORTJOB, JOBS and STATS then need {@code auth=SECRET} of a credential (ABORTJOB
     * also takes the job's {@code token=}); null turns it off (anyone who reaches the port may do anything but JOIN
     * without the job's token).
     */
    public void credentials(final ControlCredentials credentials)
    {
        this.credentials = credentials;
    }

    public int port()
    {
        return serverSocket.getLocalPort();
    }

    private String dataPortList()
    {
        final StringBuilder builder = new StringBuilder();
        for (int i = 0; i < dataPorts.length; i++)
        {
            builder.append(i == 0 ? "" : ",").append(dataPorts[i]);
        }
        return builder.toString();
    }

    private void acceptLoop()
    {
        while (running)
        {
            try
            {
                final Socket socket = serverSocket.accept();
                final InetAddress address = socket.getInetAddress();
                final AtomicInteger fromAddress = connectionsByAddress.computeIfAbsent(address, a -> new AtomicInteger());
                final int total = connections.incrementAndGet();
                final int own = fromAddress.incrementAndGet();
                if (total > limits.maxConnections() || own > limits.maxConnectionsPerAddress())
                {
                    release(address, fromAddress);
                    refuse(socket, total > limits.maxConnections() ?
                        "too many control connections (limit " + limits.maxConnections() + ")" :
                        "too many control connections from " + address.getHostAddress() + " (limit " +
                            limits.maxConnectionsPerAddress() + ")");
                    continue;
                }
                executor.execute(() ->
                {
                    try
                    {
                        serve(socket);
                    }
                    finally
                    {
                        release(address, fromAddress);
                    }
                });
            }
            catch (final IOException ex)
            {
                if (running)
                {
                    LOG.warn("control endpoint accept failed: {}", ex.toString());
                }
            }
        }
    }

    private void release(final InetAddress address, final AtomicInteger fromAddress)
    {
        connections.decrementAndGet();
        if (fromAddress.decrementAndGet() == 0)
        {
            connectionsByAddress.remove(address, fromAddress);
        }
    }

    private static void refuse(final Socket socket, final String message)
    {
        if (socket instanceof javax.net.ssl.SSLSocket)
        {
            // a reply would first run the TLS handshake on the accept thread, which a client could draw out
            closeQuietly(socket);
            return;
        }
        try (socket)
        {
            socket.setSoTimeout(1000);
            final OutputStream out = socket.getOutputStream();
            out.write((ControlProtocol.ERR + " message=" + message + "\n").getBytes(StandardCharsets.UTF_8));
            out.flush();
        }
        catch (final IOException ignore)
        {
            // refused either way
        }
    }

    private static void closeQuietly(final Socket socket)
    {
        try
        {
            socket.close();
        }
        catch (final IOException ignore)
        {
            // refused either way
        }
    }

    private void serve(final Socket socket)
    {
        connectionOpened.run();
        ControlConnection watched = null;
        try (ControlConnection connection = new ControlConnection(socket))
        {
            watched = connection;
            live.add(connection);
            String line;
            while ((line = readLine(connection)) != null)
            {
                if (line.isBlank())
                {
                    continue;
                }
                try
                {
                    final Map<String, String> message = ControlProtocol.parse(line);
                    checkFields(message);
                    if (dispatch(connection, message))
                    {
                        return;
                    }
                }
                catch (final IllegalArgumentException | JobRegistry.RefusedException ex)
                {
                    if (ControlProtocol.JOIN.equals(line.strip().split(" ", 2)[0]))
                    {
                        joinsRefused.run();
                    }
                    connection.send(ControlProtocol.ERR + " message=" + ex.getMessage());
                }
                catch (final RuntimeException ex)
                {
                    LOG.warn("control request '{}' failed", quoted(line.strip().split(" ", 2)[0]), ex);
                    connection.send(ControlProtocol.ERR + " message=internal error (" + ex.getClass().getSimpleName() +
                        "); the appliance's log has it");
                }
            }
        }
        catch (final IOException ignore)
        {
            // peer went away
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        finally
        {
            if (watched != null)
            {
                live.remove(watched);
            }
            connectionClosed.run();
        }
    }

    /**
     * @return the next line, or null when the peer closed, sent an over-long line or stayed idle too long (it is told
     * why first).
     */
    private String readLine(final ControlConnection connection) throws IOException
    {
        try
        {
            return connection.readLine(limits.idleTimeoutMs());
        }
        catch (final ControlConnection.LineTooLongException ex)
        {
            connection.send(ControlProtocol.ERR + " message=" + ex.getMessage() + "; closing the connection");
            return null;
        }
        catch (final SocketTimeoutException ex)
        {
            connection.send(ControlProtocol.ERR + " message=no complete line for " + limits.idleTimeoutMs() +
                " ms; closing the connection");
            return null;
        }
    }

    /**
     * @throws IllegalArgumentException naming a field the verb does not take.
     */
    private static void checkFields(final Map<String, String> message)
    {
        final Set<String> allowed = FIELDS.get(message.get(""));
        if (allowed == null)
        {
            return;
        }
        for (final String field : message.keySet())
        {
            if (!allowed.contains(field))
            {
                throw new IllegalArgumentException("unknown field '" + field + "' for " + message.get("") +
                    " (it takes " + String.join(", ", new java.util.TreeSet<>(allowed)).replaceFirst("^, ", "") + ")" +
                    RELEASE_NOTE);
            }
        }
    }

    /**
     * @return true when the connection was handed over to a job membership and is done here.
     */
    private boolean dispatch(final ControlConnection connection, final Map<String, String> message)
        throws JobRegistry.RefusedException, InterruptedException, IOException
    {
        final ControlCredentials known = credentials;
        final ControlCredentials.Credential credential = known == null ? null : known.find(message.get("auth"));
        final String verb = message.get("");
        if (known != null && credential == null && (ControlProtocol.CREATE.equals(verb) ||
            ControlProtocol.JOBS.equals(verb) || ControlProtocol.STATS.equals(verb) || ControlProtocol.BACKENDS.equals(verb) ||
            (ControlProtocol.ABORT_JOB.equals(verb) && message.get("token") == null)))
        {
            throw new JobRegistry.RefusedException(verb + " needs a credential: auth=SECRET of an operator or of the tenant" +
                (message.containsKey("auth") ? " (the one given is not known)" : "") +
                (ControlProtocol.ABORT_JOB.equals(verb) ? ", or the job's token=" : ""));
        }
        final String tenantScope = credential == null || credential.isOperator() ? null : credential.name();
        switch (verb)
        {
            case ControlProtocol.CREATE ->
            {
                if (tenantScope != null)
                {
                    final String tenant = message.get("tenant");
                    if (tenant != null && !tenant.equals(tenantScope))
                    {
                        throw new JobRegistry.RefusedException("the credential of tenant '" + tenantScope +
                            "' cannot create jobs of tenant '" + tenant + "'");
                    }
                    message.put("tenant", tenantScope);
                }
                onCreate(connection, message);
            }
            case ControlProtocol.JOIN ->
            {
                onJoin(connection, message);
                return true;
            }
            case ControlProtocol.HEALTH -> connection.send(ControlProtocol.OK + " " + health.get());
            case ControlProtocol.JOBS ->
            {
                for (final String job : registry.describeJobs(tenantScope))
                {
                    connection.send("JOB " + job);
                }
                connection.send(ControlProtocol.END);
            }
            case ControlProtocol.BACKENDS ->
            {
                // why a backend is down names infrastructure (a switch's address, an interface): operators only
                if (tenantScope != null)
                {
                    throw new JobRegistry.RefusedException("BACKENDS takes an operator's credential");
                }
                for (final io.switchml.appliance.backend.Backend backend : registry.backends())
                {
                    final String failure = backend.health();
                    connection.send("BACKEND name=" + backend.name() + " up=" + (failure == null ? 1 : 0) +
                        (failure == null ? "" : " reason=" + failure.replace('\n', ' ').replace('\r', ' ')));
                }
                connection.send(ControlProtocol.END);
            }
            case ControlProtocol.STATS ->
            {
                final StringBuilder builder = new StringBuilder(ControlProtocol.STATS);
                counters.get().forEach((name, value) -> builder.append(' ').append(name).append('=').append(value));
                connection.send(builder.toString());
            }
            case ControlProtocol.ABORT_JOB ->
            {
                final int jobId = ControlProtocol.intField(message, "job");
                final String reason = quoted(message.getOrDefault("reason", "aborted by an operator"));
                final Job target = registry.job(jobId);
                if (known != null && !(credential != null && (tenantScope == null ||
                    (target != null && tenantScope.equals(target.tenant())))) && !(target != null && target.hasToken(message.get("token"))))
                {
                    throw new JobRegistry.RefusedException("not authorized to abort job " + jobId + ": it takes an operator's " +
                        "credential, the job's tenant's, or the job's token");
                }
                if (registry.abort(jobId, (known == null ? "aborted by an operator: " : credential == null ?
                    "aborted by a holder of its token: " : "aborted by " + credential + ": ") + reason))
                {
                    connection.send(ControlProtocol.OK + " job=" + jobId);
                }
                else
                {
                    connection.send(ControlProtocol.ERR + " message=no job " + jobId);
                }
            }
            default -> connection.send(ControlProtocol.ERR + " message=unknown verb '" + quoted(message.get("")) + "'" +
                RELEASE_NOTE);
        }
        return false;
    }

    private static long longField(final Map<String, String> message, final String key, final long defaultValue)
    {
        final String value = message.get(key);
        if (value == null)
        {
            return defaultValue;
        }
        try
        {
            return Long.parseLong(value);
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("field '" + key + "' is not an integer: '" + value + "'");
        }
    }

    private static boolean onOff(final Map<String, String> message, final String key, final boolean defaultValue)
    {
        final String value = message.get(key);
        if (value == null)
        {
            return defaultValue;
        }
        return OnOff.parse(value, () -> new IllegalArgumentException("field '" + key + "' must be on or off: '" + value + "'"));
    }

    private void onCreate(final ControlConnection connection, final Map<String, String> message)
        throws JobRegistry.RefusedException
    {
        final String type = message.getOrDefault("type", "float32");
        final JobSpec spec = new JobSpec(
            message.getOrDefault("tenant", defaults.tenant()),
            ControlProtocol.requiredField(message, "name"),
            ControlProtocol.intField(message, "world"),
            ElementType.parse(type),
            ControlProtocol.intField(message, "k"),
            ControlProtocol.intField(message, "s"),
            onOff(message, "mac", defaults.macEnabled()),
            longField(message, "slotTimeoutMs", defaults.slotTimeoutMs()),
            longField(message, "joinTimeoutMs", defaults.joinTimeoutMs()));
        final Job job = registry.create(spec, message.get("token"), onOff(message, "ifAbsent", false),
            message.getOrDefault("backend", ControlProtocol.BACKEND_AUTO));
        connection.send(ControlProtocol.OK + " job=" + job.jobId + " token=" + job.token + " shards=" + dataPorts.length +
            " dataPorts=" + dataPortList() + " backend=" + job.backendName + (job.fallback.isEmpty() ? "" : " fallback=" + job.fallback));
    }

    private void onJoin(final ControlConnection connection, final Map<String, String> message)
        throws JobRegistry.RefusedException, InterruptedException, IOException
    {
        final int jobId = ControlProtocol.intField(message, "job");
        final int rank = ControlProtocol.intField(message, "rank");
        final String[] ports = ControlProtocol.requiredField(message, "ports").split(",");
        final InetSocketAddress[] addresses = new InetSocketAddress[ports.length];
        for (int i = 0; i < ports.length; i++)
        {
            final int port;
            try
            {
                port = Integer.parseInt(ports[i]);
            }
            catch (final NumberFormatException ex)
            {
                throw new IllegalArgumentException("data port '" + ports[i] + "' is not a number");
            }
            if (port < 1 || port > 65_535)
            {
                throw new IllegalArgumentException("data port must be within 1..65535: " + port);
            }
            addresses[i] = new InetSocketAddress(connection.socket().getInetAddress(), port);
        }

        final Job job = registry.join(jobId, rank, message.get("token"), addresses, connection);
        // a member's connection is quiet while its job runs: no idle timeout from here on
        connection.socket().setSoTimeout(0);
        connection.send(ControlProtocol.OK + " job=" + job.jobId + " world=" + job.worldSize + " type=" +
            ElementType.name(job.elementType) + " k=" + job.lanes + " s=" + job.slots + " shards=" + dataPorts.length +
            " dataPorts=" + dataPortList() + " mac=" + (job.macEnabled ? "on" : "off") + " key=" +
            String.format("%016x%016x", job.macK0, job.macK1) +
            (multicastGroup.apply(job.jobId) != null ? " group=" + multicastGroup.apply(job.jobId) : "") + " backend=" + job.backendName);

        String line;
        try
        {
            while ((line = connection.readLine()) != null)
            {
                final Map<String, String> next = ControlProtocol.parse(line);
                final String verb = next.get("");
                if (ControlProtocol.LEAVE.equals(verb))
                {
                    registry.leave(job, rank);
                    return;
                }
                if (ControlProtocol.ABORT.equals(verb))
                {
                    registry.abort(job, "rank " + rank + " aborted the job: " + quoted(next.getOrDefault("reason", "no reason given")));
                    return;
                }
            }
        }
        catch (final IOException | IllegalArgumentException ignore)
        {
            // handled below as a lost connection
        }
        if (!registry.isEnded(job))
        {
            registry.abort(job, "rank " + rank + " (" + connection.socket().getInetAddress().getHostAddress() +
                ") lost its control connection");
        }
    }

    public void close()
    {
        running = false;
        try
        {
            serverSocket.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        executor.shutdownNow();
        watchdogThread.interrupt();
        try
        {
            acceptThread.join(1000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
