package io.switchml.appliance.control;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.engine.SlotPool;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The control endpoint against a client that misbehaves on purpose, over real TCP: every input a stranger can send
 * is bounded (line length, idle connections, connections per address), every CREATE field is range-checked and
 * unknown fields are refused by name, and a job nobody joins gives its memory back at its join deadline.
 */
@Timeout(60)
class ControlLimitsTest
{
    @TempDir
    Path tempDir;

    private Appliance appliance;

    private void start(final ApplianceContext context) throws Exception
    {
        appliance = Appliance.launch(context.dataPort(0).controlPort(0).httpPort(0).dir(tempDir.toString()));
    }

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private final class Client implements AutoCloseable
    {
        final Socket socket;
        final BufferedReader reader;
        final OutputStream out;

        Client() throws IOException
        {
            socket = new Socket("127.0.0.1", appliance.controlPort());
            socket.setSoTimeout(10_000);
            reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            out = socket.getOutputStream();
        }

        String request(final String line) throws IOException
        {
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            out.flush();
            return reader.readLine();
        }

        public void close() throws IOException
        {
            socket.close();
        }
    }

    @Test
    void anOverlongLineIsRefusedAndTheConnectionClosedWithoutHoldingIt() throws Exception
    {
        start(new ApplianceContext());
        final long heapBefore = usedHeapAfterGc();
        // three connections that never end a line, 16 MB each: before the limit, one 10 MB line grew the heap by 34 MB
        for (int c = 0; c < 3; c++)
        {
            try (Client flood = new Client())
            {
                final byte[] block = new byte[1 << 20];
                Arrays.fill(block, (byte)'x');
                try
                {
                    for (int i = 0; i < 16; i++)
                    {
                        flood.out.write(block);
                    }
                }
                catch (final IOException closed)
                {
                    // the appliance closed the connection after 64 KiB
                }
            }
        }
        final long heapGrowth = usedHeapAfterGc() - heapBefore;
        assertTrue(heapGrowth < 8L << 20, "heap grew by " + heapGrowth + " bytes");
        try (Client client = new Client())
        {
            final byte[] junk = new byte[1 << 20];
            Arrays.fill(junk, (byte)'a');
            try
            {
                client.out.write(junk);
                client.out.flush();
            }
            catch (final IOException ignore)
            {
                // the appliance may close before it has read all of it
            }
            final String reply = client.reader.readLine();
            assertTrue(reply != null && reply.startsWith("ERR message=control line longer than 65536 bytes"), reply);
            assertNull(client.reader.readLine(), "then the connection is closed");
        }
        try (Client client = new Client())
        {
            assertTrue(client.request("HEALTH").startsWith("OK"), "the appliance still serves");
        }
    }

