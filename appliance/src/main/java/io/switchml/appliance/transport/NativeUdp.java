package io.switchml.appliance.transport;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Linux UDP socket calls (socket, setsockopt, bind, recvmmsg, sendmmsg, poll, close) through the JDK's
 * foreign function interface: no native library of our own, and no allocation per call.
 * <p>
 * Pointer arguments are declared as {@code long} (a pointer and a long are passed alike on LP64 Linux),
 * so that callers pass raw addresses into one preallocated native block instead of slicing
 * {@link MemorySegment}s, which allocates. The handles are static finals invoked with
 * {@code invokeExact} at their exact types, so nothing is boxed.
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
final class NativeUdp
{
    static final int AF_INET = 2;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_NONBLOCK = 0x800;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int SOL_SOCKET = 1;
    static final int SO_SNDBUF = 7;
    static final int SO_RCVBUF = 8;
    static final int SO_SNDBUFFORCE = 32;
    static final int SO_RCVBUFFORCE = 33;
    static final int IPPROTO_IP = 0;
    static final int IP_MULTICAST_IF = 32;
    static final int IP_MULTICAST_TTL = 33;
    static final int IP_MULTICAST_LOOP = 34;
    static final int MSG_DONTWAIT = 0x40;
    static final int MSG_TRUNC = 0x20;
    static final int EINTR = 4;
    static final int EAGAIN = 11;
    static final int ENOBUFS = 105;
    static final short POLLIN = 0x1;
    static final short POLLOUT = 0x4;
    /** Most messages one sendmmsg or recvmmsg call takes (UIO_MAXIOV). */
    static final int MAX_MMSG = 1024;

    /** struct sockaddr_in: sin_family (host order), sin_port and sin_addr (network order), 8 bytes of zero. */
    static final int SOCKADDR_IN_SIZE = 16;
    static final int SIN_FAMILY_OFFSET = 0;
    static final int SIN_PORT_OFFSET = 2;
    static final int SIN_ADDR_OFFSET = 4;

    /** struct iovec. */
    static final int IOVEC_SIZE = 16;
    static final int IOV_BASE_OFFSET = 0;
    static final int IOV_LEN_OFFSET = 8;

    /** struct mmsghdr: a struct msghdr and msg_len. */
    static final int MMSGHDR_SIZE = 64;
    static final int MSG_NAME_OFFSET = 0;
    static final int MSG_NAMELEN_OFFSET = 8;
    static final int MSG_IOV_OFFSET = 16;
    static final int MSG_IOVLEN_OFFSET = 24;
    static final int MSG_CONTROL_OFFSET = 32;
    static final int MSG_CONTROLLEN_OFFSET = 40;
    static final int MSG_FLAGS_OFFSET = 48;
    static final int MSG_LEN_OFFSET = 56;

    /** struct pollfd. */
    static final int POLLFD_SIZE = 8;
    static final int POLLFD_FD_OFFSET = 0;
    static final int POLLFD_EVENTS_OFFSET = 4;
    static final int POLLFD_REVENTS_OFFSET = 6;

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
    private static final long ERRNO_OFFSET;
    private static final long CALL_STATE_SIZE;
    private static final String UNAVAILABILITY_CAUSE;

