package io.switchml.worker.bridge;

import io.switchml.protocol.ControlProtocol;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
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
 */
public final class BridgeServer implements AutoCloseable
{
    private static final long SESSION_JOIN_TIMEOUT_MS = 2_000;

    private final BridgeContext context;
    private final ServerSocketChannel acceptor;
    private final SharedMemoryRegion shm;
    private volatile WorkerClient client;
    private final String infoReply;
    private final AtomicReference<SocketChannel> activeSession = new AtomicReference<>();
    private volatile Thread sessionThread;
    private volatile boolean closed;
    private volatile long requests;

    private BridgeServer(final BridgeContext context, final ServerSocketChannel acceptor, final SharedMemoryRegion shm)
    {
        this.context = context;
        this.acceptor = acceptor;
        this.shm = shm;
        final WorkerContext worker = context.worker();
        this.infoReply = BridgeProtocol.OK + " version=" + BridgeProtocol.VERSION + " shm=" + shm.path() +
            " shmBytes=" + shm.sizeBytes() + " rank=" + worker.rank() + " world=" + worker.worldSize() +
            " job=" + worker.jobName() + " tenant=" + worker.tenant() + " k=" + worker.lanes() + " s=" + worker.slots() +
            " dtype=float32 byteOrder=" + ByteOrder.nativeOrder();
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
        final ServerSocketChannel acceptor = bind(context.socketPath());
        try
        {
            return new BridgeServer(context, acceptor, SharedMemoryRegion.create(context.shmPath(), context.shmBytes()));
        }
        catch (final IOException | RuntimeException ex)
        {
            closeAcceptor(acceptor, context.socketPath());
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
        if (client != null)
        {
            return this;
        }
        final WorkerClient joined = WorkerClient.connect(context.worker());
        synchronized (this)
        {
            if (closed)
            {
                joined.close();
                throw new AllReduceException("bridge closed while joining job '" + context.worker().jobName() + "'");
            }
            client = joined;
        }
        return this;
    }

    /**
     * @return the joined client's packet I/O, for the start-up report; empty before {@link #join}.
     */
    public String transportDescription()
    {
        final WorkerClient joined = client;
        return joined == null ? "" : joined.transportDescription();
    }

    private static ServerSocketChannel bind(final Path socketPath) throws IOException
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
                throw new IOException("another bridge already serves --socket " + socketPath);
            }
            Files.deleteIfExists(socketPath);
        }
        final ServerSocketChannel acceptor = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try
        {
            acceptor.bind(UnixDomainSocketAddress.of(socketPath));
            Files.setPosixFilePermissions(socketPath, PosixFilePermissions.fromString("rw-------"));
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
        if (client == null)
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
        try (channel)
        {
            write(channel, BridgeProtocol.error("busy: another client is connected to this bridge (one training process per rank)"));
        }
        catch (final IOException ignore)
        {
            // the client went away
        }
    }

    private void runSession(final SocketChannel channel)
    {
        final LineReader reader = new LineReader(channel);
        try (channel)
        {
            String line;
            while (!closed && (line = reader.readLine()) != null)
            {
                if (line.isBlank())
                {
                    continue;
                }
                final String reply = onRequest(line);
                write(channel, reply);
                if (line.strip().equals(BridgeProtocol.CLOSE))
                {
                    break;
                }
            }
        }
        catch (final IOException ignore)
        {
            // the client closed the connection or sent an over-long line; the session ends either way
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

    /**
     * Handle one request line.
     *
     * @return the reply line, {@code OK ...} or {@code ERR message=...}.
     */
    String onRequest(final String line)
    {
        try
        {
            final Map<String, String> request = ControlProtocol.parse(line);
            final String verb = request.get("");
            switch (verb)
            {
                case BridgeProtocol.ALLREDUCE:
                    return onAllReduce(request);
                case BridgeProtocol.INFO:
                    return infoReply;
                case BridgeProtocol.CLOSE:
                    return BridgeProtocol.OK;
                default:
                    return BridgeProtocol.error("unknown request '" + verb + "'; expected INFO, ALLREDUCE or CLOSE");
            }
        }
        catch (final IllegalArgumentException | AllReduceException | IllegalStateException ex)
        {
            return BridgeProtocol.error(ex.getMessage());
        }
    }

    private String onAllReduce(final Map<String, String> request)
    {
        final long offsetBytes = longField(request, "offset");
        final long count = longField(request, "count");
        final String opName = request.getOrDefault("op", "sum");
        final ReduceOp op = switch (opName)
        {
            case "sum" -> ReduceOp.SUM;
            case "average" -> ReduceOp.AVERAGE;
            default -> throw new IllegalArgumentException("op must be sum or average: " + opName);
        };
        final FloatBuffer range = shm.floats(offsetBytes, count);
        final long startNs = System.nanoTime();
        client.allReduce(range, range, op);
        requests++;
        return BridgeProtocol.OK + " us=" + (System.nanoTime() - startNs) / 1_000;
    }

    private static long longField(final Map<String, String> request, final String key)
    {
        final String value = request.get(key);
        if (value == null)
        {
            throw new IllegalArgumentException("ALLREDUCE needs " + key + "=");
        }
        try
        {
            return Long.parseLong(value);
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException(key + " is not an integer: '" + value + "'");
        }
    }

    /**
     * @return all-reduce requests completed so far.
     */
    public long requests()
    {
        return requests;
    }

    private static void write(final SocketChannel channel, final String line) throws IOException
    {
        final ByteBuffer buffer = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
        while (buffer.hasRemaining())
        {
            channel.write(buffer);
        }
    }

    private static void closeAcceptor(final ServerSocketChannel acceptor, final Path socketPath)
    {
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
    public synchronized void close()
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
            try
            {
                session.close();
            }
            catch (final IOException ignore)
            {
                // closing anyway
            }
        }
        final WorkerClient joined = client;
        if (joined != null)
        {
            joined.close();
        }
        final Thread thread = sessionThread;
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

    /**
     * Reads request lines of bounded length from a blocking channel.
     */
    private static final class LineReader
    {
        private final SocketChannel channel;
        private final ByteBuffer buffer = ByteBuffer.allocate(BridgeProtocol.MAX_LINE_BYTES);

        LineReader(final SocketChannel channel)
        {
            this.channel = channel;
            buffer.flip();
        }

        /**
         * @return the next line without its terminator, or null at end of stream.
         * @throws IOException when the line exceeds {@link BridgeProtocol#MAX_LINE_BYTES} or the read fails.
         */
        String readLine() throws IOException
        {
            while (true)
            {
                for (int i = buffer.position(); i < buffer.limit(); i++)
                {
                    if (buffer.get(i) == '\n')
                    {
                        final byte[] bytes = new byte[i - buffer.position()];
                        buffer.get(bytes);
                        buffer.get();
                        return new String(bytes, StandardCharsets.UTF_8);
                    }
                }
                buffer.compact();
                if (!buffer.hasRemaining())
                {
                    throw new IOException("request line longer than " + BridgeProtocol.MAX_LINE_BYTES + " bytes");
                }
                final int read;
                try
                {
                    read = channel.read(buffer);
                }
                catch (final ClosedChannelException ex)
                {
                    return null;
                }
                buffer.flip();
                if (read < 0)
                {
                    return null;
                }
            }
        }
    }
}
