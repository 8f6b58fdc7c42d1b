package io.switchml.worker.transport;

import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.function.Consumer;

/**
 * The portable {@link DatagramTransport}: a non-blocking {@link DatagramChannel} per socket and a {@link Selector} to
 * wait in, one datagram per system call. Used where the native transport is unavailable, or when asked for
 * ({@code --transport nio}).
 */
public final class NioDatagramTransport extends TransportCounters
{
    private final DatagramChannel channel;
    private final Selector selector;
    private final Consumer<SelectionKey> onSelected = key -> { };
    private final ByteBuffer sendBuffer;
    private final ByteBuffer receiveBuffer;
    private final UnsafeBuffer receiveView;
    private DatagramChannel multicastChannel;
    private boolean drained = true;

    /**
     * @param bindAddress      local address (the one that reaches the appliance).
     * @param socketBufferBytes SO_RCVBUF and SO_SNDBUF.
     * @param maxDatagram      longest datagram sent or received.
     */
    public NioDatagramTransport(final InetAddress bindAddress, final int socketBufferBytes, final int maxDatagram)
        throws IOException
    {
        channel = DatagramChannel.open(StandardProtocolFamily.INET);
        try
        {
            channel.setOption(StandardSocketOptions.SO_RCVBUF, socketBufferBytes);
            channel.setOption(StandardSocketOptions.SO_SNDBUF, socketBufferBytes);
            channel.bind(new InetSocketAddress(bindAddress, 0));
            selector = Selector.open();
        }
        catch (final IOException | RuntimeException ex)
        {
            channel.close();
            throw ex;
        }
        sendBuffer = ByteBuffer.allocateDirect(maxDatagram);
        receiveBuffer = ByteBuffer.allocateDirect(maxDatagram + 1);
        receiveView = new UnsafeBuffer(receiveBuffer);
    }

    public int localPort()
    {
        return channel.socket().getLocalPort();
    }

    public void connect(final Inet4Address address, final int port) throws IOException
    {
        channel.connect(new InetSocketAddress(address, port));
        channel.configureBlocking(false);
        channel.register(selector, SelectionKey.OP_READ);
    }

    public void joinGroup(final Inet4Address group, final int port, final Inet4Address interfaceAddress) throws IOException
    {
        final NetworkInterface networkInterface = NetworkInterface.getByInetAddress(interfaceAddress);
        if (networkInterface == null)
        {
            throw new IOException("no network interface for " + interfaceAddress + " to join multicast group " + group);
        }
        final DatagramChannel multicast = DatagramChannel.open(StandardProtocolFamily.INET);
        try
        {
            multicast.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            multicast.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            multicast.bind(new InetSocketAddress(port));
            multicast.join(group, networkInterface);
            multicast.configureBlocking(false);
            multicast.register(selector, SelectionKey.OP_READ);
        }
        catch (final IOException | RuntimeException ex)
        {
            multicast.close();
            throw ex;
        }
        multicastChannel = multicast;
    }

    public void onStart()
    {
    }

    public boolean send(final UnsafeBuffer datagram, final int length)
    {
        sendBuffer.clear();
        datagram.getBytes(0, sendBuffer, 0, length);
        sendBuffer.limit(length).position(0);
        sendCalls++;
        try
        {
            return channel.write(sendBuffer) != 0;
        }
        catch (final IOException ex)
        {
            // ICMP port unreachable surfaces here when the appliance is gone; the timers retry
            sendErrors++;
            return false;
        }
    }

    public int flush()
    {
        return 0;
    }

    public boolean hasQueued()
    {
        return false;
    }

    public int receive(final Receiver receiver, final int limit)
    {
        int received = 0;
        drained = false;
        try
        {
            // the group's results first: see DatagramTransport#receive
            if (multicastChannel != null)
            {
                received = receiveFrom(multicastChannel, false, receiver, received, limit);
            }
            received = receiveFrom(channel, true, receiver, received, limit);
            drained = received < limit;
        }
        catch (final IOException ex)
        {
            sendErrors++;
        }
        return received;
    }

    /**
     * Hand over one channel's datagrams until it is empty or {@code limit} datagrams in all were handed over:
     * read on the connected unicast channel, receive on the group's, which is not connected.
     *
     * @return datagrams received in all, {@code received} included.
     */
    private int receiveFrom(
        final DatagramChannel from, final boolean connected, final Receiver receiver, final int received, final int limit)
        throws IOException
    {
        int count = received;
        while (count < limit)
        {
            receiveCalls++;
            final int length;
            if (connected)
            {
                length = from.read(receiveBuffer.clear());
                if (length <= 0)
                {
                    break;
                }
            }
            else
            {
                if (from.receive(receiveBuffer.clear()) == null)
                {
                    break;
                }
                length = receiveBuffer.position();
            }
            count++;
            if (length > receiveBuffer.capacity() - 1)
            {
                truncated++;
                continue;
            }
            receiver.onDatagram(receiveView, length);
        }
        return count;
    }

    public boolean drained()
    {
        return drained;
    }

    public void await(final long timeoutMs)
    {
        try
        {
            selector.select(onSelected, Math.max(1, timeoutMs));
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("selector failed: " + ex, ex);
        }
    }

    public void wakeup()
    {
        selector.wakeup();
    }

    public String description()
    {
        return "nio (DatagramChannel, one datagram per system call)";
    }

    public void close()
    {
        try
        {
            selector.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        try
        {
            channel.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        if (multicastChannel != null)
        {
            try
            {
                multicastChannel.close();
            }
            catch (final IOException ignore)
            {
                // closing anyway
            }
        }
    }
}
