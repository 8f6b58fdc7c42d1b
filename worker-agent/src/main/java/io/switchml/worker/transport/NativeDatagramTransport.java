package io.switchml.worker.transport;

import io.switchml.protocol.udp.NativeUdp;
import io.switchml.protocol.udp.UdpSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetAddress;

/**
 * The Linux {@link DatagramTransport}: a connected UDP socket driven through the FFM bindings the appliance's shards
 * use ({@link NativeUdp}), so a worker moves its datagrams in batches instead of one system call each.
 * <ul>
 * <li><b>Send</b>: {@link #send} copies a datagram into a send queue, {@link #sendReference} queues a pointer to
 * a datagram in native memory (an agent's slot buffer: no copy, 13 % less user CPU in the I/O agents on loopback);
 * {@link #flush} hands the queue to one sendmmsg(2), gathering each message's datagrams with one iovec per run of
 * adjacent ones, and copies into the queue any referenced datagram it leaves queued, so no reference outlives it.
 * Consecutive datagrams of equal length (a burst of full updates: the agent queues one per result it handles) become
 * one message with a UDP_SEGMENT control message (UDP GSO), up to 64 segments and 65,507 bytes:
 * the kernel builds the datagrams, the wire sees the same packets. A GSO message the kernel refuses (EINVAL or EIO:
 * a segment larger than the route's MTU allows, or a device without the offload) is resent as single datagrams and
 * GSO stays off for that length and above. EAGAIN or ENOBUFS leave the rest queued for the next flush (the agent
 * waits for POLLOUT); an ICMP error reported on the socket is counted and the send retried.</li>
 * <li><b>Receive</b>: recvmmsg(2) in batches of 32 on the multicast socket, then on the unicast one, a datagram
 * flagged MSG_TRUNC counted and dropped. After large datagrams a call asks for as many as
 * {@link NativeUdp#RECEIVE_BATCH_BYTES} holds (4 of loopback's 32,744 bytes), so that each is read back from the cache
 * it was just copied into. Per-rank loopback cells (100 MB, 9 interleaved pairs; the 5 and 4 of them with CPUs 0 and 1
 * sharing a cache throughout): the timed calls' CPU per rank 0.52 against 0.57 s/GB, TAT p50 144 against 161 ms
 * (medians; docs/bench/worker-transport-2026-11-25.md, session 38). The two sockets share that size, which the
 * group's results set: the unicast one is mostly empty. With {@code gro}, both sockets set UDP_GRO: the appliance
 * sends a batch's results for one destination as one GSO message, and the kernel then queues that burst to the
 * socket as one buffer (on loopback without ever splitting it) whose UDP_GRO control message gives the segment size;
 * the transport hands the segments to the receiver one by one, exactly as if they had come singly. Every receive
 * buffer is then 64 KiB, the largest coalesced buffer, so none is truncated (FACTS.md's "recvmmsg with GRO
 * misbehaved" was buffers sized for one datagram).</li>
 * <li><b>Wait</b>: poll(2) on the sockets and an eventfd that {@link #wakeup} writes only while the agent waits or is
 * about to (a Dekker handshake of two volatiles), so a busy submitter costs no system call per submission.</li>
 * </ul>
 * The packet path allocates nothing: every buffer, message header and control message is laid out once in native
 * memory. errno of the packet-path calls is read from the agent thread's errno variable, whose address
 * {@link #onStart} takes on that thread.
 */
public final class NativeDatagramTransport extends TransportCounters
{
    /** Datagrams one recvmmsg call takes. */
    public static final int RECEIVE_BATCH = 32;
    /** Datagrams the send queue holds before {@link #send} flushes on its own. */
    public static final int SEND_QUEUE = 128;
    private static final int MAX_QUEUE_BYTES = 2 << 20;
    private static final int EINVAL = 22;
    private static final int EIO = 5;
    private static final int EMSGSIZE = 90;
    private static final int ECONNREFUSED = 111;
    private static final int MAX_SEND_ATTEMPTS = 4;

    private final Arena arena = Arena.ofShared();
    private final UdpSocket socket;
    private UdpSocket multicast;
    private final int eventFd;
    private final InetAddress bindAddress;
    private final int socketBufferBytes;
    private final int maxDatagram;

