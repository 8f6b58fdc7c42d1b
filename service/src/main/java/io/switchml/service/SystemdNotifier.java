package io.switchml.service;

import org.agrona.ErrorHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Tells systemd how the service is doing, with the sd_notify protocol, so that a {@code Type=notify}
 * unit becomes active only once the data plane is serving, shows a live status line in
 * {@code systemctl status}, and is restarted by {@code WatchdogSec=} when the data plane wedges.
 * <p>
 * Each notification is one datagram of newline-separated assignments ({@code "READY=1\nSTATUS=serving"})
 * sent to the AF_UNIX datagram socket named by {@code NOTIFY_SOCKET}: an absolute path, or an abstract
 * name starting with {@code '@'}. The JDK has no AF_UNIX datagram sockets, so the sends go through the
 * foreign function interface (see {@link UnixDatagram}); the JVM needs
 * {@code --enable-native-access=ALL-UNNAMED}, which the launcher already passes.
 * <p>
 * When {@code NOTIFY_SOCKET} is unset (run by hand, in tests, under another supervisor) the notifier is
 * disabled and every call is a successful no-op. Failures never throw: each send returns null on success
 * or a message saying why it failed (for example {@code "sendto(/run/systemd/notify) failed: ENOENT
 * (errno 2): no socket at that path"}), and the watchdog thread reports its failures to an
 * {@link ErrorHandler}. Sends never block: a receiver that stops draining yields EAGAIN.
 * <p>
 * Thread-safe. One socket is opened on the first send and closed by {@link #close()}, which also stops
 * the watchdog thread; it does not send {@code STOPPING=1}, {@link #stopping(String)} does.
 */
public final class SystemdNotifier implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(SystemdNotifier.class);

    /** Environment variable with the address of systemd's notification socket. */
    public static final String NOTIFY_SOCKET_ENV = "NOTIFY_SOCKET";
    /** Environment variable with the watchdog timeout in microseconds, set when the unit has WatchdogSec=. */
    public static final String WATCHDOG_USEC_ENV = "WATCHDOG_USEC";
    /** Environment variable with the pid the watchdog applies to; when set and not ours, the watchdog is off. */
    public static final String WATCHDOG_PID_ENV = "WATCHDOG_PID";
    /** Name of the daemon thread started by {@link #startWatchdog(BooleanSupplier, ErrorHandler)}. */
    public static final String WATCHDOG_THREAD_NAME = "systemd-watchdog";

    private static final byte[] WATCHDOG_MESSAGE = "WATCHDOG=1".getBytes(StandardCharsets.UTF_8);
    private static final long CLOSE_JOIN_TIMEOUT_MS = 1_000;

    private final String socketAddress;
    private final long watchdogIntervalUs;
    private final String configurationError;
    private final String watchdogNote;
    private final MemorySegment sockaddr;
    private final Object lock = new Object();
    private final AtomicLong watchdogPings = new AtomicLong();
    private final AtomicLong watchdogFailures = new AtomicLong();
    private volatile boolean watchdogRunning;
    private int fd = -1;
    private boolean closed;
    private Thread watchdogThread;

    /**
     * A notifier for an explicit socket, for tests and for callers that resolve the environment themselves.
     *
     * @param socketAddress      absolute path or {@code @abstract-name} of the notification socket; null
     *                           for a disabled notifier. An invalid address is not thrown: every send
     *                           returns why it is invalid.
     * @param watchdogIntervalUs watchdog timeout in microseconds, as in {@code WATCHDOG_USEC}; pings go
     *                           every half of it. 0 for no watchdog.
     * @throws IllegalArgumentException if the interval is negative.
     */
    public SystemdNotifier(final String socketAddress, final long watchdogIntervalUs)
    {
        this(socketAddress, watchdogIntervalUs, null);
    }

    private SystemdNotifier(final String socketAddress, final long watchdogIntervalUs, final String watchdogNote)
    {
        if (watchdogIntervalUs < 0)
        {
            throw new IllegalArgumentException("watchdogIntervalUs must not be negative: " + watchdogIntervalUs);
        }
        this.socketAddress = socketAddress;
        this.watchdogIntervalUs = socketAddress == null ? 0 : watchdogIntervalUs;
        this.watchdogNote = watchdogNote;

        String error = null;
        MemorySegment address = null;
        if (socketAddress != null)
        {
            error = UnixDatagram.unavailable();
            if (error == null)
            {
                error = UnixDatagram.validateAddress(socketAddress);
            }
            if (error == null)
            {
                address = UnixDatagram.sockaddr(Arena.ofAuto(), socketAddress);
            }
            else
            {
                error = NOTIFY_SOCKET_ENV + " " + error;
            }
        }
        this.configurationError = error;
        this.sockaddr = address;
    }

    /**
     * A notifier configured from this process's environment: disabled when {@code NOTIFY_SOCKET} is unset.
     *
     * @return the notifier.
     */
    public static SystemdNotifier fromEnvironment()
    {
        return fromEnvironment(System.getenv());
    }

    /**
     * A notifier configured from the given environment, with {@code WATCHDOG_PID} checked against this
     * process's pid: a child started by a systemd service inherits the variables but is not the one watched.
     * Unusable watchdog values turn the watchdog off; {@link #toString()} says why.
     *
     * @param environment variables, usually {@link System#getenv()}.
     * @return the notifier.
     */
    public static SystemdNotifier fromEnvironment(final Map<String, String> environment)
    {
        final String socketAddress = environment.get(NOTIFY_SOCKET_ENV);
        if (socketAddress == null || socketAddress.isEmpty())
        {
            return disabled();
        }

        final String usecText = environment.get(WATCHDOG_USEC_ENV);
        final String pidText = environment.get(WATCHDOG_PID_ENV);
        long watchdogIntervalUs = 0;
        String note = null;
        if (usecText != null)
        {
            final long pid = ProcessHandle.current().pid();
            final long usec = parsePositive(usecText);
            final long watchedPid = pidText == null ? pid : parsePositive(pidText);
            if (usec <= 0)
            {
                note = "watchdog off: " + WATCHDOG_USEC_ENV + "='" + usecText + "' is not a positive integer";
            }
            else if (watchedPid != pid)
            {
                note = "watchdog off: " + WATCHDOG_PID_ENV + "='" + pidText + "' is not this process (" + pid + ")";
            }
            else
            {
                watchdogIntervalUs = usec;
            }
        }
        return new SystemdNotifier(socketAddress, watchdogIntervalUs, note);
    }

    /**
     * @return a notifier on which every call is a successful no-op.
     */
    public static SystemdNotifier disabled()
    {
        return new SystemdNotifier(null, 0, null);
    }

    /**
     * @return whether notifications are sent, i.e. a notification socket is configured.
     */
    public boolean isEnabled()
    {
        return socketAddress != null;
    }

    /**
     * @return the notification socket's address as configured, or null when disabled.
     */
    public String socketAddress()
    {
        return socketAddress;
    }

    /**
     * @return the watchdog timeout in microseconds, or 0 when there is no watchdog.
     */
    public long watchdogIntervalUs()
    {
        return watchdogIntervalUs;
    }

    /**
     * Tell systemd that start-up is complete: the unit becomes active and dependent units start.
     *
     * @param status human-readable status line, or null for none.
     * @return null on success or when disabled, else why the notification could not be sent.
     */
    public String ready(final String status)
    {
        return notify(withStatus("READY=1", status));
    }

    /**
     * Update the status line shown by {@code systemctl status}.
     *
     * @param status human-readable status line; newlines are replaced by spaces.
     * @return null on success or when disabled, else why the notification could not be sent
     * ({@code "nothing to send"} for a null status).
     */
    public String status(final String status)
    {
        return notify(withStatus(null, status));
    }

    /**
     * Tell systemd that the service is shutting down, so that a slow shutdown is not mistaken for a hang.
     *
     * @param status human-readable status line, or null for none.
     * @return null on success or when disabled, else why the notification could not be sent.
     */
    public String stopping(final String status)
    {
        return notify(withStatus("STOPPING=1", status));
    }

    /**
     * Send one watchdog ping. Usually {@link #startWatchdog(BooleanSupplier, ErrorHandler)} does it.
     *
     * @return null on success or when disabled, else why the ping could not be sent.
     */
    public String watchdog()
    {
        return notify("WATCHDOG=1");
    }

    /**
     * Send arbitrary assignments, for the ones without a method of their own (e.g.
     * {@code "EXTEND_TIMEOUT_USEC=30000000"} or {@code "RELOADING=1"}).
     *
     * @param assignments newline-separated {@code KEY=VALUE} lines, sent as one datagram.
     * @return null on success or when disabled, else why the notification could not be sent.
     */
    public String notify(final String assignments)
    {
        if (socketAddress == null)
        {
            return null;
        }
        if (assignments == null || assignments.isEmpty())
        {
            return "nothing to send";
        }
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment message =
                arena.allocateFrom(ValueLayout.JAVA_BYTE, assignments.getBytes(StandardCharsets.UTF_8));
            return send(message, UnixDatagram.allocateCallState(arena));
        }
        catch (final RuntimeException ex)
        {
            return "sending to " + socketAddress + " failed: " + ex;
        }
    }

    /**
     * {@link #startWatchdog(BooleanSupplier, ErrorHandler)} with failures printed to standard error, which
     * systemd puts in the journal.
     *
     * @param healthy called before each ping; pings are skipped while it returns false.
     * @return whether the watchdog thread was started.
     */
    public boolean startWatchdog(final BooleanSupplier healthy)
    {
        return startWatchdog(healthy, SystemdNotifier::printError);
    }

    /**
     * Start a daemon thread that sends {@code WATCHDOG=1} every half of the watchdog interval, but only
     * while {@code healthy} returns true (a check that throws counts as false). A wedged data plane thus
     * stops the pings and systemd restarts the service once the interval passes; if the check recovers
     * sooner, the pings resume. Nothing happens when disabled or without a watchdog interval.
     * <p>
     * A failed ping is reported to {@code errorHandler} as an {@link IOException} when its message differs
     * from the previous failure's; repeats are only counted ({@link #watchdogFailures()}), so a missing
     * socket is reported once, not twice per interval forever.
     *
     * @param healthy      called on the watchdog thread before each ping; must be cheap and non-blocking.
     * @param errorHandler receives failures on the watchdog thread, e.g. the appliance's error log.
     * @return whether the watchdog thread was started.
     * @throws IllegalStateException if already started or closed.
     */
    public boolean startWatchdog(final BooleanSupplier healthy, final ErrorHandler errorHandler)
    {
        if (socketAddress == null || watchdogIntervalUs == 0)
        {
            return false;
        }
        synchronized (lock)
        {
            if (closed)
            {
                throw new IllegalStateException("notifier is closed");
            }
            if (watchdogThread != null)
            {
                throw new IllegalStateException("watchdog already started");
            }
            watchdogRunning = true;
            watchdogThread = Thread.ofPlatform()
                .name(WATCHDOG_THREAD_NAME)
                .daemon(true)
                .start(() -> runWatchdog(healthy, errorHandler));
        }
        return true;
    }

    /**
     * @return watchdog pings sent by the watchdog thread.
     */
    public long watchdogPings()
    {
        return watchdogPings.get();
    }

    /**
     * @return watchdog pings the watchdog thread failed to send.
     */
    public long watchdogFailures()
    {
        return watchdogFailures.get();
    }

    /**
     * Stop the watchdog thread, waiting up to a second for it, and close the socket. Later sends return an
     * error. Idempotent.
     */
    public void close()
    {
        final Thread thread;
        synchronized (lock)
        {
            thread = watchdogThread;
        }
        watchdogRunning = false;
        if (thread != null)
        {
            LockSupport.unpark(thread);
            try
            {
                thread.join(CLOSE_JOIN_TIMEOUT_MS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (lock)
        {
            closed = true;
            if (fd >= 0)
            {
                try (Arena arena = Arena.ofConfined())
                {
                    UnixDatagram.close(UnixDatagram.allocateCallState(arena), fd);
                }
                catch (final RuntimeException ignore)
                {
                    // Nothing useful to do about a failed close at shutdown.
                }
                fd = -1;
            }
        }
    }

    /**
     * @return the resolved configuration in one line, for the start-up log.
     */
    @Override
    public String toString()
    {
        if (socketAddress == null)
        {
            return "sd_notify off (" + NOTIFY_SOCKET_ENV + " unset)";
        }
        final StringBuilder text = new StringBuilder("sd_notify to ").append(socketAddress);
        if (configurationError != null)
        {
            text.append(" (unusable: ").append(configurationError).append(')');
        }
        if (watchdogIntervalUs > 0)
        {
            text.append(", watchdog ").append(watchdogIntervalUs).append(" us, pinged every ")
                .append(watchdogIntervalUs / 2).append(" us while healthy");
        }
        else
        {
            text.append(", ").append(watchdogNote != null ? watchdogNote : "no watchdog");
        }
        return text.toString();
    }

    private String send(final MemorySegment message, final MemorySegment callState)
    {
        if (configurationError != null)
        {
            return configurationError;
        }
        synchronized (lock)
        {
            if (closed)
            {
                return "notifier is closed";
            }
            if (fd < 0)
            {
                final int socket = UnixDatagram.socket(callState);
                if (socket < 0)
                {
                    return UnixDatagram.failure("socket(AF_UNIX, SOCK_DGRAM)", UnixDatagram.errno(callState));
                }
                fd = socket;
            }
            long sent;
            do
            {
                sent = UnixDatagram.sendto(callState, fd, message, sockaddr);
            }
            while (sent < 0 && UnixDatagram.errno(callState) == UnixDatagram.EINTR);
            if (sent < 0)
            {
                return UnixDatagram.failure("sendto(" + socketAddress + ")", UnixDatagram.errno(callState));
            }
            return null;
        }
    }

    private void runWatchdog(final BooleanSupplier healthy, final ErrorHandler errorHandler)
    {
        final long periodNs = TimeUnit.MICROSECONDS.toNanos(watchdogIntervalUs) / 2;
        String lastReported = null;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment message = arena.allocateFrom(ValueLayout.JAVA_BYTE, WATCHDOG_MESSAGE);
            final MemorySegment callState = UnixDatagram.allocateCallState(arena);
            long deadlineNs = System.nanoTime();
            while (watchdogRunning)
            {
                boolean isHealthy;
                try
                {
                    isHealthy = healthy.getAsBoolean();
                }
                catch (final Throwable ex)
                {
                    isHealthy = false;
                    final String reported = "health check threw " + ex;
                    if (!reported.equals(lastReported))
                    {
                        lastReported = reported;
                        report(errorHandler, ex);
                    }
                }

                if (isHealthy)
                {
                    String error;
                    try
                    {
                        error = send(message, callState);
                    }
                    catch (final RuntimeException ex)
                    {
                        error = "sending to " + socketAddress + " failed: " + ex;
                    }
                    if (error == null)
                    {
                        watchdogPings.incrementAndGet();
                        lastReported = null;
                    }
                    else if (watchdogRunning)
                    {
                        watchdogFailures.incrementAndGet();
                        if (!error.equals(lastReported))
                        {
                            lastReported = error;
                            report(errorHandler, new IOException("systemd watchdog ping: " + error));
                        }
                    }
                }

                deadlineNs += periodNs;
                final long nowNs = System.nanoTime();
                if (deadlineNs - nowNs < 0)
                {
                    // Fell behind (a pause or a suspended VM): ping at once, then keep the period from now.
                    deadlineNs = nowNs;
                }
                long remainingNs;
                while (watchdogRunning && (remainingNs = deadlineNs - System.nanoTime()) > 0)
                {
                    LockSupport.parkNanos(this, remainingNs);
                }
            }
        }
    }

    private static void report(final ErrorHandler errorHandler, final Throwable error)
    {
        try
        {
            errorHandler.onError(error);
        }
        catch (final Throwable ex)
        {
            printError(error);
        }
    }

    private static void printError(final Throwable error)
    {
        LOG.warn("{}: {}", WATCHDOG_THREAD_NAME, error);
    }

    private static String withStatus(final String assignment, final String status)
    {
        if (status == null)
        {
            return assignment;
        }
        final String statusLine = "STATUS=" + status.replace('\n', ' ').replace('\0', ' ');
        return assignment == null ? statusLine : assignment + "\n" + statusLine;
    }

    private static long parsePositive(final String text)
    {
        try
        {
            return Long.parseLong(text.trim());
        }
        catch (final NumberFormatException ex)
        {
            return -1;
        }
    }
}