    static
    {
        final String[] names = {"socket", "setsockopt", "getsockopt", "bind", "getsockname", "close", "strerror",
            "recvmmsg", "sendmmsg", "poll", "__errno_location"};
        final FunctionDescriptor[] descriptors = {
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT),
            FunctionDescriptor.of(ADDRESS, JAVA_INT),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_LONG),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT),
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT),
            FunctionDescriptor.of(JAVA_LONG)};
        final int capturingCalls = 6;
        final MethodHandle[] handles = new MethodHandle[names.length];
        long errnoOffset = 0;
        long callStateSize = 0;
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
                final Linker linker = Linker.nativeLinker();
                final SymbolLookup libc = linker.defaultLookup();
                final Linker.Option errno = Linker.Option.captureCallState("errno");
                for (int i = 0; i < names.length; i++)
                {
                    final String name = names[i];
                    final MemorySegment symbol = libc.find(name)
                        .orElseThrow(() -> new UnsatisfiedLinkError("no symbol " + name + " in the C library"));
                    handles[i] = i < capturingCalls ?
                        linker.downcallHandle(symbol, descriptors[i], errno) : linker.downcallHandle(symbol, descriptors[i]);
                }
                final MemoryLayout stateLayout = Linker.Option.captureStateLayout();
                errnoOffset = stateLayout.byteOffset(MemoryLayout.PathElement.groupElement("errno"));
                callStateSize = stateLayout.byteSize();
                probe(handles[0], handles[5], callStateSize, errnoOffset);
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
        STRERROR = ok ? handles[6] : null;
        RECVMMSG = ok ? handles[7] : null;
        SENDMMSG = ok ? handles[8] : null;
        POLL = ok ? handles[9] : null;
        ERRNO_LOCATION = ok ? handles[10] : null;
        ERRNO_OFFSET = errnoOffset;
        CALL_STATE_SIZE = callStateSize;
        UNAVAILABILITY_CAUSE = cause;
    }

    private NativeUdp()
    {
    }

    private static void probe(
        final MethodHandle socket, final MethodHandle close, final long callStateSize, final long errnoOffset) throws Throwable
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment state = arena.allocate(callStateSize);
            final int fd = (int)socket.invokeExact(state, AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0)
            {
                throw new IllegalStateException("socket(AF_INET, SOCK_DGRAM) failed: errno " +
                    state.get(JAVA_INT, errnoOffset));
            }
            final int ignore = (int)close.invokeExact(state, fd);
        }
    }

    /**
     * @return true when the calls link and a UDP socket can be opened here.
     */
    static boolean isAvailable()
    {
        return UNAVAILABILITY_CAUSE == null;
    }

    /**
     * @return why the native transport is unavailable, or null.
     */
    static String unavailabilityCause()
    {
        return UNAVAILABILITY_CAUSE;
    }

    /**
     * @return a segment to capture errno in; one per thread that makes calls.
     */
    static MemorySegment allocateCallState(final Arena arena)
    {
        return arena.allocate(CALL_STATE_SIZE, 8);
    }

    /**
     * @return errno as captured by the last call made with this call state.
     */
    static int errno(final MemorySegment callState)
    {
        return callState.get(ValueLayout.JAVA_INT, ERRNO_OFFSET);
    }

    static int socket(final MemorySegment callState, final int domain, final int type, final int protocol)
    {
        try
        {
            return (int)SOCKET.invokeExact(callState, domain, type, protocol);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    static int setsockopt(
        final MemorySegment callState, final int fd, final int level, final int option, final long valueAddress, final int length)
    {
        try
        {
            return (int)SETSOCKOPT.invokeExact(callState, fd, level, option, valueAddress, length);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    static int getsockopt(
        final MemorySegment callState, final int fd, final int level, final int option, final long valueAddress,
        final long lengthAddress)
    {
        try
        {
            return (int)GETSOCKOPT.invokeExact(callState, fd, level, option, valueAddress, lengthAddress);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    static int bind(final MemorySegment callState, final int fd, final long sockaddrAddress, final int length)
    {
        try
        {
            return (int)BIND.invokeExact(callState, fd, sockaddrAddress, length);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    static int getsockname(final MemorySegment callState, final int fd, final long sockaddrAddress, final long lengthAddress)
    {
        try
        {
            return (int)GETSOCKNAME.invokeExact(callState, fd, sockaddrAddress, lengthAddress);
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
    static long errnoAddress()
    {
        try
        {
            return (long)ERRNO_LOCATION.invokeExact();
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
    static int recvmmsg(final int fd, final long msgvecAddress, final int vlen, final int flags)
    {
        try
        {
            return (int)RECVMMSG.invokeExact(fd, msgvecAddress, vlen, flags, 0L);
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
    static int sendmmsg(final int fd, final long msgvecAddress, final int vlen, final int flags)
    {
        try
        {
            return (int)SENDMMSG.invokeExact(fd, msgvecAddress, vlen, flags);
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
    static int poll(final long pollfdsAddress, final long count, final int timeoutMs)
    {
        try
        {
            return (int)POLL.invokeExact(pollfdsAddress, count, timeoutMs);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    static int close(final MemorySegment callState, final int fd)
    {
        try
        {
            return (int)CLOSE.invokeExact(callState, fd);
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
    static String describeErrno(final int errno)
    {
        try
        {
            final MemorySegment text = (MemorySegment)STRERROR.invokeExact(errno);
            return "errno " + errno + " (" + text.reinterpret(256).getString(0) + ")";
        }
        catch (final Throwable ex)
        {
            return "errno " + errno;
        }
    }
}
