package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The worker agent as a local service for one training process (one rank): it joins the job at
 * start-up, then serves {@link BridgeProtocol} requests from one client at a time on a Unix-domain
 * socket, all-reducing float32 ranges of a shared-memory file in place with its {@link WorkerClient}.
 * <p>
 * The join is eager: {@link #launch} returns once every rank of the job has joined, so every rank's
 * bridge must be started before any of them can serve, and a refused join (wrong token, world size,
 * k or s) fails the bridge at start-up rather than the first training step.
 * <p>
 * A job that fails (a rank dies, the appliance goes away) makes every later request fail with the
 * {@link AllReduceException}'s message; the bridge keeps answering until it is closed.
 * <p>
 * A host agent ({@link HostAgent}) runs bridges {@link #hosted} in its own JVM: no socket of their own, one session
 * on the connection that opened them, the shared memory group-accessible, and the job left when that session ends.
 */
public final class BridgeServer implements AutoCloseable
{
    private static final long SESSION_JOIN_TIMEOUT_MS = 2_000;

    private final BridgeContext context;
    /** Null for a {@link #hosted} bridge, which serves the one connection it was opened on. */
    private final ServerSocketChannel acceptor;
    private final SharedMemoryRegion shm;
    private final JobLink link;
    private volatile boolean joined;
    private final String infoReply;
    private final AtomicReference<SocketChannel> activeSession = new AtomicReference<>();
    private volatile Thread sessionThread;
    private volatile boolean closed;
    private final AtomicLong requests = new AtomicLong();

    private BridgeServer(final BridgeContext context, final ServerSocketChannel acceptor, final SharedMemoryRegion shm,
        final JobLink link)
    {
        this.context = context;
        this.acceptor = acceptor;
        this.shm = shm;
        this.link = link;
        final WorkerContext worker = context.worker();
        this.infoReply = BridgeProtocol.OK + " version=" + BridgeProtocol.VERSION + " shm=" + shm.path() +
            " shmBytes=" + shm.sizeBytes() + " rank=" + worker.rank() + " world=" + worker.worldSize() +
            " job=" + worker.jobName() + " tenant=" + worker.tenant() + " k=" + worker.lanes() + " s=" + worker.slots() +
            " dtype=float32 byteOrder=" + ByteOrder.nativeOrder() + " dtypes=float32" +
            (context.int32Worker() == null ? "" : ",int32") + " pipeline=" + context.pipelineDepth();
    }

    /**
     * {@link #open} then {@link #join}: bind the socket, create the shared memory, and join the job,
     * blocking until every rank has joined.
     *
     * @param context bridge configuration; {@link BridgeContext#conclude()} is called here.
     * @throws IOException         when the socket or shared memory cannot be set up (the message names the path).
     * @throws AllReduceException  when the join is refused or times out.
     */
    public static BridgeServer launch(final BridgeContext context) throws IOException
    {
        final BridgeServer server = open(context);
        try
        {
            return server.join();
        }
        catch (final RuntimeException ex)
        {
            server.close();
            throw ex;
        }
    }

    /**
     * Bind the control socket and create the shared memory, without joining yet, so that a caller
     * can install a shutdown hook that removes both before the (possibly long) join.
     *
     * @param context bridge configuration; {@link BridgeContext#conclude()} is called here.
     * @throws IOException when the socket or shared memory cannot be set up (the message names the path).
     */
    public static BridgeServer open(final BridgeContext context) throws IOException
    {
        context.conclude();
        final ServerSocketChannel acceptor = bind(context.socketPath(), "rw-------", "bridge");
        try
        {
            return new BridgeServer(context, acceptor, SharedMemoryRegion.create(context.shmPath(), context.shmBytes()),
                new DirectLink(context.worker(), context.int32Worker()));
        }
        catch (final IOException | RuntimeException ex)
        {
            closeAcceptor(acceptor, context.socketPath());
            throw ex;
        }
    }

    /**
     * Create the shared memory of a bridge that a host agent runs for one connection: no socket is bound (the session
     * runs on the connection that asked for it, {@link #serveHosted}), and the file is group-accessible (mode 0660),
     * for a training process that runs as another member of the agent's group. {@link BridgeContext#once()} is set:
     * the bridge serves that session alone, and a client lost without {@code CLOSE} aborts the job naming its rank.
     *
     * @param context bridge configuration; {@link BridgeContext#conclude()} is called here.
     * @param link    the job (the rank's own client, or its place in a {@link LocalGroup}); closed with the bridge, or
     *                here when the bridge cannot be made.
     * @throws IOException when the shared memory cannot be set up (the message names the path).
     */
    static BridgeServer hosted(final BridgeContext context, final JobLink link) throws IOException
    {
        try
        {
            context.once(true).conclude();
            return new BridgeServer(context, null, SharedMemoryRegion.create(context.shmPath(), context.shmBytes(), true),
                link);
        }
        catch (final IOException | RuntimeException ex)
        {
            link.close();
            throw ex;
        }
    }

    /**
     * Join the job through the appliance, blocking until every rank has joined.
     *
     * @return this.
     * @throws AllReduceException when the join is refused or times out, or the bridge was closed meanwhile.
     */
    public BridgeServer join()
    {
        if (closed)
        {
            throw new AllReduceException("bridge closed while joining job '" + context.worker().jobName() + "'");
        }
        link.join();
        joined = true;
        return this;
    }

    /**
     * @return the joined client's packet I/O, for the start-up report; empty before {@link #join}.
     */
    public String transportDescription()
    {
        return link.transportDescription();
    }

    /**
     * @return where the appliance aggregates the joined job, for the start-up report; empty before {@link #join}.
     */
    public String placementDescription()
    {
        return link.placementDescription();
    }

    /**
     * Bind a Unix-domain socket, replacing a stale socket file but never a live one or another kind of file.
     *
     * @param mode   the socket file's permissions, e.g. {@code rw-------}.
     * @param server what serves it, for the message when another one already does.
     * @throws IOException naming the path.
     */
    static ServerSocketChannel bind(final Path socketPath, final String mode, final String server) throws IOException
    {
        if (Files.exists(socketPath, LinkOption.NOFOLLOW_LINKS))
        {
            if (!Files.readAttributes(socketPath, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).isOther())
            {
                throw new IOException("--socket " + socketPath + " exists and is not a socket; refusing to replace it");
            }
            boolean live;
            try (SocketChannel probe = SocketChannel.open(UnixDomainSocketAddress.of(socketPath)))
            {
                live = probe.isConnected();
            }
            catch (final IOException stale)
            {
                live = false;
            }
            if (live)
            {
                throw new IOException("another " + server + " already serves --socket " + socketPath);
            }
            Files.deleteIfExists(socketPath);
        }
        final ServerSocketChannel acceptor = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try
        {
            acceptor.bind(UnixDomainSocketAddress.of(socketPath));
            Files.setPosixFilePermissions(socketPath, PosixFilePermissions.fromString(mode));
            return acceptor;
        }
        catch (final IOException | RuntimeException ex)
        {
            acceptor.close();
            throw new IOException("cannot bind --socket " + socketPath + ": " + ex.getMessage(), ex);
        }
    }

    /**
     * @return the resolved configuration, with the socket and shared-memory paths.
     */
    public BridgeContext context()
    {
        return context;
    }

    /**
     * @return the reply to {@code INFO}.
     */
    public String info()
    {
        return infoReply;
    }

    /**
     * Accept clients until {@link #close()} (or, with {@link BridgeContext#once()}, until the first
     * session ends). Sessions run on their own thread so that a second client can be told the bridge
     * is busy.
     */
    public void serve()
    {
        if (acceptor == null)
        {
            throw new IllegalStateException("a hosted bridge serves the connection it was opened on: serveHosted()");
        }
        if (!joined)
        {
            throw new IllegalStateException("join() the job before serve()");
        }
        while (!closed)
        {
            final SocketChannel channel;
            try
            {
                channel = acceptor.accept();
            }
            catch (final IOException ex)
            {
                break;
            }
            if (!activeSession.compareAndSet(null, channel))
            {
                reject(channel);
                continue;
            }
            sessionThread = Thread.ofPlatform().name("switchml-bridge-session").start(() -> runSession(channel));
        }
        final Thread session = sessionThread;
        if (session != null)
        {
            try
            {
                session.join();
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static void reject(final SocketChannel channel)
    {
        BridgeSession.writeQuietly(channel,
            BridgeProtocol.error("busy: another client is connected to this bridge (one training process per rank)"));
        BridgeSession.closeQuietly(channel);
    }

    /**
     * Serve one session of a {@link #hosted} bridge on the calling thread, on the connection that opened it, until the
     * client sends {@code CLOSE}, disconnects, or the bridge closes. The caller closes the bridge afterwards.
     *
     * @param channel the connection, after the host agent's {@code OPEN} exchange.
     * @param reader  the connection's reader, which may hold bytes past the {@code OPEN} line.
     */
    void serveHosted(final SocketChannel channel, final BridgeSession.LineReader reader)
    {
        if (acceptor != null || !joined)
        {
            throw new IllegalStateException(acceptor != null ? "not a hosted bridge" : "join() the job before serving");
        }
        if (!activeSession.compareAndSet(null, channel))
        {
            throw new IllegalStateException("a hosted bridge serves one session");
        }
        sessionThread = Thread.currentThread();
        try
        {
            new BridgeSession(this, channel, reader, context.pipelineDepth()).run();
        }
        finally
        {
            activeSession.set(null);
        }
    }

    private void runSession(final SocketChannel channel)
    {
        try (channel)
        {
            new BridgeSession(this, channel, context.pipelineDepth()).run();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        finally
        {
            activeSession.set(null);
            if (context.once())
            {
                closeAcceptor(acceptor, context.socketPath());
            }
        }
    }

    boolean isClosed()
    {
        return closed;
    }

    SharedMemoryRegion shm()
    {
        return shm;
    }

    /**
     * All-reduce a range of the shared memory in place through the job's link.
     *
     * @param dtype float32 or int32 (sum only).
     * @throws IllegalArgumentException naming a bad range, dtype or op.
     */
    CompletableFuture<Void> allReduce(final long offsetBytes, final long count, final String dtype, final ReduceOp op)
    {
        return switch (dtype)
        {
            case "float32" -> link.allReduceFloats(shm.segment(offsetBytes, count, dtype), op);
            case "int32" ->
            {
                if (op != ReduceOp.SUM)
                {
                    throw new IllegalArgumentException(
                        "int32 all-reduce takes op=sum only (the client divides for an average)");
                }
                yield link.allReduceInts(shm.segment(offsetBytes, count, dtype));
            }
            default -> throw new IllegalArgumentException("dtype must be float32 or int32: " + dtype);
        };
    }

    /**
     * The session's client disconnected without {@code CLOSE}. A bridge started {@code --once} serves one
     * training process, which has died or abandoned the job mid-way: abort the job naming this rank, so that the
     * other ranks fail at once with that reason instead of at the slot deadline.
     */
    void onClientLost()
    {
        if (!context.once())
        {
            return;
        }
        final String reason = "rank " + context.worker().rank() + "'s training process disconnected from its agent " +
            "without CLOSE (it died or exited mid-job)";
        link.abort(reason);
    }

    /**
     * @return whether a refused all-reduce aborts the job: it has other ranks, which would otherwise wait for this one.
     */
    boolean abortsOnRefusal()
    {
        return context.worker().worldSize() > 1;
    }

    /**
     * @return this rank's number in its job, for messages.
     */
    int rank()
    {
        return context.worker().rank();
    }

    /**
     * Abort the joined job (nothing before the join completes), naming the reason to every rank.
     */
    void abortJob(final String reason)
    {
        link.abort(reason);
    }

    void onRequestCompleted()
    {
        requests.incrementAndGet();
    }

    /**
     * @return the reply to {@code STATS}: this bridge's request count and the float job's worker counters and
     * backend (and the int32 job's, prefixed {@code int32.}, once joined).
     */
    String stats()
    {
        final StringBuilder reply = new StringBuilder(BridgeProtocol.OK).append(" requests=").append(requests.get());
        link.appendStats(reply);
        return reply.toString();
    }

    /**
     * @return all-reduce requests completed so far.
     */
    public long requests()
    {
        return requests.get();
    }

    /**
     * Close a bound socket and delete its file (nothing for a hosted bridge, which bound none).
     */
    static void closeAcceptor(final ServerSocketChannel acceptor, final Path socketPath)
    {
        if (acceptor == null)
        {
            // a hosted bridge bound no socket, and the path is not its own
            return;
        }
        try
        {
            acceptor.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        try
        {
            Files.deleteIfExists(socketPath);
        }
        catch (final IOException ignore)
        {
            // nothing more to do on the way out
        }
    }

    /**
     * Stop accepting, end the session, leave the job, and delete the socket and shared-memory files.
     * Safe to call more than once and from a shutdown hook.
     */
    public void close()
    {
        final Thread thread;
        synchronized (this)
        {
            if (closed)
            {
                return;
            }
            closed = true;
            closeAcceptor(acceptor, context.socketPath());
            final SocketChannel session = activeSession.get();
            if (session != null)
            {
                BridgeSession.closeQuietly(session);
            }
            link.close();
            thread = sessionThread;
        }
        // outside the lock: the session's thread may be on its way into close() itself (a host agent's is)
        if (thread != null && thread != Thread.currentThread())
        {
            try
            {
                thread.join(SESSION_JOIN_TIMEOUT_MS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
        shm.close();
    }
}
