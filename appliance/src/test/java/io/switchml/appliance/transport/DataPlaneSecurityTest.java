package io.switchml.appliance.transport;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A hostile peer on the data plane, speaking raw UDP and the control protocol directly: forged MACs,
 * replays from another address, cross-job and malformed packets are dropped and counted by reason,
 * and change no slot: the honest members' sums stay exact. Run on the native transport and on two of
 * Netty's, which share the packet logic but not the address handling.
 */
@Timeout(60)
class DataPlaneSecurityTest
{
    @TempDir
    Path tempDir;

    private Appliance appliance;

    private void start(final String transport) throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().transport(transport).dataPort(0).controlPort(0).httpPort(0)
            .dir(tempDir.toString()));
        assertEquals(transport, appliance.transportName());
    }

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    /** A member that speaks the protocol by hand: one control connection and one UDP socket. */
    private final class RawMember implements AutoCloseable
    {
        final Socket control;
        final BufferedReader reader;
        final DatagramChannel udp;
        int jobId;
        long k0;
        long k1;

        RawMember() throws IOException
        {
            control = new Socket("127.0.0.1", appliance.controlPort());
            reader = new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8));
            udp = DatagramChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            udp.connect(new InetSocketAddress("127.0.0.1", appliance.dataPort()));
            udp.socket().setSoTimeout(2000);
        }

        Map<String, String> request(final String line) throws IOException
        {
            control.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
            return ControlProtocol.parse(reader.readLine());
        }

        void create(final String name, final String mac) throws IOException
        {
            final Map<String, String> reply = request("CREATE name=" + name + " world=1 type=int32 k=4 s=2 mac=" + mac +
                " token=token-" + name + " ifAbsent=true");
            assertEquals("OK", reply.get(""), reply.toString());
            jobId = Integer.parseInt(reply.get("job"));
        }

        void join(final String name) throws IOException
        {
            final int port = ((InetSocketAddress)udp.getLocalAddress()).getPort();
            final Map<String, String> reply = request("JOIN job=" + jobId + " rank=0 token=token-" + name + " ports=" + port);
            assertEquals("OK", reply.get(""), reply.toString());
            k0 = Long.parseUnsignedLong(reply.get("key").substring(0, 16), 16);
            k1 = Long.parseUnsignedLong(reply.get("key").substring(16), 16);
        }

        public void close() throws IOException
        {
            control.close();
            udp.close();
        }
    }

    private static ByteBuffer update(final int jobId, final int slot, final long sequence, final int version, final int value,
        final long k0, final long k1, final boolean sign)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(DataHeaderFlyweight.packetLength(4));
        final UnsafeBuffer view = new UnsafeBuffer(buffer);
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(view, 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, 0, version, ElementType.INT32, slot, sequence, 4,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
        for (int i = 0; i < 4; i++)
        {
            header.lane(i, value + i);
        }
        if (sign)
        {
            PacketMac.sign(k0, k1, view, 0, buffer.capacity());
        }
        return buffer;
    }

    /** A signed header-only probe (type 3) about rank 0's int32 update for a slot version and chunk. */
    private static ByteBuffer probe(final int jobId, final int slot, final long sequence, final int version,
        final long k0, final long k1)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(DataHeaderFlyweight.HEADER_LENGTH);
        final UnsafeBuffer view = new UnsafeBuffer(buffer);
        new DataHeaderFlyweight().wrap(view, 0).writeHeader(
            DataHeaderFlyweight.TYPE_PROBE, jobId, 0, version, ElementType.INT32, slot, sequence, 0,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
        PacketMac.sign(k0, k1, view, 0, DataHeaderFlyweight.HEADER_LENGTH);
        return buffer;
    }

    /** Type and length of the next datagram, or null when none comes. */
    private static int[] nextTypeAndLength(final DatagramChannel udp) throws IOException
    {
        final byte[] bytes = new byte[2048];
        final java.net.DatagramPacket packet = new java.net.DatagramPacket(bytes, bytes.length);
        try
        {
            udp.socket().receive(packet);
        }
        catch (final SocketTimeoutException ex)
        {
            return null;
        }
        return new int[]{ bytes[DataHeaderFlyweight.TYPE_OFFSET], packet.getLength() };
    }

    private static int resultLane0(final DatagramChannel udp) throws IOException
    {
        final ByteBuffer result = ByteBuffer.allocate(2048);
        try
        {
            udp.socket().receive(new java.net.DatagramPacket(result.array(), result.capacity()));
        }
        catch (final SocketTimeoutException ex)
        {
            return Integer.MIN_VALUE;
        }
        return new DataHeaderFlyweight().wrap(new UnsafeBuffer(result), 0).lane(0);
    }

    private void awaitCounter(final String name, final long atLeast) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + 5_000;
        while (appliance.counter(name) < atLeast)
        {
            assertTrue(System.currentTimeMillis() < deadline, name + " stayed at " + appliance.counter(name));
            Thread.sleep(10);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"native", "epoll", "nio"})
    void forgedReplayedCrossJobAndMalformedPacketsAreDroppedAndCounted(final String transport) throws Exception
    {
        start(transport);
        try (RawMember alice = new RawMember(); RawMember bob = new RawMember();
            DatagramChannel attacker = DatagramChannel.open().bind(new InetSocketAddress("127.0.0.1", 0)))
        {
            alice.create("alice", "on");
            alice.join("alice");
            bob.create("bob", "off");
            bob.join("bob");
            attacker.connect(new InetSocketAddress("127.0.0.1", appliance.dataPort()));

            // forged: alice's own address and job, wrong key
            alice.udp.write(update(alice.jobId, 0, 0, 0, 1000, 1, 2, true));
            awaitCounter("drop_bad_mac", 1);

            // a valid packet of alice's, replayed from another address
            final ByteBuffer valid = update(alice.jobId, 0, 0, 0, 5, alice.k0, alice.k1, true);
            attacker.write(valid.duplicate());
            awaitCounter("drop_not_member", 1);

            // bob's job runs without MAC: a packet for it from the attacker's address is still refused
            attacker.write(update(bob.jobId, 0, 0, 0, 7777, 0, 0, false));
            awaitCounter("drop_not_member", 2);

            // cross-job: bob, a member of his own job, writes into alice's job
            bob.udp.write(update(alice.jobId, 0, 0, 0, 9999, 0, 0, false));
            awaitCounter("drop_not_member", 3);

            // malformed and unknown-job packets
            final SplittableRandom random = new SplittableRandom(7);
            for (int i = 0; i < 200; i++)
            {
                final byte[] junk = new byte[random.nextInt(0, 300)];
                random.nextBytes(junk);
                attacker.write(ByteBuffer.wrap(junk));
            }
            attacker.write(update(424242, 0, 0, 0, 1, 0, 0, false));
            awaitCounter("drop_unknown_job", 1);

            // the honest members' slots are untouched: their own updates complete with exactly their values
            alice.udp.write(valid.duplicate());
            assertEquals(5, resultLane0(alice.udp));
            bob.udp.write(update(bob.jobId, 0, 0, 0, 11, 0, 0, false));
            assertEquals(11, resultLane0(bob.udp));

            // probes pass the same checks: one with the wrong key and one from another address are dropped
            alice.udp.write(probe(alice.jobId, 0, 0, 0, 1, 2));
            awaitCounter("drop_bad_mac", 2);
            attacker.write(probe(alice.jobId, 0, 0, 0, alice.k0, alice.k1));
            awaitCounter("drop_not_member", 4);
            // alice's own: the completed slot answers from its shadow copy, a version that lacks her update NACKs
            alice.udp.write(probe(alice.jobId, 0, 0, 0, alice.k0, alice.k1));
            assertEquals(5, resultLane0(alice.udp));
            alice.udp.write(probe(alice.jobId, 0, 4, 1, alice.k0, alice.k1));
            final int[] nack = nextTypeAndLength(alice.udp);
            assertTrue(nack != null && nack[0] == DataHeaderFlyweight.TYPE_NACK &&
                nack[1] == DataHeaderFlyweight.HEADER_LENGTH, "a NACK, header only");
            assertEquals(2, appliance.counter("probes"));
            assertEquals(1, appliance.counter("nacks_sent"));

            final Map<String, Long> counters = appliance.counterSnapshot();
            final long malformed = counters.entrySet().stream()
                .filter(e -> e.getKey().startsWith("shard_drop_") && !e.getKey().endsWith("not_member") &&
                    !e.getKey().endsWith("bad_mac") && !e.getKey().endsWith("unknown_job"))
                .mapToLong(Map.Entry::getValue).sum();
            assertTrue(malformed >= 190, "malformed drops " + counters);
            assertEquals(2L, counters.get("shard_drop_bad_mac"));
            assertEquals(4L, counters.get("shard_drop_not_member"));
            assertNull(counters.get("shard_drop_none"));
            // what strangers sent with a job's id is the shard's count, not the job's, which its tenant reads: alice's
            // job saw her 5 packets (2 with a bad MAC, the drops), bob's his 1 own
            final io.switchml.appliance.telemetry.JobCounters aliceCounters = appliance.registry().activeJob(alice.jobId).counters();
            final io.switchml.appliance.telemetry.JobCounters bobCounters = appliance.registry().activeJob(bob.jobId).counters();
            assertEquals(5L, aliceCounters.packetsIn().get());
            assertEquals(2L, aliceCounters.drops().get());
            assertEquals(1L, bobCounters.packetsIn().get());
            assertEquals(0L, bobCounters.drops().get());
        }
    }
}
