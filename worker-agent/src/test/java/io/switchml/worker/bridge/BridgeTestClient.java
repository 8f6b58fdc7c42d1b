package io.switchml.worker.bridge;

import io.switchml.protocol.ControlProtocol;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;

/**
 * A minimal Java client of the bridge protocol for tests: the Python package is the real client.
 */
final class BridgeTestClient implements AutoCloseable
{
    private final SocketChannel channel;
    private final ByteBuffer in = ByteBuffer.allocate(8192);
    private FloatBuffer shm;

    BridgeTestClient(final Path socketPath) throws IOException
    {
        channel = SocketChannel.open(StandardProtocolFamily.UNIX);
        channel.connect(UnixDomainSocketAddress.of(socketPath));
        in.flip();
    }

    /** Send INFO and map the shared memory it names. */
    Map<String, String> mapShm() throws IOException
    {
        final Map<String, String> info = ControlProtocol.parse(request(BridgeProtocol.INFO));
        try (FileChannel file = FileChannel.open(Path.of(info.get("shm")), StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            shm = file.map(FileChannel.MapMode.READ_WRITE, 0, Long.parseLong(info.get("shmBytes")))
                .order(ByteOrder.nativeOrder()).asFloatBuffer();
        }
        return info;
    }

    FloatBuffer shm()
    {
        return shm;
    }

    /** Send a request line without waiting for its reply (pipelining). */
    void send(final String line) throws IOException
    {
        final ByteBuffer out = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
        while (out.hasRemaining())
        {
            channel.write(out);
        }
    }

    String request(final String line) throws IOException
    {
        final ByteBuffer out = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
        while (out.hasRemaining())
        {
            channel.write(out);
        }
        return readLine();
    }

    /** @return the next line, or null when the bridge closed the connection. */
    String readLine() throws IOException
    {
        final StringBuilder line = new StringBuilder();
        while (true)
        {
            while (in.hasRemaining())
            {
                final byte b = in.get();
                if (b == '\n')
                {
                    return line.toString();
                }
                line.append((char)b);
            }
            in.clear();
            final int read = channel.read(in);
            in.flip();
            if (read < 0)
            {
                return line.isEmpty() ? null : line.toString();
            }
        }
    }

    public void close() throws IOException
    {
        channel.close();
    }
}
