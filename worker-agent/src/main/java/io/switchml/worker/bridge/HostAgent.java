package io.switchml.worker.bridge;

import io.switchml.protocol.ControlProtocol;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * One long-lived worker agent for every training process of a host ({@code switchml worker host}): a process that
 * joins each rank's job on request and serves it as a {@link BridgeServer#hosted hosted bridge}, so that the ranks
 * and jobs of a host share one JVM whose data path was compiled once, at the agent's start, instead of starting a
 * cold JVM per rank and job.
 * <p>
 * A training process connects to the host socket and sends one line
 * <pre>
 * OPEN job=NAME rank=R world=W token=TOKEN [appliance=HOST[:PORT]] [controlPort=PORT] [backend=NAME] [k=K] [s=S]
 *      [mac=on|off] [shmBytes=N] [joinTimeoutMs=MS] [int32=on|off] [tenant=NAME] [localRank=L localWorld=N]
 * </pre>
 * The agent joins the job (blocking until every rank has joined, as {@code worker serve} does) and answers with the
 * bridge's {@code INFO} reply ({@code OK version=2 shm=...}), or {@code ERR message=...} naming the bad field or the
 * refusal, and closes the connection. After {@code OK} the connection is a {@link BridgeProtocol} session of that
 * rank; when it ends the agent leaves the job and deletes the shared memory. A session lost without {@code CLOSE}
 * aborts the job naming the rank, as a {@code worker serve --once} agent does. The tenant, credentials, TLS and packet
 * I/O are the host agent's own options, never a client's ({@code tenant=} is checked against the agent's, not
 * chosen); and a client may name another appliance only when the agent holds no credential or verifies the appliance
 * with TLS (the CREATE carries the credential).
 * <p>
 * With {@code localWorld} above 1 the rank is one of N ranks of its job on this host (torchrun's
 * {@code LOCAL_RANK} and {@code LOCAL_WORLD_SIZE}): the agent waits for all N, sums their tensors here and sends the sum
 * to the appliance as one worker of the job ({@link LocalGroup}), so the host's link carries one copy instead of N.
 * <p>
 * Limits on what a client can make it do: {@code OPEN} within {@link #OPEN_TIMEOUT_MS}, a line of
 * {@link BridgeProtocol#MAX_LINE_BYTES} at most, at most {@code maxSessions} sessions at once and
 * {@code maxShmBytes} of shared memory each. The socket and the sessions' shared-memory files are mode 0660: the
 * training processes are members of the agent's group.
 */
public final class HostAgent implements AutoCloseable
{
    /** The verb that opens a session. */
    public static final String OPEN = "OPEN";
    /** How long a new connection has to send its {@code OPEN} line. */
    public static final long OPEN_TIMEOUT_MS = 10_000;
    private static final Logger LOG = LoggerFactory.getLogger(HostAgent.class);

    private final Supplier<WorkerContext> hostOptions;
    private final Path socketPath;
    private final Path shmDir;
    private final int maxSessions;
    private final long maxShmBytes;
    private final int pipelineDepth;
    private final ServerSocketChannel acceptor;
    private final ScheduledExecutorService openTimeouts;
    private final Set<BridgeServer> sessions = ConcurrentHashMap.newKeySet();
    private final Set<SocketChannel> connections = ConcurrentHashMap.newKeySet();
    /**
     * Groups of a job's ranks on this host, by job name and token digest (a rank without the job's token cannot take
     * a place in its group); guarded by itself; those that formed or failed are dropped at the next grouped OPEN.
     */
    private final Map<String, LocalGroup> groups = new java.util.HashMap<>();
    private final java.util.concurrent.atomic.AtomicInteger active = new java.util.concurrent.atomic.AtomicInteger();
    private final AtomicLong sequence = new AtomicLong();
    private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();
    private final AtomicLong opened = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private volatile boolean closed;
    private volatile long exitAfterSessions;
    private volatile long localChunkBytes = LocalRounds.CHUNK_BYTES;

    private HostAgent(final Supplier<WorkerContext> hostOptions, final Path socketPath, final Path shmDir,
        final int maxSessions, final long maxShmBytes, final int pipelineDepth, final ServerSocketChannel acceptor)
    {
        this.hostOptions = hostOptions;
        this.socketPath = socketPath;
        this.shmDir = shmDir;
        this.maxSessions = maxSessions;
        this.maxShmBytes = maxShmBytes;
        this.pipelineDepth = pipelineDepth;
        this.acceptor = acceptor;
        this.openTimeouts = Executors.newSingleThreadScheduledExecutor(
            runnable -> Thread.ofPlatform().daemon().name("switchml-host-open-timeouts").unstarted(runnable));
    }

    /**
     * Bind the host socket (mode 0660).
     *
     * @param hostOptions   a fresh context with the agent's own options (appliance, tenant, packet I/O, k, s ...)
     *                      applied, one per session; a client's {@code OPEN} fields then set the job.
     * @param socketPath    the host socket.
     * @param shmDir        where the sessions' shared-memory files go.
     * @param maxSessions   sessions served at once; one more is refused.
     * @param maxShmBytes   the most shared memory one session may ask for.
     * @param pipelineDepth requests a session's client may have outstanding.
     * @throws IOException naming the path when the socket cannot be bound (or another agent serves it).
     */
    public static HostAgent bind(final Supplier<WorkerContext> hostOptions, final Path socketPath, final Path shmDir,
        final int maxSessions, final long maxShmBytes, final int pipelineDepth) throws IOException
    {
        if (maxSessions < 1 || maxSessions > 4096)
        {
            throw new IllegalArgumentException("--max-sessions must be 1..4096: " + maxSessions);
        }
        if (maxShmBytes < BridgeContext.SHM_BYTES_MIN || maxShmBytes % Float.BYTES != 0)
        {
            throw new IllegalArgumentException("--max-shm-bytes must be a positive multiple of 4: " + maxShmBytes);
        }
        if (!Files.isDirectory(shmDir))
        {
            throw new IllegalArgumentException("--shm-dir " + shmDir + " is not a directory");
        }
        final Path socket = BridgeContext.requireSocketPath(socketPath);
        return new HostAgent(hostOptions, socket, shmDir.toAbsolutePath(), maxSessions, maxShmBytes, pipelineDepth,
            BridgeServer.bind(socket, "rw-rw----", "agent"));
    }

    /**
     * @return the host socket.
     */
    public Path socketPath()
    {
        return socketPath;
    }

    /**
     * @param chunkBytes bytes of a local group's sum submitted at a time (tests make several chunks of small tensors).
     */
    void localChunkBytes(final long chunkBytes)
    {
        this.localChunkBytes = chunkBytes;
    }

    /**
     * Close the agent once {@code count} sessions have been opened and none is open any more: an agent started for
     * one job's ranks on this host ({@code worker host --exit-after-sessions}) ends with the last of them.
     *
     * @param count sessions to serve; 0 (the default) serves until {@link #close()}.
     */
    public void closeAfterSessions(final long count)
    {
        if (count < 0)
        {
            throw new IllegalArgumentException("--exit-after-sessions must be 0 or more: " + count);
        }
        exitAfterSessions = count;
    }

    /**
     * @return sessions open now.
     */
    public int sessions()
    {
        return active.get();
    }

    /**
     * @return sessions opened (joined) since start.
     */
    public long opened()
    {
        return opened.get();
    }

    /**
     * @return {@code OPEN}s refused since start (bad fields, a refused join, the session limit).
     */
    public long refused()
    {
        return refused.get();
    }

    /**
     * Accept connections until {@link #close()}, each served on its own thread; at most {@link #maxConnections()} at
     * once (sessions and connections still to send their {@code OPEN}), one more is refused at once.
     *
     * @return true when it ended because of {@link #close()}, false when the socket failed.
     */
    public boolean serve()
    {
        while (!closed)
        {
            final SocketChannel channel;
            try
            {
                channel = acceptor.accept();
            }
            catch (final IOException ex)
            {
                if (closed)
                {
                    break;
                }
                LOG.error("host socket {} failed: {}", socketPath, ex.toString());
                return false;
            }
            if (connections.size() >= maxConnections())
            {
                refuse(channel, "busy: this host agent has " + maxConnections() + " connections open (--max-sessions " +
                    maxSessions + ", twice as many connections)");
                BridgeSession.closeQuietly(channel);
                continue;
            }
            connections.add(channel);
            try
            {
                Thread.ofPlatform().name("switchml-host-session-" + sequence.incrementAndGet()).start(() -> run(channel));
            }
            catch (final OutOfMemoryError ex)
            {
                // no thread for it (the unit's task limit): refuse this one, go on serving the others
                connections.remove(channel);
                refuse(channel, "busy: this host agent cannot start a thread for another session");
                BridgeSession.closeQuietly(channel);
            }
        }
        return true;
    }

    /**
     * @return connections served at once: twice {@code maxSessions}, so that clients still sending their OPEN or
     * refused ones cannot crowd out sessions, and idle connections cannot take the process's descriptors or threads.
     */
    public int maxConnections()
    {
        return 2 * maxSessions;
    }

    private void run(final SocketChannel channel)
    {
        final BridgeSession.LineReader reader = new BridgeSession.LineReader(channel);
        BridgeServer server = null;
        boolean reserved = false;
        try
        {
            final String line = readOpen(channel, reader);
            if (line == null)
            {
                return;
            }
            final Map<String, String> open;
            final BridgeContext context;
            try
            {
                open = ControlProtocol.parse(line);
                // an unguessable name: /dev/shm is everyone's, and a file planted under the next name would refuse it
                context = OpenRequest.context(open, hostOptions, maxShmBytes, pipelineDepth, shmDir.resolve(
                    "switchml-host-" + ProcessHandle.current().pid() + "-" + Long.toHexString(RANDOM.nextLong()) + ".shm"),
                    maxSessions);
            }
            catch (final IllegalArgumentException ex)
            {
                refuse(channel, ex.getMessage());
                return;
            }
            if (active.incrementAndGet() > maxSessions)
            {
                active.decrementAndGet();
                refuse(channel, "busy: this host agent serves " + maxSessions + " sessions already (--max-sessions)");
                return;
            }
            reserved = true;
            final WorkerContext worker = context.worker();
            final String who = "rank " + worker.rank() + " of job " + worker.jobName();
            try
            {
                server = BridgeServer.hosted(context, linkOf(context));
                sessions.add(server);
                if (closed)
                {
                    refuse(channel, "the host agent is stopping");
                    return;
                }
                LOG.info("joining {} (world {}) at {}:{} for a client", who, worker.worldSize(), worker.applianceHost(),
                    worker.controlPort());
                server.join();
            }
            catch (final IOException | RuntimeException ex)
            {
                refuse(channel, ex.getMessage());
                LOG.warn("refused {}: {}", who, ex.getMessage());
                return;
            }
            opened.incrementAndGet();
            LOG.info("serving {}: {}; backend {}", who, server.transportDescription(), server.placementDescription());
            try
            {
                BridgeSession.write(channel, server.info());
            }
            catch (final IOException ex)
            {
                // gone while the job was joined (it gave up waiting, or died): its peers learn which rank
                server.onClientLost();
                return;
            }
            server.serveHosted(channel, reader);
            LOG.info("session of {} ended after {} all-reduce requests", who, server.requests());
        }
        catch (final IOException ignore)
        {
            // the client went away; its session, if any, ends below
        }
        finally
        {
            // the job is left before the client sees the connection close, so that it may join the same name again
            if (server != null)
            {
                server.close();
                sessions.remove(server);
            }
            final int stillActive = reserved ? active.decrementAndGet() : active.get();
            BridgeSession.closeQuietly(channel);
            connections.remove(channel);
            final long exitAfter = exitAfterSessions;
            if (exitAfter > 0 && stillActive == 0 && opened.get() >= exitAfter && !closed)
            {
                LOG.info("the last of {} sessions ended: closing (--exit-after-sessions)", exitAfter);
                close();
            }
        }
    }

    /**
     * A rank's way to its job: its own client, or, with {@code localWorld} above 1, a member of the group of its
     * job's ranks on this host (the group is started by the first of them).
     *
     * @throws IllegalArgumentException when the group refuses the rank (taken, disagreeing, or failed).
     */
    private JobLink linkOf(final BridgeContext context)
    {
        final WorkerContext worker = context.worker();
        if (context.localWorld() == 1)
        {
            return new DirectLink(worker, context.int32Worker());
        }
        synchronized (groups)
        {
            // groups that formed (or failed to) are forgotten: a later rank of that name starts a new one
            groups.values().removeIf(LocalGroup::settled);
            final String key = worker.jobName() + " " + tokenDigest(worker.token());
            LocalGroup group = groups.get(key);
            if (group == null)
            {
                final WorkerContext nodeJob = BridgeContext.nodeJobOf(worker, hostOptions.get(), context.localWorld())
                    .conclude();
                final WorkerContext int32NodeJob = context.int32Worker() == null ? null :
                    BridgeContext.int32JobOf(nodeJob, hostOptions.get()).conclude();
                group = new LocalGroup(context, new DirectLink(nodeJob, int32NodeJob), localChunkBytes);
                groups.put(key, group);
            }
            return group.add(context);
        }
    }

    private static String tokenDigest(final String token)
    {
        try
        {
            return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                .digest(String.valueOf(token).getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        }
        catch (final java.security.NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("SHA-256 is every JDK's", ex);
        }
    }

    /**
     * @return groups of ranks still forming (for tests).
     */
    int groupsForming()
    {
        synchronized (groups)
        {
            return (int)groups.values().stream().filter(group -> !group.settled()).count();
        }
    }

    private String readOpen(final SocketChannel channel, final BridgeSession.LineReader reader) throws IOException
    {
        final ScheduledFuture<?> timeout = openTimeouts.schedule(() -> BridgeSession.closeQuietly(channel), OPEN_TIMEOUT_MS,
            TimeUnit.MILLISECONDS);
        try
        {
            return reader.readLine();
        }
        catch (final IOException ex)
        {
            // an over-long line: say so, then drop what the client still sends, so that it reads the refusal and not a
            // reset (a Unix socket closed with unread data resets the peer); the timeout above bounds the wait
            refuse(channel, ex.getMessage());
            drain(channel);
            return null;
        }
        finally
        {
            timeout.cancel(false);
        }
    }

    private void refuse(final SocketChannel channel, final String message)
    {
        refused.incrementAndGet();
        BridgeSession.writeQuietly(channel, BridgeProtocol.error(message));
    }

    private static void drain(final SocketChannel channel)
    {
        final java.nio.ByteBuffer sink = java.nio.ByteBuffer.allocate(BridgeProtocol.MAX_LINE_BYTES);
        try
        {
            channel.shutdownOutput();
            for (int dropped = 0; dropped < 16 * BridgeProtocol.MAX_LINE_BYTES; )
            {
                sink.clear();
                final int read = channel.read(sink);
                if (read < 0)
                {
                    return;
                }
                dropped += read;
            }
        }
        catch (final IOException ignore)
        {
            // closed by the timeout or the client
        }
    }

    /**
     * Stop accepting, end every session (leaving its job), and delete the socket. Safe to call more than once and
     * from a shutdown hook.
     */
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        BridgeServer.closeAcceptor(acceptor, socketPath);
        sessions.forEach(BridgeServer::close);
        connections.forEach(BridgeSession::closeQuietly);
        openTimeouts.shutdownNow();
    }
}
