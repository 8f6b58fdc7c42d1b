package io.switchml.appliance.control;

import io.switchml.appliance.telemetry.ApplianceCounters;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.ElementType;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * TCP control endpoint: workers join and leave jobs, operators list jobs and read counters. Each
 * connection is served by its own virtual thread. A worker whose connection drops without LEAVE
 * while its job runs aborts the job, and the other members are told which rank went away.
 */
public final class ControlServer implements AutoCloseable
{
    private final ServerSocket serverSocket;
    private final JobRegistry registry;
    private final ApplianceCounters counters;
    private final int dataPort;
    private final long startMs = System.currentTimeMillis();
    private final ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor();
    private final Thread acceptThread;
    private volatile boolean running = true;

    public ControlServer(
        final InetAddress bindAddress, final int port, final JobRegistry registry, final ApplianceCounters counters,
        final int dataPort) throws IOException
    {
        this.serverSocket = new ServerSocket();
        serverSocket.setReuseAddress(true);
        serverSocket.bind(new InetSocketAddress(bindAddress, port), 128);
        this.registry = registry;
        this.counters = counters;
        this.dataPort = dataPort;
        this.acceptThread = Thread.ofPlatform().daemon().name("switchml-control-accept").start(this::acceptLoop);
    }

    public int port()
    {
        return serverSocket.getLocalPort();
    }

    private void acceptLoop()
    {
        while (running)
        {
            try
            {
                final Socket socket = serverSocket.accept();
                executor.execute(() -> serve(socket));
            }
            catch (final IOException ex)
            {
                if (running)
                {
                    System.err.println("control endpoint accept failed: " + ex);
                }
            }
        }
    }

    private void serve(final Socket socket)
    {
        try (ControlConnection connection = new ControlConnection(socket))
        {
            String line;
            while ((line = connection.readLine()) != null)
            {
                if (line.isBlank())
                {
                    continue;
                }
                final Map<String, String> message;
                try
                {
                    message = ControlProtocol.parse(line);
                }
                catch (final IllegalArgumentException ex)
                {
                    connection.send(ControlProtocol.ERR + " message=" + ex.getMessage());
                    continue;
                }
                switch (message.get(""))
                {
                    case ControlProtocol.JOIN ->
                    {
                        onJoin(connection, message);
                        return;
                    }
                    case ControlProtocol.HEALTH -> connection.send(ControlProtocol.OK + " status=up uptimeMs=" +
                        (System.currentTimeMillis() - startMs) + " jobs=" + registry.jobCount() + " memoryUsedBytes=" +
                        registry.memoryUsedBytes() + " dataPort=" + dataPort);
                    case ControlProtocol.JOBS ->
                    {
                        for (final String job : registry.describeJobs())
                        {
                            connection.send("JOB " + job);
                        }
                        connection.send(ControlProtocol.END);
                    }
                    case ControlProtocol.STATS ->
                    {
                        final StringBuilder builder = new StringBuilder(ControlProtocol.STATS);
                        counters.snapshot().forEach((name, value) -> builder.append(' ').append(name).append('=').append(value));
                        connection.send(builder.toString());
                    }
                    default -> connection.send(ControlProtocol.ERR + " message=unknown verb '" + message.get("") + "'");
                }
            }
        }
        catch (final IOException ignore)
        {
            // peer went away
        }
    }

    private void onJoin(final ControlConnection connection, final Map<String, String> message) throws IOException
    {
        final Job job;
        final int rank;
        try
        {
            final int jobId = ControlProtocol.intField(message, "job");
            final int worldSize = ControlProtocol.intField(message, "world");
            rank = ControlProtocol.intField(message, "rank");
            final int lanes = ControlProtocol.intField(message, "k");
            final int slots = ControlProtocol.intField(message, "s");
            final int port = ControlProtocol.intField(message, "port");
            final String type = message.get("type");
            final byte elementType = ElementType.parse(type == null ? "float32" : type);
            if (port < 1 || port > 65_535)
            {
                throw new IllegalArgumentException("data port must be within 1..65535: " + port);
            }
            final InetSocketAddress dataAddress = new InetSocketAddress(connection.socket().getInetAddress(), port);
            job = registry.join(jobId, worldSize, rank, elementType, lanes, slots, dataAddress, connection);
        }
        catch (final IllegalArgumentException | JobRegistry.JoinRefusedException ex)
        {
            connection.send(ControlProtocol.ERR + " message=" + ex.getMessage());
            return;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return;
        }

        connection.send(ControlProtocol.OK + " job=" + job.jobId + " dataPort=" + dataPort + " world=" + job.worldSize +
            " k=" + job.lanes + " s=" + job.slots + " type=" + ElementType.name(job.elementType));

        String line;
        try
        {
            while ((line = connection.readLine()) != null)
            {
                if (line.strip().equals(ControlProtocol.LEAVE))
                {
                    registry.leave(job, rank);
                    return;
                }
            }
        }
        catch (final IOException ignore)
        {
            // handled below as a lost connection
        }
        if (!registry.isEnded(job))
        {
            registry.abort(job, "rank " + rank + " (" + job.member(rank) + ") lost its control connection");
        }
    }

    public void close()
    {
        running = false;
        try
        {
            serverSocket.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        executor.shutdownNow();
        try
        {
            acceptThread.join(1000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
