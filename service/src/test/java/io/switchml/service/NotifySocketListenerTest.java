package io.switchml.service;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The stand-in notification socket, as a class and as the command line that packaging checks run.
 */
class NotifySocketListenerTest
{
    @TempDir
    Path directory;

    @Test
    @Timeout(10)
    void commandLinePrintsEachDatagramOnOneLineAndExitsOnReady() throws Exception
    {
        final String address = directory.resolve("notify.sock").toString();
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final CompletableFuture<Integer> exitStatus = CompletableFuture.supplyAsync(() -> NotifySocketListener.run(
            new String[]{ address, "--exit-on=READY=1", "--timeout-ms=5000" },
            new PrintStream(out, true, StandardCharsets.UTF_8),
            new PrintStream(err, true, StandardCharsets.UTF_8)));

        try (SystemdNotifier notifier = new SystemdNotifier(address, 0))
        {
            final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (notifier.status("starting") != null)
            {
                assertTrue(System.nanoTime() - deadlineNs < 0, "listener never bound");
                Thread.sleep(5);
            }
            assertNull(notifier.status("back\\slash"));
            assertNull(notifier.ready("serving 2 jobs"));
        }

        assertEquals(0, exitStatus.get(5, TimeUnit.SECONDS));
        assertEquals(
            "STATUS=starting\nSTATUS=back\\\\slash\nREADY=1\\nSTATUS=serving 2 jobs\n",
            out.toString(StandardCharsets.UTF_8));
        assertTrue(err.toString(StandardCharsets.UTF_8).startsWith("listening on " + address), err::toString);
        assertFalse(Files.exists(Path.of(address)), "socket file deleted on exit");
    }

    @Test
    @Timeout(5)
    void commandLineExitStatusOnTimeoutAndBadArguments()
    {
        final PrintStream discard = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        final String address = directory.resolve("notify.sock").toString();

        assertEquals(1, NotifySocketListener.run(
            new String[]{ address, "--exit-on=READY=1", "--timeout-ms=50" }, discard, discard));
        assertEquals(0, NotifySocketListener.run(new String[]{ address, "--timeout-ms=0" }, discard, discard));
        assertEquals(2, NotifySocketListener.run(new String[]{}, discard, discard));
        assertEquals(2, NotifySocketListener.run(new String[]{ address, "--timeout-ms=soon" }, discard, discard));
        assertEquals(2, NotifySocketListener.run(new String[]{ "relative.sock" }, discard, discard));
        assertEquals(2, NotifySocketListener.run(new String[]{ directory.resolve("no/such/dir.sock").toString() },
            discard, discard));
    }

    @Test
    @Timeout(5)
    void bindingAnExistingPathFailsClearlyAndReceiveTimesOut()
    {
        final Path path = directory.resolve("notify.sock");
        try (NotifySocketListener listener = new NotifySocketListener(path))
        {
            final UncheckedIOException ex = assertThrows(UncheckedIOException.class, () -> new NotifySocketListener(path));
            assertTrue(ex.getMessage().contains("EADDRINUSE"), ex.getMessage());

            final long startNs = System.nanoTime();
            assertNull(listener.receive(50));
            assertTrue(System.nanoTime() - startNs >= TimeUnit.MILLISECONDS.toNanos(50));
        }
        assertFalse(Files.exists(path));
    }
}
