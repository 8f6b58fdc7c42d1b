package io.switchml.service;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;

/**
 * Linux AF_UNIX datagram socket calls (socket, bind, sendto, recv, poll, close) through the JDK's foreign
 * function interface, because the standard library has no AF_UNIX datagram sockets. Every call captures
 * errno so failures read as {@code "sendto(/run/systemd/notify) failed: ENOENT (errno 2)"} rather than a
 * bare -1.
 * <p>
 * Socket addresses use the {@code NOTIFY_SOCKET} syntax: an absolute filesystem path, or a name starting
 * with {@code '@'} for the abstract namespace, where the {@code '@'} becomes the leading NUL byte.
 * <p>
 * Errors are returned as strings (null on success), never thrown, so that callers decide how loudly to
 * report them.
 */
final class UnixDatagram
{
    static final int AF_UNIX = 1;
    static final int SOCK_DGRAM = 2;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int MSG_TRUNC = 0x20;
    static final int MSG_DONTWAIT = 0x40;
    static final int MSG_NOSIGNAL = 0x4000;
    static final short POLLIN = 0x1;
    static final int EINTR = 4;
    static final int EAGAIN = 11;

    /** Size of {@code sun_path} in {@code struct sockaddr_un}. */
    static final int SUN_PATH_BYTES = 108;
    /** Offset of {@code sun_path}: after the 2-byte {@code sa_family_t}. */
    static final int SUN_PATH_OFFSET = 2;

    private static final int POLLFD_BYTES = 8;
    private static final int POLLFD_EVENTS_OFFSET = 4;
    private static final int POLLFD_REVENTS_OFFSET = 6;

    private static final long ERRNO_OFFSET =
        Linker.Option.captureStateLayout().byteOffset(MemoryLayout.PathElement.groupElement("errno"));

    private static final String UNAVAILABLE;
    private static final MethodHandle SOCKET;
    private static final MethodHandle BIND;
    private static final MethodHandle SENDTO;
    private static final MethodHandle RECV;
    private static final MethodHandle POLL;
    private static final MethodHandle CLOSE;

    static
    {
        MethodHandle socket = null;
        MethodHandle bind = null;
        MethodHandle sendto = null;
        MethodHandle recv = null;
        MethodHandle poll = null;
        MethodHandle close = null;
        String unavailable = null;
        try
        {
            if (!System.getProperty("os.name", "").toLowerCase().startsWith("linux"))
            {
                unavailable = "AF_UNIX datagram sockets are only supported on Linux, not " + System.getProperty("os.name");
            }
            else
            {
                final Linker linker = Linker.nativeLinker();
                final SymbolLookup libc = linker.defaultLookup();
                final Linker.Option errno = Linker.Option.captureCallState("errno");
                final ValueLayout.OfInt cInt = ValueLayout.JAVA_INT;
                final ValueLayout.OfLong cLong = ValueLayout.JAVA_LONG;
                final var pointer = ValueLayout.ADDRESS;

                socket = linker.downcallHandle(libc.findOrThrow("socket"),
                    FunctionDescriptor.of(cInt, cInt, cInt, cInt), errno);
                bind = linker.downcallHandle(libc.findOrThrow("bind"),
                    FunctionDescriptor.of(cInt, cInt, pointer, cInt), errno);
                sendto = linker.downcallHandle(libc.findOrThrow("sendto"),
                    FunctionDescriptor.of(cLong, cInt, pointer, cLong, cInt, pointer, cInt), errno);
                recv = linker.downcallHandle(libc.findOrThrow("recv"),
                    FunctionDescriptor.of(cLong, cInt, pointer, cLong, cInt), errno);
                poll = linker.downcallHandle(libc.findOrThrow("poll"),
                    FunctionDescriptor.of(cInt, pointer, cLong, cInt), errno);
                close = linker.downcallHandle(libc.findOrThrow("close"),
                    FunctionDescriptor.of(cInt, cInt), errno);
            }
        }
        catch (final RuntimeException | LinkageError ex)
        {
            unavailable = "AF_UNIX datagram sockets are not available through the foreign function interface: " + ex;
        }
        UNAVAILABLE = unavailable;
        SOCKET = socket;
        BIND = bind;
        SENDTO = sendto;
        RECV = recv;
        POLL = poll;
        CLOSE = close;
    }

