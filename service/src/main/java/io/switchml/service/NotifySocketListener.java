package io.switchml.service;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A stand-in for systemd's notification socket: binds an AF_UNIX datagram socket and returns each
 * datagram received as a string, so that tests and packaging checks can see {@code READY=1} and the
 * watchdog pings without systemd as PID 1. Point the service's {@code NOTIFY_SOCKET} at {@link #address()}.
 * <p>
 * Also a command-line tool, for checks outside JUnit:
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp service.jar io.switchml.service.NotifySocketListener \
 *     ADDRESS [--exit-on=ASSIGNMENT] [--timeout-ms=N]
 * </pre>
 * It prints {@code listening on ADDRESS} to standard error once bound, then each datagram on its own line
 * of standard output, with newlines written as {@code \n} and backslashes as {@code \\}. With
 * {@code --exit-on=READY=1} it exits 0 after the first datagram that has that exact line; with
 * {@code --timeout-ms} it stops waiting after that long, exiting 1 if the {@code --exit-on} line never
 * came, else 0. Bad arguments or a failed bind exit 2.
 * <p>
 * Not thread-safe: receive on one thread, and close on that thread or once it is done receiving.
 * Failures throw {@link UncheckedIOException}: this is a test and diagnostics tool, not the service.
 */
public final class NotifySocketListener implements AutoCloseable
{
    /** Largest datagram returned whole; systemd itself accepts far less. */
    public static final int MAX_DATAGRAM_BYTES = 64 * 1024;

    private static final String EXIT_ON_OPTION = "--exit-on=";
    private static final String TIMEOUT_OPTION = "--timeout-ms=";

    private final String address;
    private final Arena arena;
    private final MemorySegment buffer;
    private final MemorySegment pollFd;
    private final MemorySegment callState;
    private int fd;

    /**
     * Bind at a filesystem path, which must not exist yet; {@link #close()} deletes it.
     *
     * @param path where to bind; made absolute.
     * @throws UncheckedIOException if the socket cannot be bound.
     */
    public NotifySocketListener(final Path path)
    {
        this(path.toAbsolutePath().toString());
    }

    /**
     * Bind at an address in {@code NOTIFY_SOCKET} syntax.
     *
     * @param address absolute path, or {@code @name} for the abstract namespace.
     * @throws UncheckedIOException if the address is invalid or cannot be bound.
     */
    public NotifySocketListener(final String address)
    {
        String error = UnixDatagram.unavailable();
        if (error == null)
        {
            error = UnixDatagram.validateAddress(address);
        }
        if (error != null)
        {
            throw new UncheckedIOException(new IOException(error));
        }
        this.address = address;
        this.arena = Arena.ofShared();
        try
        {
            this.buffer = arena.allocate(MAX_DATAGRAM_BYTES);
            this.pollFd = UnixDatagram.allocatePollFd(arena);
            this.callState = UnixDatagram.allocateCallState(arena);
            this.fd = UnixDatagram.socket(callState);
            if (fd < 0)
            {
                throw ioFailure(UnixDatagram.failure("socket(AF_UNIX, SOCK_DGRAM)", UnixDatagram.errno(callState)));
            }
            if (UnixDatagram.bind(callState, fd, UnixDatagram.sockaddr(arena, address)) != 0)
            {
                final String failure = UnixDatagram.failure("bind(" + address + ")", UnixDatagram.errno(callState));
                UnixDatagram.close(callState, fd);
                fd = -1;
                throw ioFailure(failure);
            }
        }
        catch (final RuntimeException ex)
        {
            arena.close();
            throw ex;
        }
    }

    /**
     * @return the bound address, in {@code NOTIFY_SOCKET} syntax.
     */
    public String address()
    {
        return address;
    }

