package io.switchml.appliance.control;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * One worker's or operator's TCP control connection: line in, line out.
 */
final class ControlConnection implements AutoCloseable
{
    private final Socket socket;
    private final BufferedReader reader;
    private final BufferedWriter writer;

    ControlConnection(final Socket socket) throws IOException
    {
        this.socket = socket;
        socket.setTcpNoDelay(true);
        this.reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        this.writer = new BufferedWriter(new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.UTF_8));
    }

    Socket socket()
    {
        return socket;
    }

    String readLine() throws IOException
    {
        return reader.readLine();
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
