package io.switchml.protocol.udp;

import io.switchml.protocol.NativeCalls;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * Linux UDP socket calls (socket, setsockopt, bind, connect, recvmmsg, sendmmsg, sendmsg, recvmsg, poll, eventfd,
 * close) through the JDK's foreign function interface: no native library of our own, and no allocation per call.
 * Shared by the appliance's shards and the workers' I/O agents (one copy of the bindings for both sides).
 * <p>
 * Every call is linked on one of {@link NativeCalls}' two shapes (six 64-bit arguments, an int or a long back), so that
 * a JVM spins three downcall stubs at start-up rather than one per distinct C signature. Pointer arguments are
 * passed as {@code long} (a pointer and a long are passed alike on LP64 Linux), so that callers pass raw addresses
 * into one preallocated native block instead of slicing {@link MemorySegment}s, which allocates. The handles are
 * static finals invoked with {@code invokeExact} at their exact types, so nothing is boxed.
 * <p>
 * errno: the set-up calls capture it into a call-state segment ({@link #allocateCallState},
 * {@link #errno}), the JDK's exact way. The packet-path calls (recvmmsg, sendmmsg, poll) do not: a
 * captured call state costs a 40-byte slice of the segment per call wherever C2 has not scalar-replaced
 * it (measured: every call in the interpreter and C1, and about 1.4 bytes per packet on a warmed-up
 * shard), while a call with primitive arguments only allocates nothing in any tier. Their
 * caller reads errno from the thread's own errno variable ({@link #errnoAddress()}) right after a failed
 * call. The JVM could in principle change errno in between (a failed futex wait while the thread stops at
 * a safepoint on its way back from native code); that is rare, and on this path it is benign: the caller
 * only tells EAGAIN (retry on the next duty cycle) from a real error (counted, and for a send, the one
 * datagram skipped, which the worker's retransmission recovers).
 * <p>
 * Struct offsets are those of x86-64 and AArch64 Linux (LP64), the platforms {@link #isAvailable()}
 * accepts.
 */
public final class NativeUdp
{
    public static final int AF_INET = 2;
    public static final int SOCK_DGRAM = 2;
    public static final int SOCK_NONBLOCK = 0x800;
    public static final int SOCK_CLOEXEC = 0x80000;
    public static final int SOL_SOCKET = 1;
    public static final int SO_SNDBUF = 7;
    public static final int SO_RCVBUF = 8;
    public static final int SO_SNDBUFFORCE = 32;
    public static final int SO_RCVBUFFORCE = 33;
    public static final int IPPROTO_IP = 0;
    public static final int IP_MULTICAST_IF = 32;
    public static final int IP_MULTICAST_TTL = 33;
    public static final int IP_MULTICAST_LOOP = 34;
    public static final int IP_ADD_MEMBERSHIP = 35;
    public static final int SO_REUSEADDR = 2;
    /** UDP segmentation offload (GSO) and receive coalescing (GRO): level SOL_UDP. */
    public static final int SOL_UDP = 17;
    public static final int UDP_SEGMENT = 103;
    public static final int UDP_GRO = 104;
    /** Most segments one UDP GSO send may carry (UDP_MAX_SEGMENTS of the kernels this runs on). */
    public static final int UDP_MAX_SEGMENTS = 64;
    /** Largest UDP payload of one (GSO) send: 65535 less the IPv4 and UDP headers. */
    public static final int MAX_UDP_PAYLOAD = 65_507;
    /** Bytes of a receive buffer that holds any coalesced (UDP GRO) buffer, or any one datagram, untruncated. */
    public static final int MAX_GRO_BUFFER = 65_536;
    public static final int EFD_NONBLOCK = 0x800;
    public static final int EFD_CLOEXEC = 0x80000;
    /** struct cmsghdr: cmsg_len (size_t), cmsg_level, cmsg_type, then the data, 8-byte aligned. */
    public static final int CMSG_LEN_OFFSET = 0;
    public static final int CMSG_LEVEL_OFFSET = 8;
    public static final int CMSG_TYPE_OFFSET = 12;
    public static final int CMSG_DATA_OFFSET = 16;
    /** CMSG_SPACE of a 2- or 4-byte value (UDP_SEGMENT, UDP_GRO). */
    public static final int CMSG_SPACE_SMALL = 24;
    public static final int MSG_DONTWAIT = 0x40;
    public static final int MSG_TRUNC = 0x20;
    public static final int EINTR = 4;
    public static final int EAGAIN = 11;
    public static final int ENOBUFS = 105;
    public static final short POLLIN = 0x1;
    public static final short POLLOUT = 0x4;
    /** Most messages one sendmmsg or recvmmsg call takes (UIO_MAXIOV). */
    public static final int MAX_MMSG = 1024;
    /**
     * Bytes one recvmmsg call should take in once the datagrams' size is known ({@link #receiveBatchFor}): the caller
     * copies a batch into its buffers and then reads each datagram back, so a batch that outgrows the core's cache is
     * read back from further out. On loopback at k = 8176 (32 KiB datagrams) a batch of 32 is 1 MiB in buffers 64 KiB
     * apart. Per-rank loopback cells (4 workers and the appliance on 2 cores, 100 MB), 6 interleaved pairs of the
     * appliance's batch at 4 against 32: its shard thread's CPU 1.73-2.03 s against 1.96-2.64 s and TAT p50 144-186 ms
     * against 178-277 ms, lower in every pair (the two pairs whose cells both had CPUs 0 and 1 sharing a cache
     * throughout: 144 against 178 ms, 186 against 201 ms; docs/bench/worker-transport-2026-11-25.md, session 38). Small
     * datagrams keep the configured batch (k = 256: 32 of about 1 KiB).
     */
    public static final int RECEIVE_BATCH_BYTES = 128 * 1024;
    /**
     * {@link #RECEIVE_BATCH_BYTES} for a receiver that checks the datagrams' MACs in vector lanes (PacketMacBatch): it
     * reads each batch once more right after the copy, and eight of loopback's 32 KiB datagrams fill the eight lanes
     * where four fill half. Loopback, MAC on, 4 workers and the appliance on 2 cores, 100 MB, 3 interleaved pairs each
     * of one JVM per rank and of the host agent, 128 against 256 KiB for both sides (session 48): the appliance's CPU
     * per GB 2.42-3.03 s against 1.93-2.39, lower in every pair, TAT p50 median 360 against 323 ms; with MAC off (2
     * pairs) 256 KiB was slower (TAT 179-253 against 170-189 ms, the appliance 0.92-0.98 s per GB against
     * 0.83-1.06), hence only for MAC lanes. 512 KiB, which would fill the native library's sixteen lanes with 32 KiB
     * datagrams, was no better (session 49, 3 such pairs against 256 KiB: the appliance's CPU per GB 1.58-1.99 s
     * against 1.60-2.14, TAT p50 261-328 ms against 240-326).
     */
    public static final int RECEIVE_BATCH_BYTES_MAC_LANES = 256 * 1024;
    /**
     * Fewest datagrams per recvmmsg call that {@link #RECEIVE_BATCH_BYTES} may leave, when the configured batch allows.
     */
    public static final int MIN_RECEIVE_BATCH = 2;

    /** struct sockaddr_in: sin_family (host order), sin_port and sin_addr (network order), 8 bytes of zero. */
    public static final int SOCKADDR_IN_SIZE = 16;
    public static final int SIN_FAMILY_OFFSET = 0;
    public static final int SIN_PORT_OFFSET = 2;
    public static final int SIN_ADDR_OFFSET = 4;

    /** struct iovec. */
    public static final int IOVEC_SIZE = 16;
    public static final int IOV_BASE_OFFSET = 0;
    public static final int IOV_LEN_OFFSET = 8;

    /** struct mmsghdr: a struct msghdr and msg_len. */
    public static final int MMSGHDR_SIZE = 64;
    public static final int MSG_NAME_OFFSET = 0;
    public static final int MSG_NAMELEN_OFFSET = 8;
    public static final int MSG_IOV_OFFSET = 16;
    public static final int MSG_IOVLEN_OFFSET = 24;
    public static final int MSG_CONTROL_OFFSET = 32;
    public static final int MSG_CONTROLLEN_OFFSET = 40;
    public static final int MSG_FLAGS_OFFSET = 48;
    public static final int MSG_LEN_OFFSET = 56;

    /** struct pollfd. */
    public static final int POLLFD_SIZE = 8;
    public static final int POLLFD_FD_OFFSET = 0;
    public static final int POLLFD_EVENTS_OFFSET = 4;
    public static final int POLLFD_REVENTS_OFFSET = 6;

    private static final MethodHandle SOCKET;
    private static final MethodHandle SETSOCKOPT;
    private static final MethodHandle GETSOCKOPT;
    private static final MethodHandle BIND;
    private static final MethodHandle GETSOCKNAME;
    private static final MethodHandle CLOSE;
    private static final MethodHandle STRERROR;
    private static final MethodHandle RECVMMSG;
    private static final MethodHandle SENDMMSG;
    private static final MethodHandle POLL;
    private static final MethodHandle ERRNO_LOCATION;
    private static final MethodHandle CONNECT;
    private static final MethodHandle EVENTFD;
    private static final MethodHandle READ;
    private static final MethodHandle WRITE;
    private static final MethodHandle SENDMSG;
    private static final MethodHandle RECVMSG;
    private static final String UNAVAILABILITY_CAUSE;

    static
    {
        // every call on one of NativeCalls' two shapes: three stubs to spin at start-up instead of fourteen
        final String[] names = {"socket", "setsockopt", "getsockopt", "bind", "getsockname", "close", "connect", "eventfd",
            "strerror", "recvmmsg", "sendmmsg", "poll", "__errno_location", "read", "write", "sendmsg", "recvmsg"};
        // which return a long (ssize_t or a pointer) rather than an int
        final boolean[] returnsLong = {false, false, false, false, false, false, false, false,
            true, false, false, false, true, true, true, false, false};
        final int capturingCalls = 8;
        final MethodHandle[] handles = new MethodHandle[names.length];
        String cause = null;
        final String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        final String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (!os.startsWith("linux"))
        {
            cause = "not Linux: " + os;
        }
        else if (!arch.equals("amd64") && !arch.equals("x86_64") && !arch.equals("aarch64"))
        {
            cause = "struct layouts not known for " + arch;
        }
        else
        {
            try
            {
                final SymbolLookup libc = Linker.nativeLinker().defaultLookup();
                for (int i = 0; i < names.length; i++)
                {
                    final String name = names[i];
                    final MemorySegment symbol = libc.find(name)
                        .orElseThrow(() -> new UnsatisfiedLinkError("no symbol " + name + " in the C library"));
                    final Linker.Option[] options =
                        i < capturingCalls ? new Linker.Option[] {NativeCalls.CAPTURE_ERRNO} : new Linker.Option[0];
                    handles[i] =
                        returnsLong[i] ? NativeCalls.longCall(symbol, options) : NativeCalls.intCall(symbol, options);
                }
                probe(handles[0], handles[5]);
            }
            catch (final Throwable ex)
            {
                cause = ex.toString();
            }
        }
        final boolean ok = cause == null;
        SOCKET = ok ? handles[0] : null;
        SETSOCKOPT = ok ? handles[1] : null;
        GETSOCKOPT = ok ? handles[2] : null;
        BIND = ok ? handles[3] : null;
        GETSOCKNAME = ok ? handles[4] : null;
        CLOSE = ok ? handles[5] : null;
        CONNECT = ok ? handles[6] : null;
        EVENTFD = ok ? handles[7] : null;
        STRERROR = ok ? handles[8] : null;
        RECVMMSG = ok ? handles[9] : null;
        SENDMMSG = ok ? handles[10] : null;
        POLL = ok ? handles[11] : null;
        ERRNO_LOCATION = ok ? handles[12] : null;
        READ = ok ? handles[13] : null;
        WRITE = ok ? handles[14] : null;
        SENDMSG = ok ? handles[15] : null;
        RECVMSG = ok ? handles[16] : null;
        UNAVAILABILITY_CAUSE = cause;
    }

    private NativeUdp()
    {
    }

    private static void probe(
        final MethodHandle socket, final MethodHandle close) throws Throwable
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment state = NativeCalls.allocateCallState(arena);
            final int fd = (int)socket.invokeExact(
                state, (long)AF_INET, (long)(SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC), 0L, 0L, 0L, 0L);
            if (fd < 0)
            {
                throw new IllegalStateException("socket(AF_INET, SOCK_DGRAM) failed: errno " +
                    NativeCalls.errno(state));
            }
            final int ignore = (int)close.invokeExact(state, (long)fd, 0L, 0L, 0L, 0L, 0L);
        }
    }

    /**
     * @return true when the calls link and a UDP socket can be opened here.
     */
    public static boolean isAvailable()
    {
        return UNAVAILABILITY_CAUSE == null;
    }

    /**
     * @return why the native transport is unavailable, or null.
     */
    public static String unavailabilityCause()
    {
        return UNAVAILABILITY_CAUSE;
    }

    /**
     * @return a segment to capture errno in; one per thread that makes calls.
     */
    public static MemorySegment allocateCallState(final Arena arena)
    {
        return NativeCalls.allocateCallState(arena);
    }

    /**
     * @return errno as captured by the last call made with this call state.
     */
    public static int errno(final MemorySegment callState)
    {
        return NativeCalls.errno(callState);
    }

    public static int socket(final MemorySegment callState, final int domain, final int type, final int protocol)
    {
        try
        {
            return (int)SOCKET.invokeExact(callState, (long)domain, (long)type, (long)protocol, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    public static int setsockopt(
        final MemorySegment callState, final int fd, final int level, final int option, final long valueAddress, final int length)
    {
        try
        {
            return (int)SETSOCKOPT.invokeExact(
                callState, (long)fd, (long)level, (long)option, valueAddress, (long)length, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    public static int getsockopt(
        final MemorySegment callState, final int fd, final int level, final int option, final long valueAddress,
        final long lengthAddress)
    {
        try
        {
            return (int)GETSOCKOPT.invokeExact(
                callState, (long)fd, (long)level, (long)option, valueAddress, lengthAddress, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    public static int bind(final MemorySegment callState, final int fd, final long sockaddrAddress, final int length)
    {
        try
        {
            return (int)BIND.invokeExact(callState, (long)fd, sockaddrAddress, (long)length, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    public static int getsockname(final MemorySegment callState, final int fd, final long sockaddrAddress, final long lengthAddress)
    {
        try
        {
            return (int)GETSOCKNAME.invokeExact(callState, (long)fd, sockaddrAddress, lengthAddress, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * @return the address of the calling thread's errno: read it (4 bytes) on that thread only, right after
     * a failed {@link #recvmmsg}, {@link #sendmmsg} or {@link #poll}.
     */
    public static long errnoAddress()
    {
        try
        {
            return (long)ERRNO_LOCATION.invokeExact(0L, 0L, 0L, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * recvmmsg(2) without a timeout; errno is left in the thread's errno.
     *
     * @return messages received, or -1.
     */
    public static int recvmmsg(final int fd, final long msgvecAddress, final int vlen, final int flags)
    {
        try
        {
            return (int)RECVMMSG.invokeExact((long)fd, msgvecAddress, (long)vlen, (long)flags, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * sendmmsg(2); errno is left in the thread's errno.
     *
     * @return messages sent, or -1 when the first one failed.
     */
    public static int sendmmsg(final int fd, final long msgvecAddress, final int vlen, final int flags)
    {
        try
        {
            return (int)SENDMMSG.invokeExact((long)fd, msgvecAddress, (long)vlen, (long)flags, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * poll(2).
     *
     * @return descriptors ready, 0 on timeout, or -1.
     */
    public static int poll(final long pollfdsAddress, final long count, final int timeoutMs)
    {
        try
        {
            return (int)POLL.invokeExact(pollfdsAddress, count, (long)timeoutMs, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    public static int connect(final MemorySegment callState, final int fd, final long sockaddrAddress, final int length)
    {
        try
        {
            return (int)CONNECT.invokeExact(callState, (long)fd, sockaddrAddress, (long)length, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * eventfd(2): a descriptor another thread can make readable, to end a {@link #poll}.
     */
    public static int eventfd(final MemorySegment callState, final int initialValue, final int flags)
    {
        try
        {
            return (int)EVENTFD.invokeExact(callState, (long)initialValue, (long)flags, 0L, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * read(2); errno is left in the thread's errno.
     */
    public static long read(final int fd, final long bufferAddress, final long count)
    {
        try
        {
            return (long)READ.invokeExact((long)fd, bufferAddress, count, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * write(2); errno is left in the thread's errno.
     */
    public static long write(final int fd, final long bufferAddress, final long count)
    {
        try
        {
            return (long)WRITE.invokeExact((long)fd, bufferAddress, count, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * sendmsg(2), for a GSO send whose control message carries UDP_SEGMENT; errno is left in the thread's errno.
     *
     * @return bytes sent, or -1.
     */
    public static int sendmsg(final int fd, final long msghdrAddress, final int flags)
    {
        try
        {
            return (int)SENDMSG.invokeExact((long)fd, msghdrAddress, (long)flags, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * recvmsg(2), for a GRO receive whose control message carries the segment size; errno is left in the thread's
     * errno.
     *
     * @return bytes received, or -1.
     */
    public static int recvmsg(final int fd, final long msghdrAddress, final int flags)
    {
        try
        {
            return (int)RECVMSG.invokeExact((long)fd, msghdrAddress, (long)flags, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    public static int close(final MemorySegment callState, final int fd)
    {
        try
        {
            return (int)CLOSE.invokeExact(callState, (long)fd, 0L, 0L, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * Allocates: for error messages only.
     *
     * @return "EAGAIN (Resource temporarily unavailable)"-like text for an errno.
     */
    public static String describeErrno(final int errno)
    {
        try
        {
            final long text = (long)STRERROR.invokeExact((long)errno, 0L, 0L, 0L, 0L, 0L);
            return "errno " + errno + " (" + MemorySegment.ofAddress(text).reinterpret(256).getString(0) + ")";
        }
        catch (final Throwable ex)
        {
            return "errno " + errno;
        }
    }

    /**
     * Datagrams for the next recvmmsg call: as many of the size just received as {@link #RECEIVE_BATCH_BYTES} holds
     * ({@link #RECEIVE_BATCH_BYTES_MAC_LANES} when the receiver checked their MACs in vector lanes), within
     * {@link #MIN_RECEIVE_BATCH} and the configured batch.
     *
     * @param batch    the configured batch, the most.
     * @param received datagrams the last call took in, at least 1.
     * @param bytes    their bytes, a GRO buffer's whole length included.
     * @param macLanes whether the receiver checked their MACs in vector lanes.
     * @return the next call's batch.
     */
    public static int receiveBatchFor(final int batch, final int received, final long bytes, final boolean macLanes)
    {
        final long perDatagram = Math.max(1, bytes / received);
        final int budget = macLanes ? RECEIVE_BATCH_BYTES_MAC_LANES : RECEIVE_BATCH_BYTES;
        return (int)Math.min(batch, Math.max(MIN_RECEIVE_BATCH, budget / perDatagram));
    }

    /** @return the rule of {@link #receiveBatchFor} as the transports' start-up descriptions give it. */
    public static String receiveBatchNote()
    {
        return " (" + RECEIVE_BATCH_BYTES / 1024 + " KiB for large datagrams, " + RECEIVE_BATCH_BYTES_MAC_LANES / 1024 +
            " KiB when their MACs are checked in lanes)";
    }

    /**
     * Read the segment size of a coalesced receive from its UDP_GRO control message and re-arm the message's control
     * length for the next recvmmsg (the kernel overwrites it with the length used).
     *
     * @param vec          the buffer holding the mmsghdr.
     * @param msgOffset    offset of the mmsghdr in {@code vec}.
     * @param control      the buffer holding the message's control area of {@link #CMSG_SPACE_SMALL} bytes.
     * @param cmsgOffset   offset of that area in {@code control}.
     * @return the segment size, or 0 when the datagram came alone.
     */
    public static int groSegmentSize(
        final org.agrona.concurrent.UnsafeBuffer vec, final int msgOffset,
        final org.agrona.concurrent.UnsafeBuffer control, final int cmsgOffset)
    {
        final long controlLength = vec.getLong(msgOffset + MSG_CONTROLLEN_OFFSET);
        vec.putLong(msgOffset + MSG_CONTROLLEN_OFFSET, CMSG_SPACE_SMALL);
        if (controlLength < CMSG_DATA_OFFSET + Integer.BYTES ||
            control.getInt(cmsgOffset + CMSG_LEVEL_OFFSET) != SOL_UDP ||
            control.getInt(cmsgOffset + CMSG_TYPE_OFFSET) != UDP_GRO)
        {
            return 0;
        }
        return control.getInt(cmsgOffset + CMSG_DATA_OFFSET);
    }

    /**
     * Write a UDP_SEGMENT control message (UDP GSO: the kernel cuts the message into datagrams of
     * {@code segmentSize} bytes) into {@link #CMSG_SPACE_SMALL} bytes of {@code control}.
     */
    public static void putUdpSegment(final org.agrona.MutableDirectBuffer control, final int offset, final int segmentSize)
    {
        control.putLong(offset + CMSG_LEN_OFFSET, CMSG_DATA_OFFSET + 2);
        control.putInt(offset + CMSG_LEVEL_OFFSET, SOL_UDP);
        control.putInt(offset + CMSG_TYPE_OFFSET, UDP_SEGMENT);
        control.putShort(offset + CMSG_DATA_OFFSET, (short)segmentSize);
    }

    /**
     * Finish a sendmmsg message header: {@code iovecs} iovecs from {@code iovAddress}, flags cleared, and, for a
     * message of more than one datagram, a UDP_SEGMENT control message of {@code segmentSize} written at
     * {@code controlOffset} of {@code control} (native address {@code controlAddress}); none otherwise. Shared by
     * the appliance's shards and the workers' transport.
     */
    public static void putSendMessage(
        final org.agrona.MutableDirectBuffer headers, final int header, final long iovAddress, final long iovecs,
        final int datagrams, final int segmentSize,
        final org.agrona.MutableDirectBuffer control, final int controlOffset, final long controlAddress)
    {
        headers.putLong(header + MSG_IOV_OFFSET, iovAddress);
        headers.putLong(header + MSG_IOVLEN_OFFSET, iovecs);
        if (datagrams > 1)
        {
            putUdpSegment(control, controlOffset, segmentSize);
            headers.putLong(header + MSG_CONTROL_OFFSET, controlAddress);
            headers.putLong(header + MSG_CONTROLLEN_OFFSET, CMSG_SPACE_SMALL);
        }
        else
        {
            headers.putLong(header + MSG_CONTROL_OFFSET, 0);
            headers.putLong(header + MSG_CONTROLLEN_OFFSET, 0);
        }
        headers.putInt(header + MSG_FLAGS_OFFSET, 0);
    }
}
