package io.switchml.worker.bridge;

import io.switchml.protocol.ControlProtocol;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.UnrepresentableValueException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * One client's session on a {@link BridgeServer}: a reader that parses request lines and submits each
 * all-reduce to the {@link WorkerClient}'s stream as soon as it arrives, and a writer that answers the
 * requests in the order they came, each when its result is in the shared memory.
 * <p>
 * So a client may pipeline (protocol v2): send requests for several disjoint ranges without waiting,
 * and read the replies in order; the all-reduces overlap on the wire. Reading stops while
 * {@link BridgeContext#pipelineDepth()} requests are outstanding. A client that waits for each reply
 * before sending the next request (protocol v1's usage) sees no difference.
 */
final class BridgeSession
{
    private static final CompletableFuture<String> END = CompletableFuture.completedFuture(null);
    /** Stands for a STATS reply, made by the writer when its turn comes so that it counts every earlier request. */
    private static final CompletableFuture<String> STATS_IN_TURN = CompletableFuture.completedFuture(null);

    private final BridgeServer server;
    private final SocketChannel channel;
    private final BlockingQueue<CompletableFuture<String>> replies;
    private final LineReader reader;

    BridgeSession(final BridgeServer server, final SocketChannel channel, final int pipelineDepth)
    {
        this(server, channel, new LineReader(channel), pipelineDepth);
    }

    /**
     * @param reader the channel's reader, which may hold bytes read past an earlier line (a host agent's OPEN).
     */
    BridgeSession(final BridgeServer server, final SocketChannel channel, final LineReader reader, final int pipelineDepth)
    {
        this.server = server;
        this.channel = channel;
        this.replies = new ArrayBlockingQueue<>(pipelineDepth + 1);
        this.reader = reader;
    }

    /**
     * Serve the session until the client sends {@code CLOSE}, disconnects, or the server closes.
     * The reader runs on the calling thread, the writer on its own.
     */
    void run()
    {
        final Thread writer = Thread.ofPlatform().daemon().name("switchml-bridge-replies").start(this::writeReplies);
        boolean lost = true;
        try
        {
            String line;
            while (!server.isClosed() && (line = reader.readLine()) != null)
            {
                if (line.isBlank())
                {
                    continue;
                }
                replies.put(onRequest(line));
                if (line.strip().equals(BridgeProtocol.CLOSE))
                {
                    lost = false;
                    break;
                }
            }
        }
        catch (final IOException ignore)
        {
            // a reset connection (the rank was killed with replies unread), a channel the writer closed when its
            // client stopped taking replies, or an over-long line: the client is lost as when it leaves without CLOSE
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        finally
        {
            if (lost && !server.isClosed())
            {
                server.onClientLost();
            }
            try
            {
                replies.put(END);
                writer.join();
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void writeReplies()
    {
        try
        {
            while (true)
            {
                final CompletableFuture<String> next = replies.take();
                if (next == END)
                {
                    return;
                }
                String reply;
                try
                {
                    reply = next == STATS_IN_TURN ? server.stats() : next.join();
                }
                catch (final CompletionException ex)
                {
                    final Throwable cause = ex.getCause() == null ? ex : ex.getCause();
                    reply = BridgeProtocol.error(cause.getMessage());
                }
                write(channel, reply);
            }
        }
        catch (final IOException ex)
        {
            // the client went away: closing the channel ends the reader's wait for its next line, and the queue is
            // drained to the end so that a reader blocked on a full queue is never left waiting for a writer
            closeQuietly(channel);
            drainUntilEnd();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    private void drainUntilEnd()
    {
        try
        {
            while (replies.take() != END)
            {
                // discarded: nobody reads the replies any more
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Handle one request line.
     *
     * @return the reply, completed now for everything but an all-reduce, whose reply completes with its result.
     */
    CompletableFuture<String> onRequest(final String line)
    {
        try
        {
            final Map<String, String> request = ControlProtocol.parse(line);
            final String verb = request.get("");
            return switch (verb)
            {
                case BridgeProtocol.ALLREDUCE -> onAllReduce(request);
                case BridgeProtocol.INFO -> CompletableFuture.completedFuture(server.info());
                case BridgeProtocol.STATS -> STATS_IN_TURN;
                case BridgeProtocol.CLOSE -> CompletableFuture.completedFuture(BridgeProtocol.OK);
                default -> CompletableFuture.completedFuture(
                    BridgeProtocol.error("unknown request '" + verb + "'; expected INFO, ALLREDUCE, STATS or CLOSE"));
            };
        }
        catch (final UnrepresentableValueException | IllegalStateException ex)
        {
            // this rank's own data or shared memory: the other ranks' matching call goes on without it
            return CompletableFuture.completedFuture(BridgeProtocol.error(refused(line, ex.getMessage())));
        }
        catch (final IllegalArgumentException | AllReduceException ex)
        {
            // a malformed request, or one every rank's agent refuses alike (no int32 job): this request alone
            return CompletableFuture.completedFuture(BridgeProtocol.error(ex.getMessage()));
        }
        catch (final RuntimeException ex)
        {
            // a bug of ours, not the client's: answered, so that the session and its job are not taken for lost
            return CompletableFuture.completedFuture(BridgeProtocol.error(refused(line, "internal error in the agent (" +
                ex.getClass().getSimpleName() + ": " + ex.getMessage() + ")")));
        }
    }

    /**
     * An all-reduce refused before anything was sent for a reason of this rank's own (a value out of a 16-bit wire format's range in its first chunks, shared
     * memory its file system cannot back, an agent bug) leaves this rank one call behind the others, whose matching call would wait for it until the slot timeout or
     * be summed with this rank's next tensor: so in a job of several ranks the refusal aborts the job, naming this
     * rank and the reason, and every rank fails with it.
     *
     * @return the reply's message.
     */
    private String refused(final String line, final String message)
    {
        if (!line.startsWith(BridgeProtocol.ALLREDUCE) || !server.abortsOnRefusal())
        {
            return message;
        }
        final String reason = "rank " + server.rank() + "'s all-reduce was refused: " + message;
        server.abortJob(reason);
        return reason + "; the job is aborted";
    }

    private CompletableFuture<String> onAllReduce(final Map<String, String> request)
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
        final String dtype = request.getOrDefault("dtype", "float32");
        final String id = request.get("id");
        final String suffix = id == null ? "" : " id=" + id;
        final long startNs = System.nanoTime();
        final CompletableFuture<Void> done = server.allReduce(offsetBytes, count, dtype, op);
        return done.thenApply(ignore ->
        {
            server.onRequestCompleted();
            return BridgeProtocol.OK + " us=" + (System.nanoTime() - startNs) / 1_000 + suffix;
        });
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
     * Close a connection, ignoring a failure (it is going away either way).
     */
    static void closeQuietly(final SocketChannel channel)
    {
        try
        {
            channel.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
    }

    /**
     * Write a line, ignoring a client that has gone (a refusal or a busy answer, after which the connection closes).
     */
    static void writeQuietly(final SocketChannel channel, final String line)
    {
        try
        {
            write(channel, line);
        }
        catch (final IOException ignore)
        {
            // the client went away
        }
    }

    static void write(final SocketChannel channel, final String line) throws IOException
    {
        final ByteBuffer buffer = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
        while (buffer.hasRemaining())
        {
            channel.write(buffer);
        }
    }

    /**
     * Reads request lines of bounded length from a blocking channel.
     */
    static final class LineReader
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
