package io.switchml.appliance.transport;

import io.switchml.protocol.udp.NativeUdp;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

/**
 * A blocking UDP socket for test peers that sends a window of datagrams with one sendmmsg and receives with
 * recvmmsg (MSG_WAITFORONE, 2 s receive timeout), so that a benchmark's member costs few system calls and
 * the appliance sees whole batches. Test code: allocates freely at construction, not thread-safe.
 */
final class BatchSocket implements AutoCloseable
{
    private static final int MSG_WAITFORONE = 0x10000;
    private static final int SO_RCVTIMEO = 20;
    private static final int STRIDE = 65_536;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment callState = NativeUdp.allocateCallState(arena);
    private final int window;
    private final int fd;
    private final int port;
    private final long base;
    private final UnsafeBuffer meta;
    private final UnsafeBuffer errno;
    private final UnsafeBuffer[] sendViews;
    private final UnsafeBuffer[] receiveViews;
    private final int sendMsgs;
    private final int sendIov;
    private final int receiveMsgs;
    private final int receiveIov;

    /**
     * @param destinationPort port on 127.0.0.1 that {@link #send} sends to.
     * @param window          most datagrams sent or received at once.
     */
    BatchSocket(final int destinationPort, final int window) throws IOException
    {
        this.window = window;
        sendMsgs = 0;
        sendIov = sendMsgs + window * NativeUdp.MMSGHDR_SIZE;
        receiveMsgs = sendIov + window * NativeUdp.IOVEC_SIZE;
        receiveIov = receiveMsgs + window * NativeUdp.MMSGHDR_SIZE;
        final int destination = receiveIov + window * NativeUdp.IOVEC_SIZE;
        final int scratch = destination + 64;
        final int sendBuffers = scratch + 64;
        final int receiveBuffers = sendBuffers + window * STRIDE;
        final int size = receiveBuffers + window * STRIDE;
        base = arena.allocate(size, 4096).address();
        meta = new UnsafeBuffer(base, size);
        errno = new UnsafeBuffer(NativeUdp.errnoAddress(), 4);
        sendViews = new UnsafeBuffer[window];
        receiveViews = new UnsafeBuffer[window];

        meta.putShort(destination + NativeUdp.SIN_FAMILY_OFFSET, (short)NativeUdp.AF_INET);
        meta.putShort(destination + NativeUdp.SIN_PORT_OFFSET, (short)destinationPort, ByteOrder.BIG_ENDIAN);
        meta.putInt(destination + NativeUdp.SIN_ADDR_OFFSET, 0x7F00_0001, ByteOrder.BIG_ENDIAN);
        for (int i = 0; i < window; i++)
        {
            final int sendMsg = sendMsgs + i * NativeUdp.MMSGHDR_SIZE;
            meta.putLong(sendMsg + NativeUdp.MSG_NAME_OFFSET, base + destination);
            meta.putInt(sendMsg + NativeUdp.MSG_NAMELEN_OFFSET, NativeUdp.SOCKADDR_IN_SIZE);
            meta.putLong(sendMsg + NativeUdp.MSG_IOV_OFFSET, base + sendIov + (long)i * NativeUdp.IOVEC_SIZE);
            meta.putLong(sendMsg + NativeUdp.MSG_IOVLEN_OFFSET, 1);
            meta.putLong(sendIov + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_BASE_OFFSET, base + sendBuffers + (long)i * STRIDE);
            sendViews[i] = new UnsafeBuffer(base + sendBuffers + (long)i * STRIDE, STRIDE);

            final int receiveMsg = receiveMsgs + i * NativeUdp.MMSGHDR_SIZE;
            meta.putLong(receiveMsg + NativeUdp.MSG_IOV_OFFSET, base + receiveIov + (long)i * NativeUdp.IOVEC_SIZE);
            meta.putLong(receiveMsg + NativeUdp.MSG_IOVLEN_OFFSET, 1);
            meta.putLong(receiveIov + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_BASE_OFFSET,
                base + receiveBuffers + (long)i * STRIDE);
            meta.putLong(receiveIov + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET, STRIDE);
            receiveViews[i] = new UnsafeBuffer(base + receiveBuffers + (long)i * STRIDE, STRIDE);
        }

        fd = NativeUdp.socket(callState, NativeUdp.AF_INET, NativeUdp.SOCK_DGRAM | NativeUdp.SOCK_CLOEXEC, 0);
        check(fd, "socket");
        setInt(scratch, NativeUdp.SOL_SOCKET, NativeUdp.SO_RCVBUFFORCE, 8 << 20);
        setInt(scratch, NativeUdp.SOL_SOCKET, NativeUdp.SO_SNDBUFFORCE, 8 << 20);
        meta.putLong(scratch, 2L);
        meta.putLong(scratch + 8, 0L);
        check(NativeUdp.setsockopt(callState, fd, NativeUdp.SOL_SOCKET, SO_RCVTIMEO, base + scratch, 16), "SO_RCVTIMEO");
        meta.setMemory(scratch, 64, (byte)0);
        meta.putShort(scratch + NativeUdp.SIN_FAMILY_OFFSET, (short)NativeUdp.AF_INET);
        meta.putInt(scratch + NativeUdp.SIN_ADDR_OFFSET, 0x7F00_0001, ByteOrder.BIG_ENDIAN);
        check(NativeUdp.bind(callState, fd, base + scratch, NativeUdp.SOCKADDR_IN_SIZE), "bind");
        meta.putInt(scratch + 32, NativeUdp.SOCKADDR_IN_SIZE);
        check(NativeUdp.getsockname(callState, fd, base + scratch, base + scratch + 32), "getsockname");
        port = meta.getShort(scratch + NativeUdp.SIN_PORT_OFFSET, ByteOrder.BIG_ENDIAN) & 0xFFFF;
    }