    private static long usedHeapAfterGc() throws InterruptedException
    {
        final Runtime runtime = Runtime.getRuntime();
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 3; i++)
        {
            System.gc();
            Thread.sleep(50);
            used = Math.min(used, runtime.totalMemory() - runtime.freeMemory());
        }
        return used;
    }

    @Test
    void aConnectionWithoutACompleteLineIsClosedAfterTheIdleTimeout() throws Exception
    {
        start(new ApplianceContext().controlLimits(16, 8, 300));
        try (Client silent = new Client(); Client partial = new Client())
        {
            partial.out.write("HEAL".getBytes(StandardCharsets.UTF_8));
            partial.out.flush();
            final long startNs = System.nanoTime();
            for (final Client client : List.of(silent, partial))
            {
                final String reply = client.reader.readLine();
                assertEquals("ERR message=no complete line for 300 ms; closing the connection", reply);
                assertNull(client.reader.readLine());
            }
            assertTrue(System.nanoTime() - startNs < 5_000_000_000L);
        }
    }

    @Test
    void aByteNowAndThenDoesNotKeepAConnectionWithoutACompleteLine() throws Exception
    {
        start(new ApplianceContext().controlLimits(16, 8, 1_000));
        try (Client trickle = new Client())
        {
            final long startNs = System.nanoTime();
            String reply = null;
            for (int i = 0; i < 40 && reply == null; i++)
            {
                try
                {
                    trickle.out.write('H');
                    trickle.out.flush();
                }
                catch (final IOException closed)
                {
                    break;
                }
                Thread.sleep(200);
                if (trickle.socket.getInputStream().available() > 0)
                {
                    reply = trickle.reader.readLine();
                }
            }
            if (reply == null)
            {
                reply = trickle.reader.readLine();
            }
            final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;
            assertEquals("ERR message=no complete line for 1000 ms; closing the connection", reply);
            assertTrue(elapsedMs < 3_000, "closed after " + elapsedMs + " ms of a byte every 200 ms");
        }
    }

    @Test
    void aPeerThatReadsNoRepliesIsCutOffAndHoldsUpNobody() throws Exception
    {
        start(new ApplianceContext());
        final int requests = 80_000;
        try (Client deaf = new Client(); Client other = new Client())
        {
            // requests whose replies (a few KB each) overflow the socket's buffers, none of them read for a while: the
            // appliance's send blocks until its deadline closes the connection
            final int statsBytes = other.request("STATS").length() + 1;
            assertTrue((long)statsBytes * requests > 32L << 20, "replies beyond any socket buffers: " + statsBytes);
            final Thread writer = Thread.ofVirtual().start(() ->
            {
                try
                {
                    deaf.out.write("STATS\n".repeat(requests).getBytes(StandardCharsets.UTF_8));
                    deaf.out.flush();
                }
                catch (final IOException closed)
                {
                    // closed by the appliance
                }
            });
            Thread.sleep(1_000);
            assertTrue(other.request("HEALTH").startsWith("OK"), "another client is answered meanwhile");
            Thread.sleep(ControlServer.SEND_DEADLINE_MS + 2_000);
            int replies = 0;
            try
            {
                while (deaf.reader.readLine() != null)
                {
                    replies++;
                }
            }
            catch (final java.net.SocketException reset)
            {
                // the appliance closed with our requests unread: a reset
            }
            catch (final java.net.SocketTimeoutException stillOpen)
            {
                throw new AssertionError("the connection is still open after " + replies + " replies", stillOpen);
            }
            assertTrue(replies < requests, "cut off after " + replies + " of " + requests + " replies");
            writer.join(5_000);
            assertTrue(other.request("HEALTH").startsWith("OK"));
        }
    }

    @Test
    void connectionsAreLimitedPerAddressAndFreedWhenClosed() throws Exception
    {
        start(new ApplianceContext().controlLimits(16, 3, 30_000));
        final List<Client> held = new ArrayList<>();
        try
        {
            for (int i = 0; i < 3; i++)
            {
                final Client client = new Client();
                held.add(client);
                assertTrue(client.request("HEALTH").startsWith("OK"));
            }
            try (Client fourth = new Client())
            {
                assertEquals("ERR message=too many control connections from 127.0.0.1 (limit 3)", fourth.reader.readLine());
                assertNull(fourth.reader.readLine());
            }
            held.remove(0).close();
            final long deadline = System.nanoTime() + 5_000_000_000L;
            String reply = null;
            while (System.nanoTime() < deadline)
            {
                try (Client again = new Client())
                {
                    reply = again.request("HEALTH");
                }
                if (reply != null && reply.startsWith("OK"))
                {
                    break;
                }
                Thread.sleep(50);
            }
            assertTrue(reply != null && reply.startsWith("OK"), "a closed connection frees its place: " + reply);
        }
        finally
        {
            for (final Client client : held)
            {
                client.close();
            }
        }
    }

    @Test
    void createFieldsAreRangeCheckedAndUnknownFieldsRefusedByName() throws Exception
    {
        start(new ApplianceContext());
        try (Client client = new Client())
        {
            final String base = "CREATE name=strict world=2 type=int32 k=64 s=4 mac=off";
            assertEquals("ERR message=unknown field 'colour' for CREATE (it takes auth, backend, ifAbsent, joinTimeoutMs, k, mac, " +
                "name, s, slotTimeoutMs, tenant, token, type, world); this appliance runs switchml " +
                io.switchml.protocol.BuildInfo.version(),
                client.request(base + " colour=blue"));
            assertTrue(client.request(base + " unknownField=1").startsWith("ERR message=unknown field 'unknownField'"));
            assertEquals("ERR message=slotTimeoutMs must be within 10..3600000: 99999999999",
                client.request(base + " slotTimeoutMs=99999999999"));
            assertEquals("ERR message=joinTimeoutMs must be within 10..3600000: 9223372036854775807",
                client.request(base + " joinTimeoutMs=" + Long.MAX_VALUE));
            assertTrue(client.request("HEALTH extra=1").startsWith("ERR message=unknown field 'extra' for HEALTH"));
            assertTrue(client.request("ABORTJOB job=1 colour=x").startsWith("ERR message=unknown field 'colour' for ABORTJOB"));
            assertEquals("ERR message=unknown verb 'HEA?LTH'; this appliance runs switchml " +
                io.switchml.protocol.BuildInfo.version(), client.request("HEA\rLTH"),
                "a control character the client sent is not echoed: a CR would split the reply for a BufferedReader");
            assertTrue(client.request("HEALTH").startsWith("OK"), "and the next reply is the next line");
            assertEquals(0, appliance.registry().jobCount(), "nothing refused was created");
            assertTrue(client.request(base).startsWith("OK job="), "the same CREATE without the bad fields is taken");
        }
    }

    @Test
    void aJobNobodyJoinsIsEndedAtItsJoinDeadlineAndItsMemoryFreed() throws Exception
    {
        final long jobBytes = SlotPool.memoryBytes(512, 1024);
        start(new ApplianceContext().memoryBudgetBytes(jobBytes + jobBytes / 2).joinTimeoutMs(500));
        try (Client client = new Client())
        {
            final String create = "CREATE name=NAME world=2 type=int32 k=1024 s=512 mac=off";
            assertTrue(client.request(create.replace("NAME", "abandoned")).startsWith("OK job="));
            assertEquals(jobBytes, appliance.registry().memoryUsedBytes());
            final String refused = client.request(create.replace("NAME", "real"));
            assertTrue(refused.startsWith("ERR message=job 'real' needs " + jobBytes + " bytes of aggregator memory"), refused);

            final long deadline = System.nanoTime() + 10_000_000_000L;
            while (appliance.registry().jobCount() > 0 && System.nanoTime() < deadline)
            {
                Thread.sleep(20);
            }
            assertEquals(0, appliance.registry().jobCount(), "the never-joined job ended at its deadline");
            assertEquals(0, appliance.registry().memoryUsedBytes(), "and gave its memory back");
            assertTrue(client.request(create.replace("NAME", "real")).startsWith("OK job="), "a real job now fits");
        }
    }

    /**
     * A member told that its job was aborted (here by an operator) holds nothing any more: if it neither leaves nor
     * closes, the appliance closes its connection after the idle timeout instead of keeping it open for good.
     */
    @Test
    void anAbortedMembersConnectionIsClosedAfterTheIdleTimeoutWhenTheClientKeepsItOpen() throws Exception
    {
        start(new ApplianceContext().controlLimits(16, 8, 300));
        try (Client rank0 = new Client(); Client rank1 = new Client())
        {
            final String created = rank1.request("CREATE name=kept world=2 type=int32 k=64 s=8 mac=off");
            assertTrue(created.startsWith("OK job="), created);
            final String job = created.split(" ")[1].substring("job=".length());
            final String token = created.split(" ")[2].substring("token=".length());
            final String join = "JOIN job=" + job + " token=" + token + " ports=40000 rank=";
            rank0.out.write((join + "0\n").getBytes(StandardCharsets.UTF_8));
            rank0.out.flush();
            assertTrue(rank1.request(join + "1").startsWith("OK job=" + job));
            assertTrue(rank0.reader.readLine().startsWith("OK job=" + job));
            Thread.sleep(600); // twice the idle timeout: a member's connection is not held to it while its job runs
            try (Client operator = new Client())
            {
                assertTrue(operator.request("ABORTJOB job=" + job + " token=" + token).startsWith("OK"));
            }
            for (final Client member : List.of(rank0, rank1))
            {
                final String abort = member.reader.readLine();
                assertTrue(abort.startsWith("ABORT job=" + job + " reason="), abort);
            }
            final long startNs = System.nanoTime();
            assertNull(rank0.reader.readLine(), "closed by the appliance");
            assertNull(rank1.reader.readLine(), "closed by the appliance");
            final long waitedMs = (System.nanoTime() - startNs) / 1_000_000L;
            assertTrue(waitedMs >= 200 && waitedMs < 5_000, waitedMs + " ms");
        }
    }
}
