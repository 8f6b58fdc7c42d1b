package io.switchml.offload.tofino.backend;

import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.offload.tofino.p4runtime.ModelP4RuntimeServer;
import io.switchml.offload.tofino.p4runtime.P4InfoIndex;
import io.switchml.offload.tofino.p4runtime.P4RuntimeSwitch;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reconnection policy on its own, with a fake clock and {@link ReconnectingSwitch#check()} called by the test
 * (no timer thread), against the model's real P4Runtime server stopped and started on one port: the first try
 * {@link ReconnectingSwitch#FIRST_RETRY_MS} after the loss is seen, then doubling up to
 * {@link ReconnectingSwitch#MAX_RETRY_MS}; a reconnect step that fails fails the attempt; upkeep runs on healthy
 * sessions only; nothing after close.
 */
final class ReconnectingSwitchTest
{
    private final AtomicLong clockNs = new AtomicLong(1_000_000_000L);
    private final List<String> log = new CopyOnWriteArrayList<>();
    private final AtomicInteger connects = new AtomicInteger();
    private final AtomicInteger upkeeps = new AtomicInteger();
    private final List<P4RuntimeSwitch> reconnected = new ArrayList<>();
    private final AtomicInteger stepFailuresLeft = new AtomicInteger();

    private void advanceMs(final long ms)
    {
        clockNs.addAndGet(TimeUnit.MILLISECONDS.toNanos(ms));
    }

    @Test
    void reconnectsWithDoublingBackoffAndRunsItsStepsOnTheNewSession() throws Exception
    {
        final int port;
        try (ServerSocket socket = new ServerSocket(0))
        {
            port = socket.getLocalPort();
        }
        final Object lock = new Object();
        ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", port), 1, P4InfoIndex.switchml(),
            new TofinoModel(), lock);
        final ReconnectingSwitch.Connector connector = () ->
        {
            connects.incrementAndGet();
            return P4RuntimeSwitch.connect("127.0.0.1", port, 1, 1, 5_000, P4InfoIndex.switchml(), null);
        };
        final P4RuntimeSwitch first = connector.connect();
        connects.set(0);
        final ReconnectingSwitch connection = new ReconnectingSwitch("tofino", first, connector, log::add, clockNs::get);
        final AtomicInteger reconnects = new AtomicInteger();
        connection.countReconnects(reconnects::incrementAndGet);
        connection.addUpkeepStep(control -> upkeeps.incrementAndGet());
        connection.addReconnectStep(control ->
        {
            if (stepFailuresLeft.getAndDecrement() > 0)
            {
                throw new PipelineException("RESOURCE_EXHAUSTED", "value set full");
            }
            reconnected.add((P4RuntimeSwitch)control);
        });
        try
        {
            connection.check();
            assertNull(connection.health());
            assertEquals(0, connection.generation());
            assertEquals(1, upkeeps.get(), "upkeep on a healthy session");
            assertEquals(0, connects.get());

            server.close();
            final long deadline = System.nanoTime() + 5_000_000_000L;
            while (first.health() == null)
            {
                assertTrue(System.nanoTime() < deadline, "the session never noticed the switch had gone");
                Thread.sleep(10);
            }
            connection.check();
            assertTrue(log.getLast().contains("lost: ") && log.getLast().endsWith("reconnecting in 1000 ms"), log.getLast());
            assertTrue(connection.health().contains("; reconnecting"), connection.health());
            assertEquals(1, upkeeps.get(), "no upkeep while the session is down");

            // the switch stays away: tries at 1, 2, 4, 8, 16, 30, 30 s intervals, each failing
            final long[] waits = {1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000};
            for (int attempt = 0; attempt < waits.length; attempt++)
            {
                advanceMs(waits[attempt] - 1);
                connection.check();
                assertEquals(attempt, connects.get(), "no try before " + waits[attempt] + " ms");
                advanceMs(1);
                connection.check();
                assertEquals(attempt + 1, connects.get(), "a try after " + waits[attempt] + " ms");
            }
            assertTrue(connection.health().contains("(last try: switch 127.0.0.1:" + port + " not reachable"), connection.health());

            // it is back, but the first new session's step fails: that attempt fails too, and the next one succeeds
            server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", port), 1, P4InfoIndex.switchml(), new TofinoModel(),
                lock);
            stepFailuresLeft.set(1);
            advanceMs(30_000);
            connection.check();
            assertEquals(waits.length + 1, connects.get());
            assertTrue(log.getLast().contains("failed: value set full; next try in 30000 ms"), log.getLast());
            assertTrue(connection.health() != null, "still down");
            advanceMs(30_000);
            connection.check();
            assertNull(connection.health(), "up again");
            assertEquals(1, reconnected.size());
            assertNotSame(first, connection.session());
            assertEquals(reconnected.getFirst(), connection.session(), "the steps ran on the session now in use");
            assertTrue(log.getLast().contains("reconnected to 127.0.0.1:" + port), log.getLast());
            assertEquals(2, upkeeps.get(), "upkeep right after reconnecting");

            assertEquals(1, connection.generation(), "one new session");
            assertEquals(1, reconnects.get(), "counted once: the failed attempts are not reconnections");
            connection.close();
            final int before = connects.get();
            connection.check();
            assertEquals(before, connects.get(), "nothing after close");
            final long closing = System.nanoTime() + 5_000_000_000L;
            while (connection.session().health() == null)
            {
                assertTrue(System.nanoTime() < closing, "the session did not close with it");
                Thread.sleep(10);
            }
        }
        finally
        {
            connection.close();
            server.close();
        }
    }
}