    private void setInt(final int scratch, final int level, final int option, final int value) throws IOException
    {
        meta.putInt(scratch, value);
        check(NativeUdp.setsockopt(callState, fd, level, option, base + scratch, 4), "setsockopt " + option);
    }

    private void check(final int result, final String call) throws IOException
    {
        if (result < 0)
        {
            throw new IOException(call + " failed: " + NativeUdp.describeErrno(NativeUdp.errno(callState)));
        }
    }

    int port()
    {
        return port;
    }

    /**
     * @return where datagram i of the next {@link #send} is written.
     */
    UnsafeBuffer sendView(final int i)
    {
        return sendViews[i];
    }

    /**
     * Send datagrams 0 .. count-1, each of the given length, with as few sendmmsg calls as it takes.
     */
    void send(final int count, final int length) throws IOException
    {
        for (int i = 0; i < count; i++)
        {
            meta.putLong(sendIov + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET, length);
        }
        int sent = 0;
        while (sent < count)
        {
            final int result = NativeUdp.sendmmsg(fd, base + sendMsgs + (long)sent * NativeUdp.MMSGHDR_SIZE, count - sent, 0);
            if (result < 0)
            {
                throw new IOException("sendmmsg failed: " + NativeUdp.describeErrno(errno.getInt(0)));
            }
            sent += result;
        }
    }

    /**
     * Receive at least one and at most count datagrams into views from index, waiting up to 2 s.
     *
     * @return datagrams received, 0 on timeout.
     */
    int receive(final int from, final int count) throws IOException
    {
        final int result = NativeUdp.recvmmsg(fd, base + receiveMsgs + (long)from * NativeUdp.MMSGHDR_SIZE, count, MSG_WAITFORONE);
        if (result < 0)
        {
            final int error = errno.getInt(0);
            if (error == NativeUdp.EAGAIN)
            {
                return 0;
            }
            throw new IOException("recvmmsg failed: " + NativeUdp.describeErrno(error));
        }
        return result;
    }

    /**
     * @return the buffer of received datagram i.
     */
    UnsafeBuffer receiveView(final int i)
    {
        return receiveViews[i];
    }

    int window()
    {
        return window;
    }

    public void close()
    {
        NativeUdp.close(callState, fd);
        arena.close();
    }
}
