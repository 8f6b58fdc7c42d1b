package io.switchml.service;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The sd_notify datagrams, checked at a {@link NotifySocketListener} standing in for systemd's socket.
 */
class SystemdNotifierTest
{
    private static final long RECEIVE_TIMEOUT_MS = 2_000;
    /** Watchdog timeout of the watchdog tests: pings every 100 ms. */
    private static final long WATCHDOG_INTERVAL_US = 200_000;
    private static final long PING_PERIOD_MS = 100;

    @TempDir
    Path directory;

    @Test
    @Timeout(10)
    void readyStatusAndStoppingArriveAtListenerBoundAtTempPath()
    {
        try (NotifySocketListener listener = new NotifySocketListener(directory.resolve("notify.sock"));
            SystemdNotifier notifier = new SystemdNotifier(listener.address(), 0))
        {
            assertTrue(notifier.isEnabled());
            assertEquals(listener.address(), notifier.socketAddress());

            assertNull(notifier.ready("serving 2 jobs"));
            assertEquals("READY=1\nSTATUS=serving 2 jobs", listener.receive(RECEIVE_TIMEOUT_MS));

            assertNull(notifier.status("draining\nSTOPPING=1"));
            assertEquals("STATUS=draining STOPPING=1", listener.receive(RECEIVE_TIMEOUT_MS),
                "a newline in the status must not inject an assignment");

            assertNull(notifier.stopping("shutting down"));
            assertEquals("STOPPING=1\nSTATUS=shutting down", listener.receive(RECEIVE_TIMEOUT_MS));

            assertNull(notifier.ready(null));
            assertEquals("READY=1", listener.receive(RECEIVE_TIMEOUT_MS));

            assertNull(notifier.watchdog());
            assertEquals("WATCHDOG=1", listener.receive(RECEIVE_TIMEOUT_MS));

            assertNull(notifier.notify("EXTEND_TIMEOUT_USEC=30000000"));
            assertEquals("EXTEND_TIMEOUT_USEC=30000000", listener.receive(RECEIVE_TIMEOUT_MS));

            assertNull(listener.receive(0), "one datagram per notification");
        }
    }

