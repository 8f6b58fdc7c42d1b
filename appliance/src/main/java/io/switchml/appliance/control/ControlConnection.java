package io.switchml.appliance.control;

import java.io.BufferedInputStream;
import java.io.BufferedWriter;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * One worker's or operator's TCP control connection: line in, line out. A line longer than {@link #MAX_LINE_BYTES}
 * is refused without being held: {@link #readLine} throws {@link LineTooLongException} once that many bytes came
 * without a newline, so a stranger cannot grow the heap by never ending a line.
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
     * without a newline is returned first).
     * @throws LineTooLongException after {@link #MAX_LINE_BYTES} bytes without a newline.
     */
    String readLine() throws IOException
    {
        line.reset();
        int b;
        while ((b = in.read()) != -1)
        {
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
     * Send one line; failures are ignored because a broken peer is detected by its reader.
     */
    synchronized void send(final String line)
    {
        try
        {
            writer.write(line);
            writer.write('\n');
            writer.flush();
        }
        catch (final IOException ignore)
        {
            // the reading side sees the failure and handles it
        }
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
