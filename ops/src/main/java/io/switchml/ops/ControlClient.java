package io.switchml.ops;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A short-lived connection to the appliance's control endpoint for operator queries.
 */
final class ControlClient implements AutoCloseable
{
    private final Socket socket;
    private final BufferedReader reader;
    private final OutputStream out;

    ControlClient(final String host, final int port, final int timeoutMs) throws IOException
    {
        socket = new Socket();
        socket.connect(new InetSocketAddress(host, port), timeoutMs);
        socket.setSoTimeout(timeoutMs);
        reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
        out = socket.getOutputStream();
    }

    String request(final String verb) throws IOException
    {
        out.write((verb + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        final String line = reader.readLine();
        if (line == null)
        {
            throw new IOException("appliance closed the connection");
        }
        return line;
    }

    List<String> requestUntilEnd(final String verb, final String end) throws IOException
    {
        out.write((verb + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        final List<String> lines = new ArrayList<>();
        String line;
        while ((line = reader.readLine()) != null && !line.equals(end))
        {
            lines.add(line);
        }
        return lines;
    }

    public void close() throws IOException
    {
        socket.close();
    }
}