    /**
     * Wait for the next datagram.
     *
     * @param timeoutMs how long to wait; 0 to only take one already queued.
     * @return the datagram decoded as UTF-8 (cut at {@link #MAX_DATAGRAM_BYTES}), or null on timeout.
     * @throws UncheckedIOException if poll or recv fails.
     * @throws IllegalStateException if closed.
     */
    public String receive(final long timeoutMs)
    {
        if (fd < 0)
        {
            throw new IllegalStateException("listener is closed");
        }
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.clamp(timeoutMs, 0, Integer.MAX_VALUE));
        while (true)
        {
            final long remainingMs = TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime() + 999_999);
            final int ready = UnixDatagram.pollIn(callState, pollFd, fd, Math.clamp(remainingMs, 0, Integer.MAX_VALUE));
            if (ready < 0)
            {
                final int errno = UnixDatagram.errno(callState);
                if (errno != UnixDatagram.EINTR)
                {
                    throw ioFailure(UnixDatagram.failure("poll(" + address + ")", errno));
                }
            }
            else if (ready > 0)
            {
                final long length = UnixDatagram.recv(callState, fd, buffer);
                if (length >= 0)
                {
                    final byte[] bytes = buffer.asSlice(0, Math.min(length, MAX_DATAGRAM_BYTES)).toArray(ValueLayout.JAVA_BYTE);
                    return new String(bytes, StandardCharsets.UTF_8);
                }
                final int errno = UnixDatagram.errno(callState);
                if (errno != UnixDatagram.EINTR && errno != UnixDatagram.EAGAIN)
                {
                    throw ioFailure(UnixDatagram.failure("recv(" + address + ")", errno));
                }
            }
            if (deadlineNs - System.nanoTime() <= 0)
            {
                return null;
            }
        }
    }

    /**
     * Close the socket and delete its file when bound at a path. Idempotent.
     */
    public void close()
    {
        if (fd < 0)
        {
            return;
        }
        UnixDatagram.close(callState, fd);
        fd = -1;
        arena.close();
        deleteSocketFile(address);
    }

    /**
     * Command-line entry point; see the class documentation.
     *
     * @param args the address, then options.
     */
    public static void main(final String[] args)
    {
        System.exit(run(args, System.out, System.err));
    }

    /**
     * The command line's work, for tests: listen and print until done.
     *
     * @param args the address, then options.
     * @param out  receives the datagrams, one a line.
     * @param err  receives the {@code listening on} line and errors.
     * @return the exit status: 0 done, 1 timed out before the {@code --exit-on} line, 2 bad arguments or bind.
     */
    static int run(final String[] args, final PrintStream out, final PrintStream err)
    {
        String address = null;
        String exitOn = null;
        long timeoutMs = -1;
        for (final String arg : args)
        {
            if (arg.startsWith(EXIT_ON_OPTION))
            {
                exitOn = arg.substring(EXIT_ON_OPTION.length());
            }
            else if (arg.startsWith(TIMEOUT_OPTION))
            {
                try
                {
                    timeoutMs = Long.parseLong(arg.substring(TIMEOUT_OPTION.length()));
                }
                catch (final NumberFormatException ex)
                {
                    timeoutMs = -1;
                }
                if (timeoutMs < 0)
                {
                    err.println("bad " + arg + ": not a non-negative integer");
                    return 2;
                }
            }
            else if (address == null && !arg.startsWith("--"))
            {
                address = arg;
            }
            else
            {
                err.println("unexpected argument: " + arg);
                address = null;
                break;
            }
        }
        if (address == null)
        {
            err.println("usage: NotifySocketListener ADDRESS [" + EXIT_ON_OPTION + "ASSIGNMENT] [" + TIMEOUT_OPTION + "N]");
            return 2;
        }

        final NotifySocketListener listener;
        try
        {
            listener = new NotifySocketListener(address);
        }
        catch (final UncheckedIOException ex)
        {
            err.println(ex.getCause().getMessage());
            return 2;
        }
        final String socketAddress = address;
        final Thread cleanup = new Thread(() -> deleteSocketFile(socketAddress));
        Runtime.getRuntime().addShutdownHook(cleanup);
        try
        {
            err.println("listening on " + address);
            err.flush();
            final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.min(timeoutMs, Integer.MAX_VALUE));
            while (true)
            {
                final long waitMs = timeoutMs < 0 ?
                    Integer.MAX_VALUE : TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime());
                if (waitMs <= 0 && timeoutMs >= 0)
                {
                    return exitOn == null ? 0 : 1;
                }
                final String datagram = listener.receive(waitMs);
                if (datagram != null)
                {
                    out.println(escape(datagram));
                    out.flush();
                    if (exitOn != null && hasLine(datagram, exitOn))
                    {
                        return 0;
                    }
                }
            }
        }
        catch (final UncheckedIOException ex)
        {
            err.println(ex.getCause().getMessage());
            return 2;
        }
        finally
        {
            listener.close();
            try
            {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            }
            catch (final IllegalStateException ignore)
            {
                // Already shutting down: the hook deletes the file.
            }
        }
    }

    /**
     * @param datagram newline-separated assignments.
     * @return the datagram on one line: newlines as {@code \n}, backslashes as {@code \\}.
     */
    static String escape(final String datagram)
    {
        return datagram.replace("\\", "\\\\").replace("\n", "\\n");
    }

    private static boolean hasLine(final String datagram, final String line)
    {
        for (final String candidate : datagram.split("\n", -1))
        {
            if (candidate.equals(line))
            {
                return true;
            }
        }
        return false;
    }

    private static void deleteSocketFile(final String address)
    {
        if (address.startsWith("/"))
        {
            try
            {
                Files.deleteIfExists(Path.of(address));
            }
            catch (final IOException ignore)
            {
                // Best effort: a leftover socket file only blocks a later bind at the same path.
            }
        }
    }

    private static UncheckedIOException ioFailure(final String message)
    {
        return new UncheckedIOException(new IOException(message));
    }
}
