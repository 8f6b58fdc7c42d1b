package io.switchml.worker.transport;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The native transport on real sockets: loopback for GSO segment boundaries and truncation, and a veth whose
 * token-bucket qdisc holds the sender's buffer full for EAGAIN in the middle of a sendmmsg batch. The veth test needs
 * root (CAP_NET_ADMIN), as CI has; without it, it fails saying so.
 */
class NativeDatagramTransportTest
{
    private static final Inet4Address LOOPBACK = (Inet4Address)InetAddress.getLoopbackAddress();

    private static UnsafeBuffer datagram(final int index, final int length)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
        for (int j = 0; j < length; j++)
        {
            buffer.putByte(j, (byte)(index * 31 + j));
        }
        if (length >= 4)
        {
            buffer.putInt(0, index);
        }
        return buffer;
    }

    private static void assertDatagram(final ByteBuffer received, final int index, final int length)
    {
        assertEquals(length, received.remaining(), "length of datagram " + index);
        assertEquals(index, received.getInt(received.position()), "order: datagram " + index);
        for (int j = 4; j < length; j++)
        {
            if (received.get(received.position() + j) != (byte)(index * 31 + j))
            {
                fail("datagram " + index + " byte " + j + " differs: a segment boundary moved");
            }
        }
    }

    /**
     * 150 datagrams queued at once: runs of 1,064-byte updates (61 fit one 65,507-byte GSO message), a 40-byte probe
     * in the middle and a shorter last one. The receiver must see exactly the datagrams sent, in order, whether or
     * not GSO coalesced them; with GSO on, a few system calls carry them all. Queued by reference, each datagram is
     * its own buffer, so a GSO message gathers its segments from as many places (one iovec each).
     */
    @ParameterizedTest(name = "gso {0}, by reference {1}")
    @CsvSource({"true, false", "false, false", "true, true", "false, true"})
    void burstsArriveAsTheSameDatagramsInOrder(final boolean gso, final boolean byReference) throws Exception
    {
        final int count = 150;
        final int[] lengths = new int[count];
        for (int i = 0; i < count; i++)
        {
            lengths[i] = i == 70 ? 40 : i == count - 1 ? 500 : 1064;
        }
        try (DatagramChannel peer = DatagramChannel.open(StandardProtocolFamily.INET);
            NativeDatagramTransport transport = new NativeDatagramTransport(LOOPBACK, 4 << 20, 1064, gso, true))
        {
            peer.setOption(java.net.StandardSocketOptions.SO_RCVBUF, 8 << 20);
            peer.bind(new InetSocketAddress(LOOPBACK, 0));
            transport.connect(LOOPBACK, ((InetSocketAddress)peer.getLocalAddress()).getPort());
            transport.onStart();
            for (int i = 0; i < count; i++)
            {
                final UnsafeBuffer datagram = datagram(i, lengths[i]);
                assertTrue(byReference ? transport.sendReference(datagram, lengths[i]) : transport.send(datagram, lengths[i]));
            }
            assertEquals(byReference ? count : 0, transport.referencesQueued());
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (transport.hasQueued() && System.nanoTime() < deadline)
            {
                transport.flush();
            }
            assertFalse(transport.hasQueued(), "the queue drained");

            peer.configureBlocking(true);
            peer.socket().setSoTimeout(5_000);
            final ByteBuffer buffer = ByteBuffer.allocateDirect(70_000).order(java.nio.ByteOrder.nativeOrder());
            for (int i = 0; i < count; i++)
            {
                buffer.clear();
                peer.receive(buffer);
                buffer.flip();
                assertDatagram(buffer, i, lengths[i]);
            }
            if (gso)
            {
                // 0-69 (61 + 9), 70 alone, 71-148 (61 + 17), 149 alone; the queue of 128 flushes once on its own
                assertTrue(transport.gsoMessages() >= 4, "GSO used: " + transport.gsoMessages() + " messages");
                assertTrue(transport.sendCalls() <= 4, "system calls: " + transport.sendCalls());
                assertTrue(transport.description().contains("UDP GSO up to 64"), transport.description());
            }
            else
            {
                assertEquals(0, transport.gsoMessages());
                assertTrue(transport.description().contains("GSO off"), transport.description());
            }
            assertEquals(0, transport.sendErrors());
        }
    }

    /**
     * With results multicast, the group's socket is read before the unicast one: a unicast result answers a probe and
     * was sent after the group's results already queued (they name earlier slots), and handing it over first made a
     * rank send in another order than its peers (session 34, docs/bench/worker-transport-2026-11-25.md). Three
     * datagrams to the group, then one to the transport's own port; one receive hands them over in that order. Both
     * transports.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"native", "nio"})
    void theGroupsDatagramsAreHandedOverBeforeAUnicastOneSentAfterThem(final String kind) throws Exception
    {
        final Inet4Address group = (Inet4Address)InetAddress.getByName("239.192.77.1");
        final int groupPort = freeUdpPort();
        try (DatagramChannel peer = multicastPeer();
            DatagramTransport transport = joinedTransport(kind, peer, group, groupPort))
        {
            for (int i = 0; i < 3; i++)
            {
                peer.send(datagram(i, 64).byteBuffer().duplicate().clear(), new InetSocketAddress(group, groupPort));
            }
            peer.send(datagram(3, 40).byteBuffer().duplicate().clear(), new InetSocketAddress(LOOPBACK, transport.localPort()));

            assertEquals(List.of(0, 1, 2, 3), receiveFirstInts(transport, 4), "the group's datagrams first, then the unicast one");
        }
    }

    /**
     * An await ends when a datagram reaches the group's socket, not only the unicast one: the agent sleeps in it
     * between bursts, and the group brings every result when results are multicast. The datagram is sent 200 ms into
     * an await of 20 s; the await must end long before that, and the receive after it hand the datagram over. Both
     * transports.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"native", "nio"})
    void aDatagramToTheGroupEndsAnAwait(final String kind) throws Exception
    {
        final Inet4Address group = (Inet4Address)InetAddress.getByName("239.192.77.2");
        final int groupPort = freeUdpPort();
        try (DatagramChannel peer = multicastPeer();
            DatagramTransport transport = joinedTransport(kind, peer, group, groupPort))
        {
            assertEquals(0, transport.receive((buffer, length) -> { }, 16), "nothing queued before the send");
            final Thread sender = Thread.ofPlatform().start(() ->
            {
                try
                {
                    Thread.sleep(200);
                    peer.send(datagram(7, 64).byteBuffer().duplicate().clear(), new InetSocketAddress(group, groupPort));
                }
                catch (final Exception ex)
                {
                    throw new IllegalStateException(ex);
                }
            });
            final long start = System.nanoTime();
            transport.await(20_000);
            final long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            sender.join();
            assertTrue(waitedMs < 10_000, "the await ended " + waitedMs + " ms after it began");
            assertEquals(List.of(7), receiveFirstInts(transport, 1));
        }
    }

    /**
     * Receive until {@code count} datagrams have come or 5 s have passed.
     *
     * @return the first int of each datagram received, in the order handed over.
     */
    private static List<Integer> receiveFirstInts(final DatagramTransport transport, final int count)
    {
        final List<Integer> received = new ArrayList<>();
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (received.size() < count && System.nanoTime() < deadline)
        {
            transport.receive((buffer, length) -> received.add(buffer.getInt(0)), 16);
        }
        return received;
    }

    /** A UDP port free on loopback a moment ago, for a group's socket to bind. */
    private static int freeUdpPort() throws IOException
    {
        try (DatagramChannel probe = DatagramChannel.open(StandardProtocolFamily.INET))
        {
            probe.bind(new InetSocketAddress(LOOPBACK, 0));
            return ((InetSocketAddress)probe.getLocalAddress()).getPort();
        }
    }

    /** A plain socket on loopback that sends to multicast groups through loopback, standing in for the appliance. */
    private static DatagramChannel multicastPeer() throws IOException
    {
        final DatagramChannel peer = DatagramChannel.open(StandardProtocolFamily.INET);
        try
        {
            peer.bind(new InetSocketAddress(LOOPBACK, 0));
            peer.setOption(java.net.StandardSocketOptions.IP_MULTICAST_IF, java.net.NetworkInterface.getByInetAddress(LOOPBACK));
            return peer;
        }
        catch (final IOException | RuntimeException ex)
        {
            peer.close();
            throw ex;
        }
    }

    /** A transport of the given kind connected to {@code peer}, joined to {@code group} on {@code port}, started. */
    private static DatagramTransport joinedTransport(final String kind, final DatagramChannel peer, final Inet4Address group,
        final int port) throws IOException
    {
        final DatagramTransport transport = kind.equals("native") ?
            new NativeDatagramTransport(LOOPBACK, 1 << 20, 100, true, true) : new NioDatagramTransport(LOOPBACK, 1 << 20, 100);
        try
        {
            transport.connect(LOOPBACK, ((InetSocketAddress)peer.getLocalAddress()).getPort());
            transport.joinGroup(group, port, LOOPBACK);
            transport.onStart();
            return transport;
        }
        catch (final IOException | RuntimeException ex)
        {
            transport.close();
            throw ex;
        }
    }

    /**
     * A GSO burst between two transports: with GRO on, the receiver takes runs as coalesced buffers and splits them at
     * the segment size; either way it hands over exactly the datagrams sent, in order, each with its own length
     * (runs of 1,064 bytes, a 40-byte probe between them, a shorter last one that ends its run).
     */
    @ParameterizedTest(name = "gro {0}")
    @ValueSource(booleans = {true, false})
    void coalescedReceiveSplitsAtSegmentBoundaries(final boolean gro) throws Exception
    {
        final int count = 200;
        final int[] lengths = new int[count];
        for (int i = 0; i < count; i++)
        {
            lengths[i] = i == 70 ? 40 : i == 130 ? 500 : 1064;
        }
        try (NativeDatagramTransport sender = new NativeDatagramTransport(LOOPBACK, 4 << 20, 1064, true, false);
            NativeDatagramTransport receiver = new NativeDatagramTransport(LOOPBACK, 8 << 20, 1064, true, gro))
        {
            sender.connect(LOOPBACK, receiver.localPort());
            receiver.connect(LOOPBACK, sender.localPort());
            sender.onStart();
            receiver.onStart();
            for (int i = 0; i < count; i++)
            {
                assertTrue(sender.send(datagram(i, lengths[i]), lengths[i]));
            }
            final List<byte[]> received = new ArrayList<>();
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while ((sender.hasQueued() || received.size() < count) && System.nanoTime() < deadline)
            {
                sender.flush();
                receiver.await(10);
                receiver.receive((buffer, length) ->
                {
                    final byte[] copy = new byte[length];
                    buffer.getBytes(0, copy);
                    received.add(copy);
                }, 64);
            }
            assertEquals(count, received.size(), "datagrams received");
            for (int i = 0; i < count; i++)
            {
                assertDatagram(ByteBuffer.wrap(received.get(i)).order(java.nio.ByteOrder.nativeOrder()), i, lengths[i]);
            }
            assertTrue(sender.gsoMessages() >= 3, "the sender used GSO: " + sender.gsoMessages());
            assertEquals(0, receiver.truncated());
            if (gro)
            {
                assertTrue(receiver.groBuffers() > 0, "coalesced buffers: " + receiver.description());
                assertTrue(receiver.groSegments() >= 2 * receiver.groBuffers(), "segments " + receiver.groSegments());
                assertTrue(receiver.description().contains("with UDP GRO"), receiver.description());
            }
            else
            {
                assertEquals(0, receiver.groBuffers());
                assertTrue(receiver.description().contains("UDP GRO off"), receiver.description());
            }
        }
    }

    /**
     * With GRO on, a coalesced buffer whose segments are longer than the receiver takes is dropped and every datagram
     * in it counted as truncated; a datagram of the right size after it arrives.
     */
    @Test
    void aCoalescedBufferOfTooLongDatagramsIsCountedPerDatagram() throws Exception
    {
        try (NativeDatagramTransport sender = new NativeDatagramTransport(LOOPBACK, 4 << 20, 200, true, false);
            NativeDatagramTransport receiver = new NativeDatagramTransport(LOOPBACK, 4 << 20, 100, true, true))
        {
            sender.connect(LOOPBACK, receiver.localPort());
            receiver.connect(LOOPBACK, sender.localPort());
            sender.onStart();
            receiver.onStart();
            for (int i = 0; i < 5; i++)
            {
                assertTrue(sender.send(datagram(i, 200), 200));
            }
            sender.flush();
            assertTrue(sender.send(datagram(5, 80), 80));
            sender.flush();
            final List<Integer> lengths = new ArrayList<>();
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (lengths.isEmpty() && System.nanoTime() < deadline)
            {
                receiver.await(100);
                receiver.receive((buffer, length) -> lengths.add(length), 32);
            }
            assertEquals(List.of(80), lengths);
            assertEquals(1, sender.gsoMessages(), "the five went as one GSO message");
            assertEquals(5, receiver.truncated());
        }
    }

    /**
     * A datagram longer than the receive buffer is dropped and counted, not handed over cut short; the ones around
     * it arrive whole.
     */
    @Test
    void aTruncatedDatagramIsDroppedAndCounted() throws Exception
    {
        try (DatagramChannel peer = DatagramChannel.open(StandardProtocolFamily.INET);
            NativeDatagramTransport transport = new NativeDatagramTransport(LOOPBACK, 1 << 20, 100, true, true))
        {
            peer.bind(new InetSocketAddress(LOOPBACK, 0));
            transport.connect(LOOPBACK, ((InetSocketAddress)peer.getLocalAddress()).getPort());
            transport.onStart();
            final InetSocketAddress to = new InetSocketAddress(LOOPBACK, transport.localPort());
            peer.send(ByteBuffer.allocate(50), to);
            peer.send(ByteBuffer.allocate(200), to);
            peer.send(ByteBuffer.allocate(100), to);
            final List<Integer> lengths = new ArrayList<>();
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (lengths.size() < 2 && System.nanoTime() < deadline)
            {
                transport.await(100);
                transport.receive((buffer, length) -> lengths.add(length), 32);
            }
            assertEquals(List.of(50, 100), lengths);
            assertEquals(1, transport.truncated());
            assertTrue(transport.drained());
        }
    }

    /**
     * With a receive batch of 2 (the warm-up rehearsal's), 5 queued datagrams are read in one pass of 3 recvmmsg calls:
     * two full batches, which read on, and a partial one, which ends the pass without another call. A batch outside
     * 2 to 32 is refused.
     */
    @Test
    void aSmallReceiveBatchReadsOnAfterFullBatchesAndStopsAfterAPartialOne() throws Exception
    {
        try (DatagramChannel peer = DatagramChannel.open(StandardProtocolFamily.INET);
            NativeDatagramTransport transport = new NativeDatagramTransport(LOOPBACK, 1 << 20, 100, false, false, 2))
        {
            peer.bind(new InetSocketAddress(LOOPBACK, 0));
            transport.connect(LOOPBACK, ((InetSocketAddress)peer.getLocalAddress()).getPort());
            transport.onStart();
            final InetSocketAddress to = new InetSocketAddress(LOOPBACK, transport.localPort());
            for (int i = 0; i < 5; i++)
            {
                peer.send(ByteBuffer.allocate(10 + i), to);
            }
            transport.await(1_000);
            // loopback delivers in the sender's system call: all 5 are queued once the first is
            final List<Integer> lengths = new ArrayList<>();
            final long callsBefore = transport.receiveCalls();
            assertEquals(5, transport.receive((buffer, length) -> lengths.add(length), 32));
            assertEquals(List.of(10, 11, 12, 13, 14), lengths);
            assertEquals(3, transport.receiveCalls() - callsBefore, "recvmmsg calls: 2 + 2 + 1");
            assertTrue(transport.drained());
            assertTrue(transport.description().contains("recvmmsg batches of 2"), transport.description());
        }
        for (final int batch : new int[] {1, 33})
        {
            final IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> new NativeDatagramTransport(LOOPBACK, 1 << 20, 100, false, false, batch).close());
            assertTrue(refused.getMessage().contains("receiveBatch must be 2 to 32"), refused.getMessage());
        }
    }

    /**
     * Once large datagrams have come in, a recvmmsg call asks for as many as 128 KiB holds: 4 of the 32,744 bytes of
     * loopback's default k, so that each is read back from the cache it was just copied into; after small ones, the
     * whole batch again.
     */
    @Test
    void largeDatagramsAreReadFourAtATimeAndSmallOnesInFullBatches() throws Exception
    {
        final int large = 32_744;
        try (DatagramChannel peer = DatagramChannel.open(StandardProtocolFamily.INET);
            NativeDatagramTransport transport = new NativeDatagramTransport(LOOPBACK, 8 << 20, large, false, false))
        {
            peer.bind(new InetSocketAddress(LOOPBACK, 0));
            peer.setOption(java.net.StandardSocketOptions.SO_SNDBUF, 4 << 20);
            transport.connect(LOOPBACK, ((InetSocketAddress)peer.getLocalAddress()).getPort());
            transport.onStart();
            final InetSocketAddress to = new InetSocketAddress(LOOPBACK, transport.localPort());
            final List<Integer> lengths = new ArrayList<>();

            for (int i = 0; i < 16; i++)
            {
                peer.send(ByteBuffer.allocate(large), to);
            }
            long callsBefore = transport.receiveCalls();
            assertEquals(16, transport.receive((buffer, length) -> lengths.add(length), 64));
            assertEquals(1, transport.receiveCalls() - callsBefore, "the size is not known yet: one call of up to 32");

            for (int i = 0; i < 16; i++)
            {
                peer.send(ByteBuffer.allocate(large), to);
            }
            callsBefore = transport.receiveCalls();
            assertEquals(16, transport.receive((buffer, length) -> lengths.add(length), 64));
            assertEquals(5, transport.receiveCalls() - callsBefore, "4 full calls of 4, then an empty one");

            for (int i = 0; i < 5; i++)
            {
                peer.send(ByteBuffer.allocate(100), to);
            }
            callsBefore = transport.receiveCalls();
            assertEquals(5, transport.receive((buffer, length) -> lengths.add(length), 64));
            assertEquals(2, transport.receiveCalls() - callsBefore, "4 at the large datagrams' batch, then up to 32: 1");
            assertEquals(37, lengths.size());
            assertEquals(32 * large + 5 * 100, lengths.stream().mapToLong(Integer::longValue).sum());
            assertEquals(0, transport.truncated());
        }
    }

    /**
     * wakeup() from another thread ends an await at once, and one that comes before the await makes it return
     * without blocking.
     */
    @Test
    void wakeupEndsAnAwait() throws Exception
    {
        try (NativeDatagramTransport transport = new NativeDatagramTransport(LOOPBACK, 1 << 20, 100, true, true))
        {
            transport.onStart();
            final Thread waker = Thread.ofPlatform().start(() ->
            {
                try
                {
                    Thread.sleep(100);
                }
                catch (final InterruptedException ignore)
                {
                    Thread.currentThread().interrupt();
                }
                transport.wakeup();
            });
            long start = System.nanoTime();
            transport.await(10_000);
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "woken long before the timeout");
            waker.join();

            transport.wakeup();
            start = System.nanoTime();
            transport.await(10_000);
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "a wake-up before the wait counts");
        }
    }

    /**
     * A veth whose token-bucket qdisc (1 Mbit/s) holds the datagrams keeps the socket's small send buffer full, so
     * sendmmsg takes part of a batch and then fails with EAGAIN. What is not taken stays queued, later flushes send
     * it as the qdisc drains, and the interface transmits every datagram exactly once, none counted as an error.
     */
    @ParameterizedTest(name = "gso {0}")
    @ValueSource(booleans = {false, true})
    void aFullSendBufferLeavesTheRestQueuedAndLosesNothing(final boolean gso) throws Exception
    {
        final String device = "smlq" + ProcessHandle.current().pid() % 100_000 + (gso ? "g" : "n");
        final int net = (int)(ProcessHandle.current().pid() % 200) + (gso ? 1 : 0);
        final String local = "10.252." + net + ".1";
        final String peer = "10.252." + net + ".2";
        // IPv6 off on both ends: its router solicitations would add packets to the count
        sh("ip link add " + device + " type veth peer name " + device + "p && sysctl -qw net.ipv6.conf." + device +
            ".disable_ipv6=1 net.ipv6.conf." + device + "p.disable_ipv6=1 && ip addr add " + local + "/30 dev " + device +
            " && ip link set " + device + " up && ip link set " + device + "p up && ip neigh replace " + peer +
            " lladdr 02:00:00:00:00:02 dev " + device + " && tc qdisc add dev " + device +
            " root tbf rate 1mbit burst 4kb latency 5s");
        try (NativeDatagramTransport transport =
            new NativeDatagramTransport(InetAddress.getByName(local), 16 << 10, 1000, gso, true))
        {
            transport.connect((Inet4Address)InetAddress.getByName(peer), 9);
            transport.onStart();
            final long txBefore = txPackets(device);
            final int count = 100;
            int sent = 0;
            final int firstFlush;
            for (int i = 0; i < count; i++)
            {
                assertTrue(transport.send(datagram(i, 1000), 1000), "queued " + i);
            }
            sent += transport.flush();
            firstFlush = sent;
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (transport.hasQueued() && System.nanoTime() < deadline)
            {
                transport.await(20);
                sent += transport.flush();
            }
            assertTrue(firstFlush < count, "the first flush stopped at EAGAIN: " + firstFlush + " of " + count);
            assertFalse(transport.hasQueued(), "everything was sent in the end");
            assertEquals(count, sent);
            assertEquals(0, transport.sendErrors(), "EAGAIN is not an error");
            if (!gso)
            {
                long tx = 0;
                while (System.nanoTime() < deadline && (tx = txPackets(device) - txBefore) < count)
                {
                    Thread.sleep(50);
                }
                assertEquals(count, tx, "the veth transmitted each datagram once");
            }
        }
        finally
        {
            sh("ip link del " + device);
        }
    }

    /**
     * Datagrams queued by reference that a flush cannot hand over (EAGAIN behind a 1 Mbit/s token bucket) are copied
     * into the queue before the flush returns: their owners overwrite every buffer right after the first flush, and
     * the receiver, in a network namespace behind the veth, still gets each datagram once with its original bytes.
     * Needs root, as CI has; without it, it fails saying so.
     */
    @Test
    void referencesLeftQueuedAreCopiedBeforeTheirOwnersChangeThem() throws Exception
    {
        final String tag = Long.toString(ProcessHandle.current().pid() % 100_000);
        final String device = "smlr" + tag;
        final String namespace = "smlr" + tag;
        final int net = (int)(ProcessHandle.current().pid() % 200) + 20;
        final String local = "10.253." + net + ".1";
        final String peer = "10.253." + net + ".2";
        final int count = 100;
        final int length = 1000;
        final int port = 9_999;
        sh("ip netns add " + namespace + " && ip link add " + device + " type veth peer name " + device + "p netns " +
            namespace + " && sysctl -qw net.ipv6.conf." + device + ".disable_ipv6=1 && ip addr add " + local + "/30 dev " +
            device + " && ip link set " + device + " up && ip -n " + namespace + " addr add " + peer + "/30 dev " + device +
            "p && ip -n " + namespace + " link set " + device + "p up && ip -n " + namespace + " link set lo up && " +
            "tc qdisc add dev " + device + " root tbf rate 1mbit burst 4kb latency 5s");
        Process receiver = null;
        try
        {
            // the receiver checks each datagram's index and pattern (as assertDatagram does) and prints what it saw
            final String script = String.join("\n",
                "import socket, struct",
                "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
                "s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)",
                "s.bind(('" + peer + "', " + port + "))",
                "print('ready', flush=True)",
                "s.settimeout(30)",
                "seen, bad = [], 0",
                "while len(seen) < " + count + ":",
                "    d = s.recv(65536)",
                "    i = struct.unpack('=i', d[:4])[0]",
                "    bad += len(d) != " + length + " or any(d[j] != (i * 31 + j) & 0xff for j in range(4, len(d)))",
                "    seen.append(i)",
                "print('received', len(seen), 'bad', bad, 'in order', seen == list(range(" + count + ")), flush=True)");
            receiver = new ProcessBuilder("ip", "netns", "exec", namespace, "python3", "-c", script)
                .redirectErrorStream(true).start();
            final java.io.BufferedReader out = new java.io.BufferedReader(
                new java.io.InputStreamReader(receiver.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
            assertEquals("ready", out.readLine(), "the receiver in namespace " + namespace + " started");
            try (NativeDatagramTransport transport =
                new NativeDatagramTransport(InetAddress.getByName(local), 16 << 10, length, false, true))
            {
                transport.connect((Inet4Address)InetAddress.getByName(peer), port);
                transport.onStart();
                final UnsafeBuffer[] owners = new UnsafeBuffer[count];
                for (int i = 0; i < count; i++)
                {
                    owners[i] = datagram(i, length);
                    assertTrue(transport.sendReference(owners[i], length), "queued " + i);
                }
                int sent = transport.flush();
                assertTrue(sent < count, "the first flush stopped at EAGAIN: " + sent + " of " + count);
                assertEquals(count - sent, transport.referencesCopied(), "what the flush left queued was copied");
                for (final UnsafeBuffer owner : owners)
                {
                    owner.setMemory(0, length, (byte)0x5a);
                }
                final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (transport.hasQueued() && System.nanoTime() < deadline)
                {
                    transport.await(20);
                    sent += transport.flush();
                }
                assertEquals(count, sent);
                assertEquals(0, transport.sendErrors());
            }
            assertTrue(receiver.waitFor(40, TimeUnit.SECONDS), "the receiver finished");
            assertEquals("received " + count + " bad 0 in order True", out.readLine());
        }
        finally
        {
            if (receiver != null)
            {
                receiver.destroyForcibly();
            }
            sh("ip netns del " + namespace + "; ip link del " + device + " 2>/dev/null; true");
        }
    }

    private static long txPackets(final String device) throws IOException
    {
        return Long.parseLong(Files.readString(Path.of("/sys/class/net/" + device + "/statistics/tx_packets")).trim());
    }

    private static void sh(final String command) throws IOException, InterruptedException
    {
        final Process process = new ProcessBuilder("sh", "-c", command).redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes());
        if (process.waitFor() != 0)
        {
            fail("'" + command + "' failed (this test needs root, CAP_NET_ADMIN and veth): " + output);
        }
    }
}
