package io.switchml.protocol.udp;

import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.nio.ByteOrder;

/**
 * A non-blocking IPv4 UDP socket opened through {@link NativeUdp}: the set-up calls (buffer sizes, bind, connect,
 * multicast membership, GSO and GRO) with errors that name the call, for the packet paths that then batch on its
 * descriptor with recvmmsg, sendmmsg and sendmsg. Set-up only: not thread-safe, and it allocates a small native block
 * for option values once.
 */
public final class UdpSocket implements AutoCloseable
{
    private static final ByteOrder NETWORK = ByteOrder.BIG_ENDIAN;
    private static final int BLOCK = 64;

    private final Arena arena;
    private final MemorySegment callState;
    private final long base;
    private final UnsafeBuffer block;
    private final int fd;
    private boolean closed;

    private UdpSocket(final int fd, final Arena arena, final MemorySegment callState, final MemorySegment block)
    {
        this.fd = fd;
        this.arena = arena;
        this.callState = callState;
        this.base = block.address();
        this.block = new UnsafeBuffer(base, BLOCK);
    }

    /**
     * Open a non-blocking, close-on-exec UDP socket.
     *
     * @throws IOException when the native calls are unavailable here or socket(2) fails.
     */
    public static UdpSocket open() throws IOException
    {
        if (!NativeUdp.isAvailable())
        {
            throw new IOException("native UDP unavailable: " + NativeUdp.unavailabilityCause());
        }
        final Arena arena = Arena.ofShared();
        final MemorySegment callState = NativeUdp.allocateCallState(arena);
        final int fd = NativeUdp.socket(callState, NativeUdp.AF_INET,
            NativeUdp.SOCK_DGRAM | NativeUdp.SOCK_NONBLOCK | NativeUdp.SOCK_CLOEXEC, 0);
        if (fd < 0)
        {
            final int errno = NativeUdp.errno(callState);
            arena.close();
            throw new IOException("socket(AF_INET, SOCK_DGRAM) failed: " + NativeUdp.describeErrno(errno));
        }
        return new UdpSocket(fd, arena, callState, arena.allocate(BLOCK, 8));
    }

    public int fd()
    {
        return fd;
    }

    /**
     * Set SO_RCVBUF and SO_SNDBUF, forced past the system limit where the process may (CAP_NET_ADMIN).
     *
     * @return the receive buffer size the kernel granted.
     */
    public int bufferSizes(final int bytes) throws IOException
    {
        final int received = setBufferSize(NativeUdp.SO_RCVBUFFORCE, NativeUdp.SO_RCVBUF, bytes);
        setBufferSize(NativeUdp.SO_SNDBUFFORCE, NativeUdp.SO_SNDBUF, bytes);
        return received;
    }

    private int setBufferSize(final int forceOption, final int option, final int bytes) throws IOException
    {
        block.putInt(0, bytes);
        if (NativeUdp.setsockopt(callState, fd, NativeUdp.SOL_SOCKET, forceOption, base, 4) != 0 &&
            NativeUdp.setsockopt(callState, fd, NativeUdp.SOL_SOCKET, option, base, 4) != 0)
        {
            throw new IOException("setsockopt(SOL_SOCKET, " + option + ", " + bytes + ") failed: " +
                NativeUdp.describeErrno(NativeUdp.errno(callState)));
        }
        block.putInt(8, 4);
        if (NativeUdp.getsockopt(callState, fd, NativeUdp.SOL_SOCKET, option, base, base + 8) != 0)
        {
            return -1;
        }
        return block.getInt(0);
    }

    /**
     * Set an int socket option.
     *
     * @return true when the kernel accepted it.
     */
    public boolean option(final int level, final int option, final int value)
    {
        block.putInt(0, value);
        return NativeUdp.setsockopt(callState, fd, level, option, base, 4) == 0;
    }

    /**
     * @return errno of the last set-up call that failed, as text.
     */
    public String lastError()
    {
        return NativeUdp.describeErrno(NativeUdp.errno(callState));
    }

    public void bind(final Inet4Address address, final int port) throws IOException
    {
        putAddress(address, port);
        if (NativeUdp.bind(callState, fd, base, NativeUdp.SOCKADDR_IN_SIZE) != 0)
        {
            throw new IOException("bind(" + address.getHostAddress() + ":" + port + ") failed: " + lastError());
        }
    }

    /**
     * Fix the peer: sends without an address go to it, and datagrams from anyone else are not delivered.
     */
    public void connect(final Inet4Address address, final int port) throws IOException
    {
        putAddress(address, port);
        if (NativeUdp.connect(callState, fd, base, NativeUdp.SOCKADDR_IN_SIZE) != 0)
        {
            throw new IOException("connect(" + address.getHostAddress() + ":" + port + ") failed: " + lastError());
        }
    }

    /**
     * @return the bound local port.
     */
    public int localPort() throws IOException
    {
        block.setMemory(0, BLOCK, (byte)0);
        block.putInt(32, NativeUdp.SOCKADDR_IN_SIZE);
        if (NativeUdp.getsockname(callState, fd, base, base + 32) != 0)
        {
            throw new IOException("getsockname failed: " + lastError());
        }
        return block.getShort(NativeUdp.SIN_PORT_OFFSET, NETWORK) & 0xFFFF;
    }

    /**
     * Join a multicast group on the interface that has the given address (IP_ADD_MEMBERSHIP).
     */
    public void joinGroup(final Inet4Address group, final Inet4Address interfaceAddress) throws IOException
    {
        block.putInt(0, group.hashCode(), NETWORK);
        block.putInt(4, interfaceAddress.hashCode(), NETWORK);
        if (NativeUdp.setsockopt(callState, fd, NativeUdp.IPPROTO_IP, NativeUdp.IP_ADD_MEMBERSHIP, base, 8) != 0)
        {
            throw new IOException("setsockopt(IP_ADD_MEMBERSHIP " + group.getHostAddress() + " on " +
                interfaceAddress.getHostAddress() + ") failed: " + lastError());
        }
    }

    private void putAddress(final Inet4Address address, final int port)
    {
        block.setMemory(0, NativeUdp.SOCKADDR_IN_SIZE, (byte)0);
        block.putShort(NativeUdp.SIN_FAMILY_OFFSET, (short)NativeUdp.AF_INET);
        block.putShort(NativeUdp.SIN_PORT_OFFSET, (short)port, NETWORK);
        block.putInt(NativeUdp.SIN_ADDR_OFFSET, address.hashCode(), NETWORK);
    }

    /**
     * Close the descriptor and free the option block; idempotent. Only once no thread uses the descriptor.
     */
    public void close()
    {
        if (!closed)
        {
            closed = true;
            NativeUdp.close(callState, fd);
            arena.close();
        }
    }
}