    @Test
    @Timeout(10)
    void abstractSocketAddressStartingWithAt()
    {
        final String address = "@switchml-notify-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        try (NotifySocketListener listener = new NotifySocketListener(address);
            SystemdNotifier notifier = SystemdNotifier.fromEnvironment(Map.of(SystemdNotifier.NOTIFY_SOCKET_ENV, address)))
        {
            assertTrue(notifier.isEnabled());
            assertNull(notifier.ready("abstract"));
            assertEquals("READY=1\nSTATUS=abstract", listener.receive(RECEIVE_TIMEOUT_MS));
        }
    }

    @Test
    @Timeout(10)
    void watchdogPingsAtHalfTheIntervalOnlyWhileHealthy()
    {
        final AtomicBoolean healthy = new AtomicBoolean(true);
        final AtomicReference<Thread> pingThread = new AtomicReference<>();
        final List<Throwable> errors = new CopyOnWriteArrayList<>();
        try (NotifySocketListener listener = new NotifySocketListener(directory.resolve("notify.sock"));
            SystemdNotifier notifier = new SystemdNotifier(listener.address(), WATCHDOG_INTERVAL_US))
        {
            assertTrue(notifier.startWatchdog(
                () ->
                {
                    pingThread.set(Thread.currentThread());
                    return healthy.get();
                },
                errors::add));

            final int pings = 8;
            final long firstNs = receiveWatchdogPing(listener);
            long lastNs = firstNs;
            for (int i = 1; i < pings; i++)
            {
                lastNs = receiveWatchdogPing(listener);
            }
            final double meanPeriodMs = (lastNs - firstNs) / 1e6 / (pings - 1);
            assertTrue(meanPeriodMs > PING_PERIOD_MS * 0.7 && meanPeriodMs < PING_PERIOD_MS * 1.5,
                "mean ping period " + meanPeriodMs + " ms, expected about " + PING_PERIOD_MS);

            healthy.set(false);
            // A tick that passed its health check just before the flip may still send one ping.
            int pingsWhileUnhealthy = 0;
            final long quietUntilNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(4 * PING_PERIOD_MS);
            long remainingMs;
            while ((remainingMs = TimeUnit.NANOSECONDS.toMillis(quietUntilNs - System.nanoTime())) > 0)
            {
                if (listener.receive(remainingMs) != null)
                {
                    pingsWhileUnhealthy++;
                }
            }
            assertTrue(pingsWhileUnhealthy <= 1, pingsWhileUnhealthy + " pings while unhealthy");

            healthy.set(true);
            receiveWatchdogPing(listener);

            // The thread counts a ping after sendto returns, so the datagram can arrive here first.
            awaitAtLeast(notifier::watchdogPings, pings + 1);
            assertEquals(0, notifier.watchdogFailures());
            assertTrue(errors.isEmpty(), errors::toString);
            assertEquals(SystemdNotifier.WATCHDOG_THREAD_NAME, pingThread.get().getName());
            assertTrue(pingThread.get().isDaemon());
        }
        assertFalse(pingThread.get().isAlive(), "close() stops the watchdog thread");
    }

    @Test
    @Timeout(10)
    void healthCheckThatThrowsCountsAsUnhealthyAndIsReportedOnce()
    {
        final List<Throwable> errors = new CopyOnWriteArrayList<>();
        try (NotifySocketListener listener = new NotifySocketListener(directory.resolve("notify.sock"));
            SystemdNotifier notifier = new SystemdNotifier(listener.address(), WATCHDOG_INTERVAL_US))
        {
            assertTrue(notifier.startWatchdog(
                () ->
                {
                    throw new IllegalStateException("shard 0 wedged");
                },
                errors::add));
            assertNull(listener.receive(3 * PING_PERIOD_MS));
            assertEquals(1, errors.size(), errors::toString);
            assertEquals("shard 0 wedged", errors.getFirst().getMessage());
            assertEquals(0, notifier.watchdogPings());
        }
    }

    @Test
    @Timeout(5)
    void noOpWhenNotifySocketUnset()
    {
        try (SystemdNotifier notifier = SystemdNotifier.fromEnvironment(
            Map.of(SystemdNotifier.WATCHDOG_USEC_ENV, "1000000")))
        {
            assertFalse(notifier.isEnabled());
            assertNull(notifier.socketAddress());
            assertEquals(0, notifier.watchdogIntervalUs());
            assertNull(notifier.ready("serving"));
            assertNull(notifier.status("serving"));
            assertNull(notifier.watchdog());
            assertNull(notifier.stopping("stopping"));
            assertFalse(notifier.startWatchdog(() -> true));
            assertTrue(notifier.toString().contains("off"), notifier.toString());
        }

        assumeTrue(System.getenv(SystemdNotifier.NOTIFY_SOCKET_ENV) == null, "tests run under systemd notify");
        try (SystemdNotifier notifier = SystemdNotifier.fromEnvironment())
        {
            assertFalse(notifier.isEnabled());
            assertNull(notifier.ready("serving"));
        }
    }

    @Test
    @Timeout(5)
    void sendingToMissingSocketReportsAnErrorWithoutThrowing()
    {
        final String missing = directory.resolve("absent.sock").toString();
        try (SystemdNotifier notifier = new SystemdNotifier(missing, 0))
        {
            final String error = assertDoesNotThrow(() -> notifier.ready("serving"));
            assertNotNull(error);
            assertTrue(error.contains("sendto(" + missing + ")") && error.contains("ENOENT"), error);
        }

        final String unbound = "@switchml-notify-test-unbound-" + System.nanoTime();
        try (SystemdNotifier notifier = new SystemdNotifier(unbound, 0))
        {
            final String error = notifier.ready("serving");
            assertNotNull(error);
            assertTrue(error.contains("ECONNREFUSED"), error);
        }
    }

    @Test
    @Timeout(5)
    void watchdogReportsARepeatedFailureOnceAndCountsEveryOne()
    {
        final List<Throwable> errors = new CopyOnWriteArrayList<>();
        try (SystemdNotifier notifier = new SystemdNotifier(directory.resolve("absent.sock").toString(), 20_000))
        {
            assertTrue(notifier.startWatchdog(() -> true, errors::add));
            final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            while (notifier.watchdogFailures() < 4)
            {
                assertTrue(System.nanoTime() - deadlineNs < 0, "watchdog failures not counted");
                Thread.onSpinWait();
                Thread.yield();
            }
            assertEquals(1, errors.size(), errors::toString);
            assertTrue(errors.getFirst().getMessage().contains("ENOENT"), errors.getFirst().getMessage());
            assertEquals(0, notifier.watchdogPings());
        }
    }

    @Test
    @Timeout(5)
    void invalidAddressesAreReportedOnEachSend()
    {
        for (final String address : new String[]{ "notify.sock", "vsock:2:1234", "/" + "x".repeat(200) })
        {
            try (SystemdNotifier notifier = new SystemdNotifier(address, 0))
            {
                assertTrue(notifier.isEnabled());
                final String error = notifier.ready("serving");
                assertNotNull(error, address);
                assertTrue(error.startsWith(SystemdNotifier.NOTIFY_SOCKET_ENV), error);
                assertTrue(notifier.toString().contains("unusable"), notifier.toString());
            }
        }
        assertThrows(IllegalArgumentException.class, () -> new SystemdNotifier("/run/notify", -1));
    }

    @Test
    @Timeout(5)
    void watchdogIntervalFromEnvironmentAppliesOnlyToTheWatchedPid()
    {
        final long pid = ProcessHandle.current().pid();
        final String socket = directory.resolve("notify.sock").toString();

        assertEquals(10_000_000, watchdogIntervalUs(Map.of(
            SystemdNotifier.NOTIFY_SOCKET_ENV, socket,
            SystemdNotifier.WATCHDOG_USEC_ENV, "10000000",
            SystemdNotifier.WATCHDOG_PID_ENV, Long.toString(pid))));
        assertEquals(10_000_000, watchdogIntervalUs(Map.of(
            SystemdNotifier.NOTIFY_SOCKET_ENV, socket,
            SystemdNotifier.WATCHDOG_USEC_ENV, "10000000")));
        assertEquals(0, watchdogIntervalUs(Map.of(
            SystemdNotifier.NOTIFY_SOCKET_ENV, socket,
            SystemdNotifier.WATCHDOG_USEC_ENV, "10000000",
            SystemdNotifier.WATCHDOG_PID_ENV, Long.toString(pid + 1))));
        assertEquals(0, watchdogIntervalUs(Map.of(
            SystemdNotifier.NOTIFY_SOCKET_ENV, socket,
            SystemdNotifier.WATCHDOG_USEC_ENV, "ten seconds")));
        assertEquals(0, watchdogIntervalUs(Map.of(SystemdNotifier.NOTIFY_SOCKET_ENV, socket)));

        try (SystemdNotifier notifier = SystemdNotifier.fromEnvironment(Map.of(
            SystemdNotifier.NOTIFY_SOCKET_ENV, socket,
            SystemdNotifier.WATCHDOG_USEC_ENV, "10000000",
            SystemdNotifier.WATCHDOG_PID_ENV, Long.toString(pid + 1))))
        {
            assertTrue(notifier.toString().contains(SystemdNotifier.WATCHDOG_PID_ENV), notifier.toString());
            assertFalse(notifier.startWatchdog(() -> true));
        }
    }

    @Test
    @Timeout(5)
    void sendsAfterCloseReportAnError()
    {
        try (NotifySocketListener listener = new NotifySocketListener(directory.resolve("notify.sock")))
        {
            final SystemdNotifier notifier = new SystemdNotifier(listener.address(), 1_000_000);
            assertNull(notifier.status("up"));
            assertEquals("STATUS=up", listener.receive(RECEIVE_TIMEOUT_MS));
            notifier.close();
            notifier.close();
            assertEquals("notifier is closed", notifier.status("down"));
            assertThrows(IllegalStateException.class, () -> notifier.startWatchdog(() -> true));
        }
    }

    private static long watchdogIntervalUs(final Map<String, String> environment)
    {
        try (SystemdNotifier notifier = SystemdNotifier.fromEnvironment(environment))
        {
            return notifier.watchdogIntervalUs();
        }
    }

    private static void awaitAtLeast(final LongSupplier counter, final long expected)
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RECEIVE_TIMEOUT_MS);
        long value;
        while ((value = counter.getAsLong()) < expected && System.nanoTime() - deadlineNs < 0)
        {
            Thread.yield();
        }
        assertTrue(value >= expected, "counter at " + value + ", expected at least " + expected);
    }

    private static long receiveWatchdogPing(final NotifySocketListener listener)
    {
        assertEquals("WATCHDOG=1", listener.receive(RECEIVE_TIMEOUT_MS));
        return System.nanoTime();
    }
}