    private final long queueBytesAddress;
    private final int queueBytesCapacity;
    private final UnsafeBuffer queueBytes;
    private final int[] queueOffset = new int[SEND_QUEUE];
    private final long[] queueAddress = new long[SEND_QUEUE];
    private final UnsafeBuffer referenceView = new UnsafeBuffer(0L, 0);
    private long referencesQueued;
    private long referencesCopied;
    private final int[] queueLength = new int[SEND_QUEUE];
    private int queueHead;
    private int queueTail;
    private int queueEndOffset;

    private final long sendVecAddress;
    private final long sendIovAddress;
    private final long sendControlAddress;
    private final UnsafeBuffer sendVec;
    private final UnsafeBuffer sendIov;
    private final UnsafeBuffer sendControl;
    private final int[] messageDatagrams = new int[SEND_QUEUE];
    private int gsoLimit;
    private final boolean gsoRequested;
    private String gsoNote = "";

    private final long receiveVecAddress;
    private final UnsafeBuffer receiveVec;
    private final UnsafeBuffer[] receiveViews = new UnsafeBuffer[RECEIVE_BATCH];
    private final int receiveBatch;
    /** Datagrams the next recvmmsg asks for: {@link #receiveBatch} at most, fewer for large datagrams. */
    private int nextReceiveBatch;
    /** Datagrams handed over together ({@link Receiver#onDatagrams}): at most this many at a time. */
    private static final int HAND_OVER = Receiver.MAX_HAND_OVER;
    private final UnsafeBuffer[] handOverViews = new UnsafeBuffer[HAND_OVER];
    private final int[] handOverLengths = new int[HAND_OVER];
    private int handOverCount;
    private final long receiveControlAddress;
    private final UnsafeBuffer receiveControl;
    private final boolean groRequested;
    private boolean gro;
    private String groNote = "";
    private long groBuffers;
    private long groSegments;

    private final long pollAddress;
    private final UnsafeBuffer pollFds;
    private final long eventAddress;
    private final UnsafeBuffer eventWord;
    private final long oneAddress;
    private UnsafeBuffer errno;

    private volatile boolean waiting;
    private volatile boolean wakeupPending;
    private boolean drained = true;
    private boolean lastEmpty;
    /** The sockets {@link #receive} reads, in order: the group's (once joined), then the unicast one. */
    private int[] receiveFds;
    private boolean closed;
    private long gsoMessages;

    /**
     * @param bindAddress       local address (the one that reaches the appliance).
     * @param socketBufferBytes SO_RCVBUF and SO_SNDBUF.
     * @param maxDatagram       longest datagram sent or received.
     * @param gso               coalesce bursts of equal-length datagrams with UDP GSO where the kernel takes it.
     * @param gro               receive bursts of equal-length datagrams coalesced (UDP GRO) where the kernel offers it.
     */
    public NativeDatagramTransport(
        final InetAddress bindAddress, final int socketBufferBytes, final int maxDatagram, final boolean gso,
        final boolean gro)
        throws IOException
    {
        this(bindAddress, socketBufferBytes, maxDatagram, gso, gro, RECEIVE_BATCH);
    }