    private UnixDatagram()
    {
    }

    /**
     * @return null when the calls are available, else why not (not Linux, or native access denied).
     */
    static String unavailable()
    {
        return UNAVAILABLE;
    }

    /**
     * Check an address in {@code NOTIFY_SOCKET} syntax.
     *
     * @param address absolute path, or {@code @name} for the abstract namespace.
     * @return null when valid, else why not.
     */
    static String validateAddress(final String address)
    {
        if (address == null || address.isEmpty())
        {
            return "socket address is empty";
        }
        final char first = address.charAt(0);
        if (first != '/' && first != '@')
        {
            return "socket address '" + address + "' is neither an absolute path nor an abstract name starting " +
                "with '@' (other forms, such as vsock:, are not supported)";
        }
        final int lengthBytes = address.getBytes(StandardCharsets.UTF_8).length;
        // A path needs room for its terminating NUL; an abstract name's '@' becomes its leading NUL.
        final int maxBytes = first == '@' ? SUN_PATH_BYTES : SUN_PATH_BYTES - 1;
        if (lengthBytes > maxBytes)
        {
            return "socket address '" + address + "' is " + lengthBytes + " bytes, longer than the " + maxBytes +
                " that fit in sockaddr_un";
        }
        if (first == '/' && address.indexOf('\0') >= 0)
        {
            return "socket path '" + address + "' contains a NUL byte";
        }
        return null;
    }

    /**
     * Encode a {@code struct sockaddr_un} exactly as long as the address needs, so that its byte size is
     * the {@code socklen_t} to pass: the family, then the path with its NUL, or the abstract name with the
     * leading NUL and no trailing one (an abstract name's length is significant).
     *
     * @param arena   allocates the structure.
     * @param address a valid address, see {@link #validateAddress(String)}.
     * @return the structure.
     */
    static MemorySegment sockaddr(final Arena arena, final String address)
    {
        final byte[] name = address.getBytes(StandardCharsets.UTF_8);
        final boolean isAbstract = name[0] == '@';
        final MemorySegment sockaddr = arena.allocate(SUN_PATH_OFFSET + name.length + (isAbstract ? 0 : 1), 2);
        sockaddr.set(ValueLayout.JAVA_SHORT, 0, (short)AF_UNIX);
        MemorySegment.copy(name, 0, sockaddr, ValueLayout.JAVA_BYTE, SUN_PATH_OFFSET, name.length);
        if (isAbstract)
        {
            sockaddr.set(ValueLayout.JAVA_BYTE, SUN_PATH_OFFSET, (byte)0);
        }
        return sockaddr;
    }

    /**
     * @param arena allocates the segment.
     * @return a segment to pass as the captured call state of the calls here.
     */
    static MemorySegment allocateCallState(final Arena arena)
    {
        return arena.allocate(Linker.Option.captureStateLayout());
    }

    /**
     * @param callState as passed to the failed call.
     * @return the errno that the call left.
     */
    static int errno(final MemorySegment callState)
    {
        return callState.get(ValueLayout.JAVA_INT, ERRNO_OFFSET);
    }

