package io.switchml.appliance.transport;

import io.switchml.protocol.udp.NativeUdp;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.telemetry.ErrorLog;
import io.switchml.appliance.telemetry.ShardCounters;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.security.PacketMacBatch;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.nio.ByteOrder;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One data-plane shard of the {@code native} transport: an Agrona {@link Agent} that owns a non-blocking
 * UDP socket opened through {@link NativeUdp}, receives up to a batch of datagrams per recvmmsg(2) into
 * preallocated native buffers (fewer when they are large: {@link NativeUdp#RECEIVE_BATCH_BYTES}), hands each to
 * its {@link ShardProcessor}, queues the results into a preallocated sendmmsg(2) batch and sends the batch once
 * per receive batch.
 * <p>
 * A completed slot's result is written once into the send arena and referenced by one batch entry per
 * destination. A partial send or EAGAIN leaves the rest queued for the next duty cycle (the idle strategy
 * then also waits for the socket to become writable); nothing blocks. A result that finds the batch full
 * even after an early send is dropped and counted (the worker's retransmission recovers it). System-call
 * failures are counted and written to the error log by the periodic housekeeping, never thrown on the
 * packet path. The slot-deadline scan runs in {@link #doWork()} at its interval.
 * <p>
 * Everything here is owned by the agent's thread once it runs; other threads only start and close it
 * through its {@link org.agrona.concurrent.AgentRunner}. No allocation per packet: the native block and
 * the views over it are made once, in the constructor, and the view of the thread's errno in
 * {@link #onStart()}, on the thread that then calls {@link #doWork()}.
 */
final class NativeShardAgent implements Agent, ResultSender
{
    /** Bytes of receive buffer per datagram: the largest IPv4 UDP payload, rounded up. */
    static final int RECEIVE_STRIDE = NativeUdp.MAX_GRO_BUFFER;
    private static final int SEND_CAPACITY = NativeUdp.MAX_MMSG;
    private static final int ALIGNMENT = 64;
    private static final ByteOrder NETWORK = ByteOrder.BIG_ENDIAN;
    /**
     * Longest sleep in poll(2): bounds how late the deadline scan (every {@link DataPlane#DEADLINE_SCAN_INTERVAL_MS}
     * ms) and shutdown can be. A datagram, or room to send when results wait, ends the sleep at once, so no packet
     * waits for it. 20 ms keeps an idle shard at about 60 wake-ups a second; with 1 ms it woke about 930 times a
     * second and took 1.6 to 2.6 % of a core doing nothing, on a host where it may share the cores with workers.
     */
    private static final int IDLE_POLL_TIMEOUT_MS = 20;

    private final int shardId;
    private final int cpu;
    private final ShardProcessor processor;
    private final ShardCounters counters;
    private final ErrorLog errorLog;
    private final long scanIntervalNs;
    private final int batch;
    /** Datagrams the next recvmmsg(2) asks for: {@link #batch} at most, fewer for large datagrams. */
    private int receiveBatch;
    /** Whether the batch being processed had MACs checked in vector lanes: the next one may then be larger. */
    private boolean macsInLanes;
    /**
     * Results to sign before the batch leaves ({@link #sign}), in claim order: each a view of its place in the arena
     * (as long as the result) and its job; hashed together in {@link #signResults()}, at the start of every
     * {@link #flush()}.
     * Every entry but the open claim's has a datagram queued, so there are at most {@link #SEND_CAPACITY} + 1.
     */
    private final UnsafeBuffer[] toSign = views(SEND_CAPACITY + 1);
    private final Job[] toSignJob = new Job[SEND_CAPACITY + 1];
    private int toSignCount;
    /** Whether the open claim's entry is the last of {@link #toSign}, not yet signed. */
    private boolean claimToSign;
    private final PacketMacBatch resultMacs = new PacketMacBatch();
    private final int fd;
    private final int port;
    private final String description;
    private final Arena arena;
    private final MemorySegment callState;
    private final long base;
    private final UnsafeBuffer meta;
    /** The sender of each datagram held in the processor's {@link MacPrecheck}. */
    private final long[] heldSenders = new long[MacPrecheck.CAPACITY];
    private final UnsafeBuffer outView = new UnsafeBuffer(0L, 0);
    private final UnsafeBuffer errno = new UnsafeBuffer(0L, 0);
    private final PollIdleStrategy idleStrategy;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final CountDownLatch started = new CountDownLatch(1);

    private final int recvMsgsOffset;
    private final int recvNamesOffset;
    private final int recvControlOffset;
    private final boolean gro;
    private final int recvBuffersOffset;
    private final int sendMsgsOffset;
    private final int sendIovOffset;
    private final int gsoMsgsOffset;
    private final int gsoControlOffset;
    private final int[] gsoRun = new int[SEND_CAPACITY];
    private final DestinationGrouper grouper = new DestinationGrouper(SEND_CAPACITY);
    /** Whether the queue has been grouped since its last datagram was queued, and what grouping found. */
    private boolean grouped;
    private boolean coalescable;
    private boolean gsoSend = true;
    private final int sendNamesOffset;
    private final int arenaOffset;
    private final int arenaCapacity;
    private final int scratchOffset;

    private int sendHead;
    private int sendCount;
    private int arenaPosition;
    private int claimOffset;
    private int claimLength;
    private boolean claimInArena;
    private int claimReferences;
    private long nextScanNs;
    private long receiveCalls;
    private long sendCalls;

    private volatile String pinning;
    private volatile long receiveErrors;
    private volatile long sendErrors;
    private volatile long sendDrops;
    private volatile int lastReceiveErrno;
    private volatile int lastSendErrno;
    private long reportedReceiveErrors;
    private long reportedSendErrors;
    private long reportedSendDrops;

    /**
     * Open and bind the shard's socket and allocate its buffers; the agent runs once an
     * {@link org.agrona.concurrent.AgentRunner} starts it.
     *
     * @param processorFactory makes the shard's processor with this agent as its result sender.
     * @param bindAddress      IPv4 address to bind.
     * @param bindPort         port to bind, 0 for any.
     * @param cpu              CPU to pin the agent's thread to, or -1.
     * @param batch            datagrams per recvmmsg.
     * @param idleSpins        idle turns before waiting in poll.
     * @param socketBufferBytes SO_RCVBUF and SO_SNDBUF (forced past the system limit when privileged).
     * @param multicastTtl     TTL of multicast results, or -1 when multicast is off.
     * @throws IOException naming the call that failed.
     */
    NativeShardAgent(
        final int shardId,
        final java.util.function.Function<ResultSender, ShardProcessor> processorFactory,
        final ShardCounters counters,
        final ErrorLog errorLog,
        final Inet4Address bindAddress,
        final int bindPort,
        final int cpu,
        final int batch,
        final int idleSpins,
        final int socketBufferBytes,
        final int multicastTtl,
        final long scanIntervalNs) throws IOException
    {
        if (!NativeUdp.isAvailable())
        {
            throw new IOException("native transport unavailable: " + NativeUdp.unavailabilityCause());
        }
        this.shardId = shardId;
        this.cpu = cpu;
        this.counters = counters;
        this.errorLog = errorLog;
        this.batch = batch;
        this.receiveBatch = batch;
        this.scanIntervalNs = scanIntervalNs;

        int offset = 0;
        recvMsgsOffset = offset;
        offset = align(offset + batch * NativeUdp.MMSGHDR_SIZE);
        final int recvIovOffset = offset;
        offset = align(offset + batch * NativeUdp.IOVEC_SIZE);
        recvNamesOffset = offset;
        offset = align(offset + batch * NativeUdp.SOCKADDR_IN_SIZE);
        recvControlOffset = offset;
        offset = align(offset + batch * NativeUdp.CMSG_SPACE_SMALL);
        sendMsgsOffset = offset;
        offset = align(offset + SEND_CAPACITY * NativeUdp.MMSGHDR_SIZE);
        sendIovOffset = offset;
        offset = align(offset + SEND_CAPACITY * NativeUdp.IOVEC_SIZE);
        gsoMsgsOffset = offset;
        offset = align(offset + SEND_CAPACITY * NativeUdp.MMSGHDR_SIZE);
        gsoControlOffset = offset;
        offset = align(offset + SEND_CAPACITY * NativeUdp.CMSG_SPACE_SMALL);
        sendNamesOffset = offset;
        offset = align(offset + SEND_CAPACITY * NativeUdp.SOCKADDR_IN_SIZE);
        final int pollfdOffset = offset;
        offset = align(offset + NativeUdp.POLLFD_SIZE);
        final int optionOffset = offset;
        offset = align(offset + 64);
        recvBuffersOffset = offset;
        offset += batch * RECEIVE_STRIDE;
        arenaOffset = offset;
        arenaCapacity = Math.max(2 * batch, 16) * RECEIVE_STRIDE;
        offset += arenaCapacity;
        scratchOffset = offset;
        offset += RECEIVE_STRIDE;

        arena = Arena.ofShared();
        int socketFd = -1;
        try
        {
            final MemorySegment block = arena.allocate(offset, 4096);
            callState = NativeUdp.allocateCallState(arena);
            base = block.address();
            meta = new UnsafeBuffer(base, offset);
            errno.wrap(base + optionOffset, Integer.BYTES);

            for (int i = 0; i < batch; i++)
            {
                final int msg = recvMsgsOffset + i * NativeUdp.MMSGHDR_SIZE;
                final int iov = recvIovOffset + i * NativeUdp.IOVEC_SIZE;
                meta.putLong(msg + NativeUdp.MSG_NAME_OFFSET, base + recvNamesOffset + (long)i * NativeUdp.SOCKADDR_IN_SIZE);
                meta.putInt(msg + NativeUdp.MSG_NAMELEN_OFFSET, NativeUdp.SOCKADDR_IN_SIZE);
                meta.putLong(msg + NativeUdp.MSG_IOV_OFFSET, base + iov);
                meta.putLong(msg + NativeUdp.MSG_IOVLEN_OFFSET, 1L);
                meta.putLong(iov + NativeUdp.IOV_BASE_OFFSET, base + recvBuffersOffset + (long)i * RECEIVE_STRIDE);
                meta.putLong(iov + NativeUdp.IOV_LEN_OFFSET, DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1);
            }
            for (int i = 0; i < SEND_CAPACITY; i++)
            {
                final int msg = sendMsgsOffset + i * NativeUdp.MMSGHDR_SIZE;
                final int name = sendNamesOffset + i * NativeUdp.SOCKADDR_IN_SIZE;
                meta.putLong(msg + NativeUdp.MSG_NAME_OFFSET, base + name);
                meta.putInt(msg + NativeUdp.MSG_NAMELEN_OFFSET, NativeUdp.SOCKADDR_IN_SIZE);
                meta.putLong(msg + NativeUdp.MSG_IOV_OFFSET, base + sendIovOffset + (long)i * NativeUdp.IOVEC_SIZE);
                meta.putLong(msg + NativeUdp.MSG_IOVLEN_OFFSET, 1L);
                meta.putShort(name + NativeUdp.SIN_FAMILY_OFFSET, (short)NativeUdp.AF_INET);
            }

            socketFd = NativeUdp.socket(callState, NativeUdp.AF_INET,
                NativeUdp.SOCK_DGRAM | NativeUdp.SOCK_NONBLOCK | NativeUdp.SOCK_CLOEXEC, 0);
            if (socketFd < 0)
            {
                throw new IOException("socket(AF_INET, SOCK_DGRAM) failed: " + NativeUdp.describeErrno(NativeUdp.errno(callState)));
            }
            final int receiveBytes = setBufferSize(socketFd, optionOffset, NativeUdp.SO_RCVBUFFORCE, NativeUdp.SO_RCVBUF,
                socketBufferBytes);
            final int sendBytes = setBufferSize(socketFd, optionOffset, NativeUdp.SO_SNDBUFFORCE, NativeUdp.SO_SNDBUF,
                socketBufferBytes);
            final int bindIp = bindAddress.hashCode();
            if (multicastTtl >= 0)
            {
                setIntOption(socketFd, optionOffset, NativeUdp.IPPROTO_IP, NativeUdp.IP_MULTICAST_TTL, multicastTtl);
                setIntOption(socketFd, optionOffset, NativeUdp.IPPROTO_IP, NativeUdp.IP_MULTICAST_LOOP, 1);
                if (bindIp != 0)
                {
                    meta.putInt(optionOffset, bindIp, NETWORK);
                    if (NativeUdp.setsockopt(callState, socketFd, NativeUdp.IPPROTO_IP, NativeUdp.IP_MULTICAST_IF,
                        base + optionOffset, 4) != 0)
                    {
                        throw new IOException("setsockopt(IP_MULTICAST_IF " + bindAddress.getHostAddress() + ") failed: " +
                            NativeUdp.describeErrno(NativeUdp.errno(callState)));
                    }
                }
            }

            meta.setMemory(optionOffset, 64, (byte)0);
            meta.putShort(optionOffset + NativeUdp.SIN_FAMILY_OFFSET, (short)NativeUdp.AF_INET);
            meta.putShort(optionOffset + NativeUdp.SIN_PORT_OFFSET, (short)bindPort, NETWORK);
            meta.putInt(optionOffset + NativeUdp.SIN_ADDR_OFFSET, bindIp, NETWORK);
            if (NativeUdp.bind(callState, socketFd, base + optionOffset, NativeUdp.SOCKADDR_IN_SIZE) != 0)
            {
                throw new IOException("bind(" + bindAddress.getHostAddress() + ":" + bindPort + ") failed: " +
                    NativeUdp.describeErrno(NativeUdp.errno(callState)));
            }
            meta.putInt(optionOffset + 32, NativeUdp.SOCKADDR_IN_SIZE);
            if (NativeUdp.getsockname(callState, socketFd, base + optionOffset, base + optionOffset + 32) != 0)
            {
                throw new IOException("getsockname failed: " + NativeUdp.describeErrno(NativeUdp.errno(callState)));
            }
            port = meta.getShort(optionOffset + NativeUdp.SIN_PORT_OFFSET, NETWORK) & 0xFFFF;
            fd = socketFd;
            // UDP GRO: a worker's GSO burst of equal-size updates arrives as one buffer with its segment size in a
            // control message (on loopback the kernel does not split it at all), and is split here
            meta.putInt(optionOffset, 1);
            gro = NativeUdp.setsockopt(callState, socketFd, NativeUdp.SOL_UDP, NativeUdp.UDP_GRO, base + optionOffset, 4) == 0;
            for (int i = 0; i < batch; i++)
            {
                final int msg = recvMsgsOffset + i * NativeUdp.MMSGHDR_SIZE;
                meta.putLong(msg + NativeUdp.MSG_CONTROL_OFFSET, gro ? base + recvControlOffset + (long)i * NativeUdp.CMSG_SPACE_SMALL : 0L);
                meta.putLong(msg + NativeUdp.MSG_CONTROLLEN_OFFSET, gro ? NativeUdp.CMSG_SPACE_SMALL : 0L);
            }

            final UnsafeBuffer pollfd = new UnsafeBuffer(base + pollfdOffset, NativeUdp.POLLFD_SIZE);
            idleStrategy = new PollIdleStrategy(pollfd, base + pollfdOffset, fd, idleSpins, IDLE_POLL_TIMEOUT_MS);
            processor = processorFactory.apply(this);
            description = "recvmmsg batch " + batch + NativeUdp.receiveBatchNote() +
                (gro ? " with UDP GRO" : " (UDP GRO unavailable)") + ", sendmmsg batch " + SEND_CAPACITY + " datagrams / " +
                arenaCapacity + " bytes, SO_RCVBUF " + receiveBytes + ", SO_SNDBUF " + sendBytes + ", idle " + idleSpins +
                " spins then poll(" + IDLE_POLL_TIMEOUT_MS + " ms)";
        }
        catch (final IOException | RuntimeException ex)
        {
            if (socketFd >= 0)
            {
                NativeUdp.close(NativeUdp.allocateCallState(arena), socketFd);
            }
            arena.close();
            throw ex;
        }
    }

    private int setBufferSize(final int socketFd, final int optionOffset, final int forceOption, final int option, final int bytes)
        throws IOException
    {
        meta.putInt(optionOffset, bytes);
        if (NativeUdp.setsockopt(callState, socketFd, NativeUdp.SOL_SOCKET, forceOption, base + optionOffset, 4) != 0 &&
            NativeUdp.setsockopt(callState, socketFd, NativeUdp.SOL_SOCKET, option, base + optionOffset, 4) != 0)
        {
            throw new IOException("setsockopt(SOL_SOCKET, " + option + ", " + bytes + ") failed: " +
                NativeUdp.describeErrno(NativeUdp.errno(callState)));
        }
        meta.putInt(optionOffset + 8, 4);
        if (NativeUdp.getsockopt(callState, socketFd, NativeUdp.SOL_SOCKET, option, base + optionOffset,
            base + optionOffset + 8) != 0)
        {
            return -1;
        }
        return meta.getInt(optionOffset);
    }

    private void setIntOption(final int socketFd, final int optionOffset, final int level, final int option, final int value)
        throws IOException
    {
        meta.putInt(optionOffset, value);
        if (NativeUdp.setsockopt(callState, socketFd, level, option, base + optionOffset, 4) != 0)
        {
            throw new IOException("setsockopt(" + level + ", " + option + ", " + value + ") failed: " +
                NativeUdp.describeErrno(NativeUdp.errno(callState)));
        }
    }

    private static int align(final int offset)
    {
        return (offset + ALIGNMENT - 1) & -ALIGNMENT;
    }

    /**
     * @return the bound UDP port.
     */
    int port()
    {
        return port;
    }

    ShardProcessor processor()
    {
        return processor;
    }

    PollIdleStrategy idleStrategy()
    {
        return idleStrategy;
    }

    /**
     * @return the socket's buffer sizes and batch sizes, for the start-up log.
     */
    String description()
    {
        return description;
    }

    /**
     * @return "pinned to cpu N", "not pinned: why" or "not pinned (...)", once the agent has started.
     */
    String awaitPinning(final long timeoutMs) throws InterruptedException
    {
        if (!started.await(timeoutMs, TimeUnit.MILLISECONDS))
        {
            return "not started within " + timeoutMs + " ms";
        }
        return pinning;
    }

    /**
     * @return results dropped because the send batch was full.
     */
    long sendDrops()
    {
        return sendDrops;
    }

    /**
     * @return failed recvmmsg calls and failed sendmmsg messages (EAGAIN aside).
     */
    long syscallErrors()
    {
        return receiveErrors + sendErrors;
    }

    /**
     * @return recvmmsg calls made; for tests on the agent's own thread.
     */
    long receiveCalls()
    {
        return receiveCalls;
    }

    /**
     * @return sendmmsg calls made; for tests on the agent's own thread.
     */
    /**
     * Keep a received datagram for {@link #processHeld}, which checks the MACs of the held datagrams together first;
     * when {@link MacPrecheck#CAPACITY} are held, process those now.
     */
    private void hold(final long address, final int length, final long senderKey, final long nowNs)
    {
        final MacPrecheck precheck = processor.macPrecheck();
        if (precheck.isFull())
        {
            processHeld(nowNs);
        }
        heldSenders[precheck.add(address, length)] = senderKey;
    }

    /**
     * Check the held datagrams' MACs together, then hand each to the processor in order.
     */
    private void processHeld(final long nowNs)
    {
        final MacPrecheck precheck = processor.macPrecheck();
        final int held = precheck.size();
        macsInLanes |= precheck.run();
        for (int i = 0; i < held; i++)
        {
            final UnsafeBuffer view = precheck.view(i);
            processor.onPacket(view, 0, view.capacity(), heldSenders[i], nowNs, i);
        }
        precheck.clear();
    }

    private static UnsafeBuffer[] views(final int count)
    {
        final UnsafeBuffer[] views = new UnsafeBuffer[count];
        for (int i = 0; i < count; i++)
        {
            views[i] = new UnsafeBuffer(0L, 0);
        }
        return views;
    }

    long sendCalls()
    {
        return sendCalls;
    }

    public String roleName()
    {
        return "switchml-shard-" + shardId;
    }

    public void onStart()
    {
        if (cpu >= 0)
        {
            final String failure = CpuAffinity.pinCurrentThread(cpu);
            pinning = failure == null ? "pinned to cpu " + cpu : "not pinned: " + failure;
        }
        else
        {
            pinning = "not pinned (no switchml.appliance.shard.cpus configured)";
        }
        errno.wrap(NativeUdp.errnoAddress(), Integer.BYTES);
        nextScanNs = System.nanoTime() + scanIntervalNs;
        started.countDown();
    }

    public int doWork()
    {
        int workCount = 0;
        if (sendHead < sendCount)
        {
            workCount += flush();
        }

        final int received = NativeUdp.recvmmsg(fd, base + recvMsgsOffset, receiveBatch, NativeUdp.MSG_DONTWAIT);
        receiveCalls++;
        final int receiveErrno = received < 0 ? errno.getInt(0) : 0;
        long nowNs = System.nanoTime();
        if (received > 0)
        {
            long bytes = 0;
            for (int i = 0; i < received; i++)
            {
                final int msg = recvMsgsOffset + i * NativeUdp.MMSGHDR_SIZE;
                final int name = recvNamesOffset + i * NativeUdp.SOCKADDR_IN_SIZE;
                final int length = meta.getInt(msg + NativeUdp.MSG_LEN_OFFSET);
                bytes += length;
                final long senderKey = meta.getShort(name + NativeUdp.SIN_FAMILY_OFFSET) == NativeUdp.AF_INET ?
                    AddressKey.of(meta.getInt(name + NativeUdp.SIN_ADDR_OFFSET, NETWORK),
                        meta.getShort(name + NativeUdp.SIN_PORT_OFFSET, NETWORK)) :
                    AddressKey.NONE;
                meta.putInt(msg + NativeUdp.MSG_NAMELEN_OFFSET, NativeUdp.SOCKADDR_IN_SIZE);
                final long buffer = base + recvBuffersOffset + (long)i * RECEIVE_STRIDE;
                final int segment = gro ?
                    NativeUdp.groSegmentSize(meta, msg, meta, recvControlOffset + i * NativeUdp.CMSG_SPACE_SMALL) : 0;
                if (segment > 0 && segment < length)
                {
                    for (int from = 0; from < length; from += segment)
                    {
                        hold(buffer + from, Math.min(segment, length - from), senderKey, nowNs);
                    }
                }
                else
                {
                    hold(buffer, length, senderKey, nowNs);
                }
            }
            processHeld(nowNs);
            flush();
            receiveBatch = NativeUdp.receiveBatchFor(batch, received, bytes, macsInLanes);
            macsInLanes = false;
            final long endNs = System.nanoTime();
            counters.onDutyCycleNs(endNs - nowNs);
            nowNs = endNs;
            workCount += received;
        }
        else if (received < 0 && receiveErrno != NativeUdp.EAGAIN && receiveErrno != NativeUdp.EINTR)
        {
            receiveErrors++;
            lastReceiveErrno = receiveErrno;
        }

        if (nowNs - nextScanNs >= 0)
        {
            nextScanNs = nowNs + scanIntervalNs;
            processor.scanSlotDeadlines(nowNs);
            reportErrors();
            workCount++;
        }
        idleStrategy.awaitWritable(sendHead < sendCount);
        return workCount;
    }

    /**
     * Send what is queued, as far as the socket takes it without blocking.
     *
     * @return datagrams sent.
     */
    private int flush()
    {
        if (toSignCount > 0)
        {
            signResults();
        }
        int sent = 0;
        while (sendHead < sendCount)
        {
            final int messages = gsoSend ? coalesce() : 0;
            final int result = messages > 0 ?
                NativeUdp.sendmmsg(fd, base + gsoMsgsOffset, messages, NativeUdp.MSG_DONTWAIT) :
                NativeUdp.sendmmsg(fd, base + sendMsgsOffset + (long)sendHead * NativeUdp.MMSGHDR_SIZE,
                    sendCount - sendHead, NativeUdp.MSG_DONTWAIT);
            sendCalls++;
            if (result > 0)
            {
                final int datagrams = messages > 0 ? datagramsOf(result) : result;
                sendHead += datagrams;
                sent += datagrams;
                continue;
            }
            final int sendErrno = result < 0 ? errno.getInt(0) : NativeUdp.EAGAIN;
            if (sendErrno == NativeUdp.EAGAIN || sendErrno == NativeUdp.ENOBUFS || sendErrno == NativeUdp.EINTR)
            {
                break;
            }
            if (messages > 0 && gsoRun[0] > 1 && (sendErrno == EINVAL || sendErrno == EIO || sendErrno == EMSGSIZE))
            {
                // the kernel or the device refuses UDP GSO here (a segment above the route's MTU): one datagram each
                gsoSend = false;
                continue;
            }
            // the first datagram failed for itself (EPERM from a firewall, an unroutable address): skip it
            sendErrors++;
            lastSendErrno = sendErrno;
            sendHead += messages > 0 ? gsoRun[0] : 1;
        }
        if (sendHead == sendCount)
        {
            sendHead = 0;
            sendCount = 0;
            arenaPosition = 0;
        }
        return sent;
    }

    private static final int EIO = 5;
    private static final int EINVAL = 22;
    private static final int EMSGSIZE = 90;

    /**
     * Lay the queued datagrams out as sendmmsg messages in the GSO vector: the {@link DestinationGrouper} first brings
     * the datagrams to one destination with one length together (the results of a batch's slots multicast to a job's
     * group, or sent to one member); each run of them becomes one message over their consecutive iovecs with a
     * UDP_SEGMENT control message, at most 64 segments and 65,507 bytes; the kernel makes the datagrams.
     *
     * @return messages laid out, or 0 when no run can be longer than one datagram (then the batch goes out as queued
     * and nothing was copied).
     */
    private int coalesce()
    {
        // unicast batches alternate destinations: bring each destination's datagrams together first, once per batch
        // (a flush that resumes after a partial send finds the rest already grouped)
        if (!grouped)
        {
            coalescable = grouper.group(meta, sendIovOffset, sendNamesOffset, sendHead, sendCount);
            grouped = true;
        }
        if (!coalescable)
        {
            return 0;
        }
        int messages = 0;
        int i = sendHead;
        while (i < sendCount)
        {
            final int name = sendNamesOffset + i * NativeUdp.SOCKADDR_IN_SIZE;
            final long destination = meta.getLong(name);
            final long length = meta.getLong(sendIovOffset + i * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET);
            int run = 1;
            while (i + run < sendCount && run < NativeUdp.UDP_MAX_SEGMENTS && (run + 1) * length <= NativeUdp.MAX_UDP_PAYLOAD &&
                meta.getLong(sendNamesOffset + (i + run) * NativeUdp.SOCKADDR_IN_SIZE) == destination &&
                meta.getLong(sendIovOffset + (i + run) * NativeUdp.IOVEC_SIZE + NativeUdp.IOV_LEN_OFFSET) == length)
            {
                run++;
            }
            final int to = gsoMsgsOffset + messages * NativeUdp.MMSGHDR_SIZE;
            // the first datagram's header gives the destination and the first of the run's consecutive iovecs
            meta.putBytes(to, meta, sendMsgsOffset + i * NativeUdp.MMSGHDR_SIZE, NativeUdp.MMSGHDR_SIZE);
            final int cmsg = gsoControlOffset + messages * NativeUdp.CMSG_SPACE_SMALL;
            NativeUdp.putSendMessage(meta, to, meta.getLong(to + NativeUdp.MSG_IOV_OFFSET), run, run, (int)length,
                meta, cmsg, base + cmsg);
            gsoRun[messages++] = run;
            i += run;
        }
        return messages;
    }

    /**
     * @return datagrams carried by the first {@code messages} messages of the GSO vector.
     */
    private int datagramsOf(final int messages)
    {
        int datagrams = 0;
        for (int m = 0; m < messages; m++)
        {
            datagrams += gsoRun[m];
        }
        return datagrams;
    }

    public MutableDirectBuffer claim(final int capacityBytes)
    {
        if (arenaPosition + capacityBytes > arenaCapacity && sendHead < sendCount)
        {
            flush();
        }
        if (arenaPosition + capacityBytes <= arenaCapacity)
        {
            claimOffset = arenaOffset + arenaPosition;
            claimInArena = true;
        }
        else
        {
            claimOffset = scratchOffset;
            claimInArena = false;
        }
        claimLength = 0;
        claimReferences = 0;
        outView.wrap(base + claimOffset, capacityBytes);
        return outView;
    }

    public int claimOffset()
    {
        return 0;
    }

    /**
     * Sign the open claim's result when the batch leaves (with the others of one job and length, in vector lanes
     * where this JVM has them). A result outside the arena is never sent ({@link #queue} drops and counts it), so
     * there is nothing to sign.
     */
    public void sign(final Job job, final int lengthBytes)
    {
        if (!claimInArena)
        {
            return;
        }
        toSign[toSignCount].wrap(base + claimOffset, lengthBytes);
        toSignJob[toSignCount] = job;
        toSignCount++;
        claimToSign = true;
    }

    /**
     * Hash the MACs of the results signed since the last flush, a run of one job and length at a time, and write
     * them into the results' MAC fields.
     */
    private void signResults()
    {
        int i = 0;
        while (i < toSignCount)
        {
            final Job job = toSignJob[i];
            final int length = toSign[i].capacity();
            int n = 0;
            while (i + n < toSignCount && n < PacketMacBatch.LANES && toSignJob[i + n] == job &&
                toSign[i + n].capacity() == length)
            {
                resultMacs.add(toSign[i + n], 0);
                n++;
            }
            if (resultMacs.sign(job.macK0(), job.macK1(), length))
            {
                counters.onMacsInLanes(n);
            }
            resultMacs.clear();
            i += n;
        }
        for (int j = 0; j < toSignCount; j++)
        {
            toSignJob[j] = null;
        }
        toSignCount = 0;
        claimToSign = false;
    }

    public boolean sendToMember(final Job job, final int rank, final int lengthBytes)
    {
        return queue(job.memberKey(rank, shardId), lengthBytes);
    }

    public boolean sendToSender(final long senderKey, final int lengthBytes)
    {
        return queue(senderKey, lengthBytes);
    }

    public boolean sendToGroup(final long groupKey, final int lengthBytes)
    {
        return queue(groupKey, lengthBytes);
    }

    private boolean queue(final long key, final int lengthBytes)
    {
        if (!claimInArena || key < 0)
        {
            sendDrops++;
            return false;
        }
        if (sendCount == SEND_CAPACITY)
        {
            flush();
            if (sendCount == SEND_CAPACITY)
            {
                sendDrops++;
                return false;
            }
        }
        grouped = false;
        final int index = sendCount++;
        final int iov = sendIovOffset + index * NativeUdp.IOVEC_SIZE;
        final int name = sendNamesOffset + index * NativeUdp.SOCKADDR_IN_SIZE;
        meta.putLong(iov + NativeUdp.IOV_BASE_OFFSET, base + claimOffset);
        meta.putLong(iov + NativeUdp.IOV_LEN_OFFSET, lengthBytes);
        claimLength = Math.max(claimLength, lengthBytes);
        meta.putShort(name + NativeUdp.SIN_PORT_OFFSET, (short)AddressKey.port(key), NETWORK);
        meta.putInt(name + NativeUdp.SIN_ADDR_OFFSET, AddressKey.ipv4(key), NETWORK);
        claimReferences++;
        return true;
    }

    public void release()
    {
        if (claimInArena && claimReferences > 0)
        {
            arenaPosition = align(claimOffset - arenaOffset + claimLength);
        }
        else if (claimToSign)
        {
            // nothing of it was queued: its place is the next claim's, so it must not be signed later
            toSignJob[--toSignCount] = null;
        }
        claimToSign = false;
        claimInArena = false;
    }

    private void reportErrors()
    {
        final long receiveErrors = this.receiveErrors;
        final long sendErrors = this.sendErrors;
        final long sendDrops = this.sendDrops;
        if (receiveErrors != reportedReceiveErrors)
        {
            errorLog.record(new IOException("shard " + shardId + ": " + (receiveErrors - reportedReceiveErrors) +
                " recvmmsg failure(s), last " + NativeUdp.describeErrno(lastReceiveErrno)));
            reportedReceiveErrors = receiveErrors;
        }
        if (sendErrors != reportedSendErrors)
        {
            errorLog.record(new IOException("shard " + shardId + ": " + (sendErrors - reportedSendErrors) +
                " datagram(s) refused by sendmmsg, last " + NativeUdp.describeErrno(lastSendErrno)));
            reportedSendErrors = sendErrors;
        }
        if (sendDrops != reportedSendDrops)
        {
            errorLog.record(new IOException("shard " + shardId + ": " + (sendDrops - reportedSendDrops) +
                " result(s) dropped: send batch full (socket not writable)"));
            reportedSendDrops = sendDrops;
        }
    }

    public void onClose()
    {
        if (sendHead < sendCount)
        {
            flush();
        }
        closeResources();
    }

    /**
     * Close the socket and free the native memory; idempotent. Only once the agent's thread has stopped.
     */
    void closeResources()
    {
        if (closed.compareAndSet(false, true))
        {
            NativeUdp.close(callState, fd);
            arena.close();
        }
    }
}