    /**
     * As {@link #NativeDatagramTransport(InetAddress, int, int, boolean, boolean)} with fewer datagrams per recvmmsg
     * call, for the warm-up's rehearsal ({@code DataPathRehearsal}): with a batch of 2, its receive loop runs both
     * ways, a full batch (which reads on) and a partial one (which ends the pass). With 32, a rehearsal's few results
     * in flight never fill a batch; the JIT then compiles the loop without the way on, and a job's first full batch
     * throws that code away in the middle of an all-reduce.
     *
     * @param receiveBatch datagrams one recvmmsg call takes: 2 to {@link #RECEIVE_BATCH}.
     */
    public NativeDatagramTransport(
        final InetAddress bindAddress, final int socketBufferBytes, final int maxDatagram, final boolean gso,
        final boolean gro, final int receiveBatch)
        throws IOException
    {
        if (receiveBatch < 2 || receiveBatch > RECEIVE_BATCH)
        {
            throw new IllegalArgumentException("receiveBatch must be 2 to " + RECEIVE_BATCH + ": " + receiveBatch);
        }
        this.receiveBatch = receiveBatch;
        this.nextReceiveBatch = receiveBatch;
        if (!(bindAddress instanceof Inet4Address))
        {
            throw new IOException("the native transport is IPv4 only: " + bindAddress);
        }
        this.bindAddress = bindAddress;
        this.socketBufferBytes = socketBufferBytes;
        this.maxDatagram = maxDatagram;
        socket = UdpSocket.open();
        try
        {
            socket.bufferSizes(socketBufferBytes);
            socket.bind((Inet4Address)bindAddress, 0);
            receiveFds = new int[] {socket.fd()};
            final MemorySegment callState = NativeUdp.allocateCallState(arena);
            eventFd = NativeUdp.eventfd(callState, 0, NativeUdp.EFD_NONBLOCK | NativeUdp.EFD_CLOEXEC);
            if (eventFd < 0)
            {
                throw new IOException("eventfd failed: " + NativeUdp.describeErrno(NativeUdp.errno(callState)));
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            socket.close();
            arena.close();
            throw ex;
        }

        gsoRequested = gso;
        if (gso && !socket.option(NativeUdp.SOL_UDP, NativeUdp.UDP_SEGMENT, 0))
        {
            gsoNote = ", UDP GSO unavailable (" + socket.lastError() + ")";
            gsoLimit = 0;
        }
        else
        {
            gsoLimit = gso ? Math.min(maxDatagram, NativeUdp.MAX_UDP_PAYLOAD / 2) : 0;
        }

        queueBytesCapacity = Math.max(4 * align(maxDatagram), Math.min(SEND_QUEUE * align(maxDatagram), MAX_QUEUE_BYTES));
        queueBytesAddress = arena.allocate(queueBytesCapacity, 64).address();
        queueBytes = new UnsafeBuffer(queueBytesAddress, queueBytesCapacity);

        sendVecAddress = arena.allocate((long)SEND_QUEUE * NativeUdp.MMSGHDR_SIZE, 64).address();
        sendVec = new UnsafeBuffer(sendVecAddress, SEND_QUEUE * NativeUdp.MMSGHDR_SIZE);
        sendVec.setMemory(0, sendVec.capacity(), (byte)0);
        sendIovAddress = arena.allocate((long)SEND_QUEUE * NativeUdp.IOVEC_SIZE, 64).address();
        sendIov = new UnsafeBuffer(sendIovAddress, SEND_QUEUE * NativeUdp.IOVEC_SIZE);
        sendControlAddress = arena.allocate((long)SEND_QUEUE * NativeUdp.CMSG_SPACE_SMALL, 64).address();
        sendControl = new UnsafeBuffer(sendControlAddress, SEND_QUEUE * NativeUdp.CMSG_SPACE_SMALL);
        sendControl.setMemory(0, sendControl.capacity(), (byte)0);
        for (int m = 0; m < SEND_QUEUE; m++)
        {
            final int h = m * NativeUdp.MMSGHDR_SIZE;
            sendVec.putLong(h + NativeUdp.MSG_IOV_OFFSET, sendIovAddress + (long)m * NativeUdp.IOVEC_SIZE);
            sendVec.putLong(h + NativeUdp.MSG_IOVLEN_OFFSET, 1);
            final int c = m * NativeUdp.CMSG_SPACE_SMALL;
            NativeUdp.putUdpSegment(sendControl, c, 0);
        }

        groRequested = gro;
        if (gro && !socket.option(NativeUdp.SOL_UDP, NativeUdp.UDP_GRO, 1))
        {
            groNote = ", UDP GRO unavailable (" + socket.lastError() + ")";
        }
        else
        {
            this.gro = gro;
        }
        final int receiveLength = this.gro ? NativeUdp.MAX_GRO_BUFFER : maxDatagram;
        final int slot = align(receiveLength);
        receiveControlAddress = arena.allocate((long)RECEIVE_BATCH * NativeUdp.CMSG_SPACE_SMALL, 64).address();
        receiveControl = new UnsafeBuffer(receiveControlAddress, RECEIVE_BATCH * NativeUdp.CMSG_SPACE_SMALL);
        final long receiveBuffers = arena.allocate((long)RECEIVE_BATCH * slot, 64).address();
        final long receiveIov = arena.allocate((long)RECEIVE_BATCH * NativeUdp.IOVEC_SIZE, 64).address();
        final UnsafeBuffer iov = new UnsafeBuffer(receiveIov, RECEIVE_BATCH * NativeUdp.IOVEC_SIZE);
        receiveVecAddress = arena.allocate((long)RECEIVE_BATCH * NativeUdp.MMSGHDR_SIZE, 64).address();
        receiveVec = new UnsafeBuffer(receiveVecAddress, RECEIVE_BATCH * NativeUdp.MMSGHDR_SIZE);
        receiveVec.setMemory(0, receiveVec.capacity(), (byte)0);
        for (int i = 0; i < RECEIVE_BATCH; i++)
        {
            final long buffer = receiveBuffers + (long)i * slot;
            iov.putLong(i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_BASE_OFFSET, buffer);
            iov.putLong(i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET, receiveLength);
            receiveVec.putLong(i * NativeUdp.MMSGHDR_SIZE + NativeUdp.MSG_IOV_OFFSET, receiveIov + (long)i * NativeUdp.IOVEC_SIZE);
            receiveVec.putLong(i * NativeUdp.MMSGHDR_SIZE + NativeUdp.MSG_IOVLEN_OFFSET, 1);
            if (this.gro)
            {
                receiveVec.putLong(i * NativeUdp.MMSGHDR_SIZE + NativeUdp.MSG_CONTROL_OFFSET,
                    receiveControlAddress + (long)i * NativeUdp.CMSG_SPACE_SMALL);
                receiveVec.putLong(i * NativeUdp.MMSGHDR_SIZE + NativeUdp.MSG_CONTROLLEN_OFFSET, NativeUdp.CMSG_SPACE_SMALL);
            }
            receiveViews[i] = new UnsafeBuffer(buffer, receiveLength);
        }
        for (int i = 0; i < HAND_OVER; i++)
        {
            handOverViews[i] = new UnsafeBuffer(0L, 0);
        }

        pollAddress = arena.allocate(3L * NativeUdp.POLLFD_SIZE, 8).address();
        pollFds = new UnsafeBuffer(pollAddress, 3 * NativeUdp.POLLFD_SIZE);
        eventAddress = arena.allocate(16, 8).address();
        eventWord = new UnsafeBuffer(eventAddress, 16);
        eventWord.putLong(8, 1L);
        oneAddress = eventAddress + 8;
    }

    private static int align(final int length)
    {
        return (length + 7) & ~7;
    }

    public int localPort()
    {
        try
        {
            return socket.localPort();
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException(ex.getMessage(), ex);
        }
    }

    public void connect(final Inet4Address address, final int port) throws IOException
    {
        socket.connect(address, port);
    }

    public void joinGroup(final Inet4Address group, final int port, final Inet4Address interfaceAddress) throws IOException
    {
        final UdpSocket socket = UdpSocket.open();
        try
        {
            if (!socket.option(NativeUdp.SOL_SOCKET, NativeUdp.SO_REUSEADDR, 1))
            {
                throw new IOException("setsockopt(SO_REUSEADDR) failed: " + socket.lastError());
            }
            socket.bufferSizes(socketBufferBytes);
            socket.bind((Inet4Address)InetAddress.getByAddress(new byte[4]), port);
            socket.joinGroup(group, interfaceAddress);
        }
        catch (final IOException | RuntimeException ex)
        {
            socket.close();
            throw ex;
        }
        multicast = socket;
        receiveFds = new int[] {socket.fd(), this.socket.fd()};
    }

    public void onStart()
    {
        errno = new UnsafeBuffer(NativeUdp.errnoAddress(), 4);
    }

    private int errno()
    {
        return errno.getInt(0);
    }

    public boolean send(final UnsafeBuffer datagram, final int length)
    {
        return enqueue(datagram, length, false);
    }

    /**
     * Queue a datagram by reference when it lies in native memory: the next {@link #flush} reads it where it is,
     * saving the copy into the queue, and copies into the queue whatever it leaves queued, so a reference never
     * outlives the flush after it. A datagram on the heap is copied.
     */
    public boolean sendReference(final UnsafeBuffer datagram, final int length)
    {
        return enqueue(datagram, length, datagram.byteArray() == null);
    }

    private boolean enqueue(final UnsafeBuffer datagram, final int length, final boolean byReference)
    {
        if (queueTail - queueHead == SEND_QUEUE || queueEndOffset + length > queueBytesCapacity)
        {
            flush();
            if (queueTail - queueHead == SEND_QUEUE || queueEndOffset + length > queueBytesCapacity)
            {
                return false;
            }
        }
        // a reference reserves its room in the queue too, so that flush can copy it there if it must stay queued
        final int offset = queueEndOffset;
        final int index = queueTail++ & (SEND_QUEUE - 1);
        if (byReference)
        {
            queueAddress[index] = datagram.addressOffset();
            referencesQueued++;
        }
        else
        {
            queueBytes.putBytes(offset, datagram, 0, length);
            queueAddress[index] = queueBytesAddress + offset;
        }
        queueOffset[index] = offset;
        queueLength[index] = length;
        queueEndOffset = offset + length;
        return true;
    }

    public boolean hasQueued()
    {
        return queueTail != queueHead;
    }

    public int flush()
    {
        int sent = 0;
        int attempts = 0;
        while (queueHead != queueTail && attempts++ < MAX_SEND_ATTEMPTS)
        {
            final int messages = buildMessages();
            sendCalls++;
            final int result = NativeUdp.sendmmsg(socket.fd(), sendVecAddress, messages, NativeUdp.MSG_DONTWAIT);
            if (result > 0)
            {
                for (int m = 0; m < result; m++)
                {
                    sent += messageDatagrams[m];
                    if (messageDatagrams[m] > 1)
                    {
                        gsoMessages++;
                    }
                    queueHead += messageDatagrams[m];
                }
                if (result < messages)
                {
                    continue;
                }
                break;
            }
            final int error = errno();
            if (error == NativeUdp.EAGAIN || error == NativeUdp.ENOBUFS || error == NativeUdp.EINTR)
            {
                break;
            }
            final int first = messageDatagrams[0];
            if (first > 1 && (error == EINVAL || error == EIO || error == EMSGSIZE))
            {
                // the kernel refuses this GSO message: no GSO for datagrams this long from now on
                gsoLimit = Math.min(gsoLimit, queueLength[queueHead & (SEND_QUEUE - 1)] - 1);
                gsoNote = ", UDP GSO off above " + gsoLimit + " bytes (" + NativeUdp.describeErrno(error) + ")";
                continue;
            }
            sendErrors++;
            if (error != ECONNREFUSED)
            {
                // this datagram is lost; the retransmission timers recover it
                queueHead += first;
            }
        }
        if (queueHead == queueTail)
        {
            queueHead = 0;
            queueTail = 0;
            queueEndOffset = 0;
        }
        else
        {
            ownQueuedBytes();
        }
        return sent;
    }

    /**
     * Copy every datagram still queued by reference into its room in the queue: its owner may change it once the
     * flush returns (an agent re-encodes a slot's buffer when the slot's result arrives).
     */
    private void ownQueuedBytes()
    {
        for (int q = queueHead; q != queueTail; q++)
        {
            final int index = q & (SEND_QUEUE - 1);
            final long own = queueBytesAddress + queueOffset[index];
            if (queueAddress[index] != own)
            {
                referenceView.wrap(queueAddress[index], queueLength[index]);
                queueBytes.putBytes(queueOffset[index], referenceView, 0, queueLength[index]);
                queueAddress[index] = own;
                referencesCopied++;
            }
        }
    }

    /**
     * Lay the queue out as sendmmsg messages, coalescing runs of equal-length datagrams into GSO messages.
     *
     * @return messages laid out.
     */
    private int buildMessages()
    {
        int messages = 0;
        int iovs = 0;
        int q = queueHead;
        while (q != queueTail)
        {
            final int index = q & (SEND_QUEUE - 1);
            final int length = queueLength[index];
            int segments = 1;
            int bytes = length;
            if (length <= gsoLimit)
            {
                while (q + segments != queueTail && segments < NativeUdp.UDP_MAX_SEGMENTS &&
                    queueLength[(q + segments) & (SEND_QUEUE - 1)] == length && bytes + length <= NativeUdp.MAX_UDP_PAYLOAD)
                {
                    bytes += length;
                    segments++;
                }
            }
            final int h = messages * NativeUdp.MMSGHDR_SIZE;
            // one iovec per run of datagrams that lie back to back (copies in the queue do; references may not)
            final int firstIov = iovs;
            long runStart = queueAddress[index];
            long runLength = length;
            for (int d = 1; d < segments; d++)
            {
                final long address = queueAddress[(q + d) & (SEND_QUEUE - 1)];
                if (address == runStart + runLength)
                {
                    runLength += length;
                }
                else
                {
                    putIov(iovs++, runStart, runLength);
                    runStart = address;
                    runLength = length;
                }
            }
            putIov(iovs++, runStart, runLength);
            final int c = messages * NativeUdp.CMSG_SPACE_SMALL;
            NativeUdp.putSendMessage(sendVec, h, sendIovAddress + (long)firstIov * NativeUdp.IOVEC_SIZE, iovs - firstIov,
                segments, length, sendControl, c, sendControlAddress + c);
            messageDatagrams[messages++] = segments;
            q += segments;
        }
        return messages;
    }

    private void putIov(final int iov, final long address, final long length)
    {
        sendIov.putLong(iov * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_BASE_OFFSET, address);
        sendIov.putLong(iov * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET, length);
    }

    public int receive(final Receiver receiver, final int limit)
    {
        // the group's results first: see DatagramTransport#receive. A loop over the sockets rather than a test for
        // the group's, so that a job that joined one runs the code that the JIT compiled in a rehearsal that did
        // not: a branch never taken there deoptimizes the packet path in the job's first all-reduces
        final int[] fds = receiveFds;
        int received = 0;
        boolean empty = true;
        for (final int fd : fds)
        {
            received += receiveFrom(fd, receiver, limit - received);
            empty &= lastEmpty;
        }
        drained = empty;
        return received;
    }

    private int receiveFrom(final int fd, final Receiver receiver, final int limit)
    {
        int received = 0;
        lastEmpty = false;
        while (received < limit)
        {
            final int batch = Math.min(nextReceiveBatch, limit - received);
            receiveCalls++;
            final int count = NativeUdp.recvmmsg(fd, receiveVecAddress, batch, NativeUdp.MSG_DONTWAIT);
            if (count <= 0)
            {
                final int error = count < 0 ? errno() : NativeUdp.EAGAIN;
                if (error == NativeUdp.EAGAIN)
                {
                    lastEmpty = true;
                    break;
                }
                if (error == NativeUdp.EINTR || error == ECONNREFUSED)
                {
                    // an ICMP error queued on the connected socket (the appliance was briefly gone): consumed
                    sendErrors++;
                    continue;
                }
                sendErrors++;
                break;
            }
            long bytes = 0;
            for (int i = 0; i < count; i++)
            {
                final int h = i * NativeUdp.MMSGHDR_SIZE;
                final int length = receiveVec.getInt(h + NativeUdp.MSG_LEN_OFFSET);
                bytes += length;
                final int segment = gro ?
                    NativeUdp.groSegmentSize(receiveVec, h, receiveControl, i * NativeUdp.CMSG_SPACE_SMALL) : 0;
                if ((receiveVec.getInt(h + NativeUdp.MSG_FLAGS_OFFSET) & NativeUdp.MSG_TRUNC) != 0 ||
                    (segment > 0 ? segment : length) > maxDatagram)
                {
                    truncated += segment > 0 ? (length + segment - 1) / segment : 1;
                    continue;
                }
                if (segment > 0 && segment < length)
                {
                    groBuffers++;
                    for (int from = 0; from < length; from += segment)
                    {
                        handOver(receiver, receiveViews[i].addressOffset() + from, Math.min(segment, length - from));
                        groSegments++;
                    }
                }
                else
                {
                    handOver(receiver, receiveViews[i].addressOffset(), length);
                }
            }
            if (handOverCount > 0)
            {
                receiver.onDatagrams(handOverViews, handOverLengths, handOverCount);
                handOverCount = 0;
            }
            nextReceiveBatch = NativeUdp.receiveBatchFor(receiveBatch, count, bytes, receiver.checksMacsInLanes());
            received += count;
            if (count < batch)
            {
                lastEmpty = true;
                break;
            }
        }
        return received;
    }

    /** Add a datagram to those handed over at the end of the batch, handing them over first when full. */
    private void handOver(final Receiver receiver, final long address, final int length)
    {
        if (handOverCount == HAND_OVER)
        {
            receiver.onDatagrams(handOverViews, handOverLengths, handOverCount);
            handOverCount = 0;
        }
        handOverViews[handOverCount].wrap(address, length);
        handOverLengths[handOverCount++] = length;
    }

    public boolean drained()
    {
        return drained;
    }

    public void await(final long timeoutMs)
    {
        waiting = true;
        if (wakeupPending)
        {
            waiting = false;
            wakeupPending = false;
            return;
        }
        // the eventfd, then the sockets receive reads (the unicast one last, also for room when sends are queued):
        // a loop, as in receive, so that a job with a results group waits in the code a rehearsal without one compiled
        pollFds.putInt(NativeUdp.POLLFD_FD_OFFSET, eventFd);
        pollFds.putShort(NativeUdp.POLLFD_EVENTS_OFFSET, NativeUdp.POLLIN);
        pollFds.putShort(NativeUdp.POLLFD_REVENTS_OFFSET, (short)0);
        int count = 1;
        for (final int fd : receiveFds)
        {
            pollFds.putInt(count * NativeUdp.POLLFD_SIZE + NativeUdp.POLLFD_FD_OFFSET, fd);
            pollFds.putShort(count * NativeUdp.POLLFD_SIZE + NativeUdp.POLLFD_EVENTS_OFFSET, NativeUdp.POLLIN);
            pollFds.putShort(count * NativeUdp.POLLFD_SIZE + NativeUdp.POLLFD_REVENTS_OFFSET, (short)0);
            count++;
        }
        if (hasQueued())
        {
            pollFds.putShort((count - 1) * NativeUdp.POLLFD_SIZE + NativeUdp.POLLFD_EVENTS_OFFSET,
                (short)(NativeUdp.POLLIN | NativeUdp.POLLOUT));
        }
        NativeUdp.poll(pollAddress, count, (int)Math.max(1, Math.min(Integer.MAX_VALUE, timeoutMs)));
        waiting = false;
        if (pollFds.getShort(NativeUdp.POLLFD_REVENTS_OFFSET) != 0)
        {
            NativeUdp.read(eventFd, eventAddress, 8);
        }
        wakeupPending = false;
    }

    public void wakeup()
    {
        wakeupPending = true;
        if (waiting)
        {
            NativeUdp.write(eventFd, oneAddress, 8);
        }
    }

    /**
     * @return datagrams queued by reference (sent without a copy into the queue), and those of them a flush left
     * queued and so copied after all.
     */
    public long referencesQueued()
    {
        return referencesQueued;
    }

    public long referencesCopied()
    {
        return referencesCopied;
    }

    /**
     * @return GSO messages sent (each carried two or more datagrams).
     */
    public long gsoMessages()
    {
        return gsoMessages;
    }

    /**
     * @return receive buffers that held two or more coalesced (GRO) datagrams, and the datagrams they held.
     */
    public long groBuffers()
    {
        return groBuffers;
    }

    public long groSegments()
    {
        return groSegments;
    }

    public String description()
    {
        final String gso = gsoRequested ? (gsoLimit > 0 ? "UDP GSO up to " + NativeUdp.UDP_MAX_SEGMENTS +
            " segments" : "UDP GSO off") : "UDP GSO off (--gso off)";
        return "native (sendmmsg, " + gso + gsoNote + ", recvmmsg batches of " + receiveBatch +
            NativeUdp.receiveBatchNote() +
            (groRequested ? (gro ? " with UDP GRO" : groNote) : " (UDP GRO off)") + ", poll + eventfd; bound to " +
            bindAddress.getHostAddress() + ")";
    }

    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        socket.close();
        if (multicast != null)
        {
            multicast.close();
        }
        final MemorySegment callState = NativeUdp.allocateCallState(arena);
        NativeUdp.close(callState, eventFd);
        arena.close();
    }
}
