package io.switchml.appliance.control;

import java.io.BufferedInputStream;
import java.io.BufferedWriter;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;

/**
 * One worker's or operator's TCP control connection: line in, line out. A line longer than {@link #MAX_LINE_BYTES}
 * is refused without being held: {@link #readLine} throws {@link LineTooLongException} once that many bytes came
 * without a newline, so a stranger cannot grow the heap by never ending a line. A line must also be complete within a
 * deadline (a byte now and then does not keep a connection), and a send that a peer blocks by not reading its replies
 * is cut off by the {@link ControlServer}'s watchdog ({@link #closeIfSendStuck}), so that a slow or hostile peer holds
 * neither a connection slot nor the thread that answers it for long.
 */
final class ControlConnection implements AutoCloseable
{
    /** Longest control line, newline excluded. */
    static final int MAX_LINE_BYTES = 64 * 1024;

    /**
     * A peer sent {@link #MAX_LINE_BYTES} bytes without a newline.
     */
    static final class LineTooLongException extends IOException
    {
        LineTooLongException()
        {
            super("control line longer than " + MAX_LINE_BYTES + " bytes");
        }
    }

    private final Socket socket;
    private final InputStream in;
    private final Writer writer;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream(256);
    /** {@link System#nanoTime()} when the send in progress began (never 0), or 0 when none is. */
    private volatile long sendingSinceNs;
    private volatile long membershipEndedNs;

    ControlConnection(final Socket socket) throws IOException
    {
        this.socket = socket;
        socket.setTcpNoDelay(true);
        this.in = new BufferedInputStream(socket.getInputStream(), 8192);
        this.writer = new BufferedWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8));
    }

    Socket socket()
    {
        return socket;
    }

    /**
     * @return the next line without its terminator (LF or CRLF), or null at the end of the stream (a last line
     * without a newline is returned first). No deadline: for a member's connection, quiet while its job runs.
     * @throws LineTooLongException after {@link #MAX_LINE_BYTES} bytes without a newline.
     */
    String readLine() throws IOException
    {
        return readLine(0);
    }

    /**
     * @param lineTimeoutMs how long the whole line may take from this call on; 0: no limit.
     * @return the next line, as {@link #readLine()}.
     * @throws SocketTimeoutException when the line is not complete in time, however often bytes came.
     */
    String readLine(final long lineTimeoutMs) throws IOException
    {
        line.reset();
        final long deadlineNs = lineTimeoutMs > 0 ? System.nanoTime() + lineTimeoutMs * 1_000_000L : 0;
        int b;
        while (true)
        {
            if (deadlineNs != 0)
            {
                final long remainingMs = (deadlineNs - System.nanoTime()) / 1_000_000L;
                if (remainingMs <= 0)
                {
                    throw new SocketTimeoutException("no complete line within " + lineTimeoutMs + " ms");
                }
                socket.setSoTimeout((int)Math.min(Integer.MAX_VALUE, remainingMs));
            }
            if ((b = in.read()) == -1)
            {
                break;
            }
            if (b == '\n')
            {
                return text();
            }
            if (line.size() == MAX_LINE_BYTES)
            {
                throw new LineTooLongException();
            }
            line.write(b);
        }
        return line.size() == 0 ? null : text();
    }

    private String text()
    {
        final int length = line.size();
        final byte[] bytes = line.toByteArray();
        return new String(bytes, 0, length > 0 && bytes[length - 1] == '\r' ? length - 1 : length, StandardCharsets.UTF_8);
    }

    /**
     * Send one line; failures are ignored because a broken peer is detected by its reader. Control characters (a
     * refusal may quote what the client sent) go out as '?', so that no reply can end a line early for a reader that
     * also splits on CR (BufferedReader does) and forge a second reply.
     */
    synchronized void send(final String line)
    {
        sendingSinceNs = System.nanoTime() | 1L;
        try
        {
            writer.write(printable(line));
            writer.write('\n');
            writer.flush();
        }
        catch (final IOException ignore)
        {
            // the reading side sees the failure and handles it
        }
        finally
        {
            sendingSinceNs = 0;
        }
    }

    /**
     * Close the connection when a send has been blocked for longer than the deadline: a peer that does not read its
     * replies (its buffers full) would otherwise hold the sending thread for as long as it likes. The blocked write
     * then fails, and the sender goes on.
     *
     * @return whether it was closed.
     */
    boolean closeIfSendStuck(final long nowNs, final long deadlineNs)
    {
        final long since = sendingSinceNs;
        if (since != 0 && nowNs - since > deadlineNs)
        {
            cutOff(true);
            return true;
        }
        return false;
    }

    /**
     * The job this connection is a member of has ended without the member leaving (another rank, an operator or a
     * timeout aborted it): from now on the connection holds nothing, and {@link #closeIfMembershipEndedFor} may close it.
     */
    void membershipEnded()
    {
        if (membershipEndedNs == 0)
        {
            membershipEndedNs = System.nanoTime() | 1L;
        }
    }

    /**
     * Close the connection of a member whose job ended more than the grace ago: it was told why (ABORT) and no longer
     * holds anything, so it is held to the rule of a connection without a job instead of staying open for as long as
     * the client likes.
     *
     * @return whether it was closed now (once).
     */
    boolean closeIfMembershipEndedFor(final long nowNs, final long graceNs)
    {
        final long since = membershipEndedNs;
        if (since != 0 && nowNs - since > graceNs)
        {
            membershipEndedNs = 0;
            // nothing is stuck here: a plain socket closes gracefully (the client reads the end of the stream); a TLS
            // one still closes without lingering, as its close_notify could block on a peer that reads nothing
            cutOff(socket instanceof javax.net.ssl.SSLSocket);
            return true;
        }
        return false;
    }

    /**
     * @param abortive without lingering (a reset): a TLS socket's close would first send close_notify, waiting for the
     *                 write lock that a stuck send holds.
     */
    private void cutOff(final boolean abortive)
    {
        // on a thread of its own, so that the caller (the watchdog) is never held
        Thread.ofVirtual().name("switchml-control-cutoff").start(() ->
        {
            if (abortive)
            {
                try
                {
                    socket.setSoLinger(true, 0);
                }
                catch (final IOException ignore)
                {
                    // closing anyway
                }
            }
            close();
        });
    }

    static String printable(final String line)
    {
        for (int i = 0; i < line.length(); i++)
        {
            final char c = line.charAt(i);
            if (c < 0x20 || c == 0x7f)
            {
                final StringBuilder safe = new StringBuilder(line);
                for (int j = i; j < safe.length(); j++)
                {
                    final char d = safe.charAt(j);
                    if (d < 0x20 || d == 0x7f)
                    {
                        safe.setCharAt(j, '?');
                    }
                }
                return safe.toString();
            }
        }
        return line;
    }

    public void close()
    {
        try
        {
            socket.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
    }
}