    /**
     * Open an unbound datagram socket with close-on-exec set, so that child processes do not inherit it.
     *
     * @param callState from {@link #allocateCallState(Arena)}.
     * @return the descriptor, or -1 with errno in {@code callState}.
     */
    static int socket(final MemorySegment callState)
    {
        try
        {
            return (int)SOCKET.invokeExact(callState, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("socket() through the foreign function interface", ex);
        }
    }

    static int bind(final MemorySegment callState, final int fd, final MemorySegment sockaddr)
    {
        try
        {
            return (int)BIND.invokeExact(callState, fd, sockaddr, (int)sockaddr.byteSize());
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("bind() through the foreign function interface", ex);
        }
    }

    /**
     * Send one datagram without blocking: a receiver that has stopped draining its queue yields EAGAIN
     * instead of stalling the sender.
     *
     * @return bytes sent, or -1 with errno in {@code callState}.
     */
    static long sendto(
        final MemorySegment callState, final int fd, final MemorySegment message, final MemorySegment sockaddr)
    {
        try
        {
            return (long)SENDTO.invokeExact(
                callState, fd, message, message.byteSize(), MSG_DONTWAIT | MSG_NOSIGNAL, sockaddr, (int)sockaddr.byteSize());
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("sendto() through the foreign function interface", ex);
        }
    }

    /**
     * Receive one datagram without blocking.
     *
     * @return the datagram's full length (which may exceed the buffer's, see MSG_TRUNC), or -1 with errno
     * in {@code callState}.
     */
    static long recv(final MemorySegment callState, final int fd, final MemorySegment buffer)
    {
        try
        {
            return (long)RECV.invokeExact(callState, fd, buffer, buffer.byteSize(), MSG_DONTWAIT | MSG_TRUNC);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("recv() through the foreign function interface", ex);
        }
    }

    /**
     * @param arena allocates the structure.
     * @return a {@code struct pollfd} for {@link #pollIn(MemorySegment, MemorySegment, int, int)}.
     */
    static MemorySegment allocatePollFd(final Arena arena)
    {
        return arena.allocate(POLLFD_BYTES, 4);
    }

    /**
     * Wait for a datagram to read.
     *
     * @return 1 when readable, 0 on timeout, -1 with errno in {@code callState}.
     */
    static int pollIn(final MemorySegment callState, final MemorySegment pollFd, final int fd, final int timeoutMs)
    {
        pollFd.set(ValueLayout.JAVA_INT, 0, fd);
        pollFd.set(ValueLayout.JAVA_SHORT, POLLFD_EVENTS_OFFSET, POLLIN);
        pollFd.set(ValueLayout.JAVA_SHORT, POLLFD_REVENTS_OFFSET, (short)0);
        try
        {
            return (int)POLL.invokeExact(callState, pollFd, 1L, timeoutMs);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("poll() through the foreign function interface", ex);
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
            throw new IllegalStateException("close() through the foreign function interface", ex);
        }
    }

    /**
     * @param call    what failed, e.g. {@code "sendto(/run/systemd/notify)"}.
     * @param errno   the errno it left.
     * @return a message naming the errno symbolically, with a hint for the common causes.
     */
    static String failure(final String call, final int errno)
    {
        final String name = errnoName(errno);
        return call + " failed: " + (name == null ? "errno " + errno : name + " (errno " + errno + ")") + hint(errno);
    }

    private static String errnoName(final int errno)
    {
        return switch (errno)
        {
            case 1 -> "EPERM";
            case 2 -> "ENOENT";
            case 4 -> "EINTR";
            case 9 -> "EBADF";
            case 11 -> "EAGAIN";
            case 12 -> "ENOMEM";
            case 13 -> "EACCES";
            case 20 -> "ENOTDIR";
            case 22 -> "EINVAL";
            case 23 -> "ENFILE";
            case 24 -> "EMFILE";
            case 36 -> "ENAMETOOLONG";
            case 90 -> "EMSGSIZE";
            case 91 -> "EPROTOTYPE";
            case 97 -> "EAFNOSUPPORT";
            case 98 -> "EADDRINUSE";
            case 105 -> "ENOBUFS";
            case 111 -> "ECONNREFUSED";
            default -> null;
        };
    }

    private static String hint(final int errno)
    {
        return switch (errno)
        {
            case 2 -> ": no socket at that path";
            case 11 -> ": the receiver is not draining its queue";
            case 13 -> ": permission denied on the socket or a directory above it";
            case 90 -> ": message too long";
            case 98 -> ": the address is already bound (a stale socket file?)";
            case 111 -> ": nothing is bound to that address";
            default -> "";
        };
    }
}
