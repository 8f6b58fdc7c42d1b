package io.switchml.offload.xdp;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * One request line to an appliance's control port on loopback (insecure control, as these tests run it) and the
 * first line of its reply.
 */
final class ControlLine
{
    private ControlLine()
    {
    }

    static String send(final int port, final String line) throws IOException
    {
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port);
            PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8);
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)))
        {
            out.println(line);
            return in.readLine();
        }
    }
}
