package io.switchml.appliance.transport;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.Socket;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Multicast results: with a group base configured, a completed slot's result leaves the appliance as one
 * datagram to the job's group (base + job id) instead of one unicast per member, and every member that
 * joined the group on a socket bound to the multicast port receives it; a retransmission into the completed
 * slot is still answered by unicast to its sender alone. On loopback, as the workers of one host would see
 * it.
 */
@Timeout(30)
class DataPlaneMulticastTest
{
    private static final String BASE = "239.192.0.0";

    @TempDir
    Path tempDir;

    private Appliance appliance;
    private final List<AutoCloseable> closeables = new CopyOnWriteArrayList<>();

    @AfterEach
    void stop() throws Exception
    {
        for (final AutoCloseable closeable : closeables)
        {
            closeable.close();
        }
        if (appliance != null)
        {
            appliance.close();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"native", "epoll"})
    void completedResultsGoToTheGroupOnceAndRetransmissionsAreAnsweredByUnicast(final String transport) throws Exception
    {
        final NetworkInterface loopback = NetworkInterface.getByInetAddress(InetAddress.getByName("127.0.0.1"));
        final DatagramChannel groupA = groupSocket(0);
        final int groupPort = ((InetSocketAddress)groupA.getLocalAddress()).getPort();
        final DatagramChannel groupB = groupSocket(groupPort);
        appliance = Appliance.launch(new ApplianceContext().transport(transport).dataPort(0).controlPort(0).httpPort(-1)
            .dir(tempDir.toString()).multicastBase(BASE).multicastPort(groupPort));
        assertEquals(transport, appliance.transportName());

        final Socket control = new Socket("127.0.0.1", appliance.controlPort());
        closeables.add(control);
        final BufferedReader reader = new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8));
        final Map<String, String> created = request(control, reader,
            "CREATE name=mc world=2 type=int32 k=4 s=2 mac=off token=token-mc ifAbsent=true");
        assertEquals("OK", created.get(""), created.toString());
        final int jobId = Integer.parseInt(created.get("job"));
        final InetAddress group = InetAddress.getByName("239.192.0." + jobId);
        groupA.join(group, loopback);
        groupB.join(group, loopback);

        final DatagramChannel memberA = member();
        final DatagramChannel memberB = member();
        final Thread joinB = Thread.ofPlatform().start(() -> joinQuietly(jobId, 1, memberB));
        final Socket controlA = join(jobId, 0, memberA);
        joinB.join(10_000);

        final long packetsOutBefore = appliance.counter("packets_out");
        memberA.write(update(jobId, 0, 0, 5, 0));
        memberB.write(update(jobId, 1, 0, 7, 0));
        assertEquals(12, lane0(groupA), "member A's group socket");
        assertEquals(12, lane0(groupB), "member B's group socket");
        assertNull(receive(memberA, 300), "no unicast result for a completed slot");
        assertNull(receive(memberB, 100), "no unicast result for a completed slot");
        awaitCounter("packets_out", packetsOutBefore + 1);
        assertEquals(packetsOutBefore + 1, appliance.counter("packets_out"), "one datagram for the whole job");

        memberA.write(update(jobId, 0, 0, 5, DataHeaderFlyweight.FLAG_RETRANSMIT));
        final ByteBuffer shadow = receive(memberA, 2_000);
        assertNotNull(shadow, "the retransmission is answered by unicast");
        assertEquals(12, new DataHeaderFlyweight().wrap(new UnsafeBuffer(shadow), 0).lane(0));
        assertNull(receive(groupB, 300), "the shadow result is not multicast");
        controlA.close();
    }

    private DatagramChannel groupSocket(final int port) throws IOException
    {
        final DatagramChannel channel = DatagramChannel.open(StandardProtocolFamily.INET)
            .setOption(StandardSocketOptions.SO_REUSEADDR, true)
            .bind(new InetSocketAddress(port));
        closeables.add(channel);
        return channel;
    }

    private DatagramChannel member() throws IOException
    {
        final DatagramChannel channel = DatagramChannel.open(StandardProtocolFamily.INET)
            .bind(new InetSocketAddress("127.0.0.1", 0));
        channel.connect(new InetSocketAddress("127.0.0.1", appliance.dataPort()));
        closeables.add(channel);
        return channel;
    }

    private Socket join(final int jobId, final int rank, final DatagramChannel udp) throws IOException
    {
        final Socket control = new Socket("127.0.0.1", appliance.controlPort());
        closeables.add(control);
        final BufferedReader reader = new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8));
        final int port = ((InetSocketAddress)udp.getLocalAddress()).getPort();
        final Map<String, String> reply = request(control, reader,
            "JOIN job=" + jobId + " rank=" + rank + " token=token-mc ports=" + port);
        assertEquals("OK", reply.get(""), reply.toString());
        return control;
    }

    private void joinQuietly(final int jobId, final int rank, final DatagramChannel udp)
    {
        try
        {
            join(jobId, rank, udp);
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    private static Map<String, String> request(final Socket control, final BufferedReader reader, final String line)
        throws IOException
    {
        control.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
        return ControlProtocol.parse(reader.readLine());
    }

    private static ByteBuffer update(final int jobId, final int rank, final long sequence, final int value, final int flags)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(DataHeaderFlyweight.packetLength(4));
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(buffer), 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, flags, ElementType.INT32, 0, sequence, 4,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
        for (int i = 0; i < 4; i++)
        {
            header.lane(i, value);
        }
        return buffer;
    }

    private static int lane0(final DatagramChannel channel) throws IOException, InterruptedException
    {
        final ByteBuffer result = receive(channel, 2_000);
        assertNotNull(result, "no result within 2 s");
        return new DataHeaderFlyweight().wrap(new UnsafeBuffer(result), 0).lane(0);
    }

    private static ByteBuffer receive(final DatagramChannel channel, final long timeoutMs) throws IOException, InterruptedException
    {
        channel.configureBlocking(false);
        final ByteBuffer buffer = ByteBuffer.allocate(2048);
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline)
        {
            if (channel.receive(buffer) != null)
            {
                return buffer.flip();
            }
            Thread.sleep(5);
        }
        return null;
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
}
