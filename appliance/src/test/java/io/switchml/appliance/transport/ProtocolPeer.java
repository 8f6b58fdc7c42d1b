package io.switchml.appliance.transport;

import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.DatagramPacket;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The only member of a world-1 job, speaking the control and data protocols by hand (no worker code):
 * it creates and joins a job, then runs request/response rounds, one update per slot of a window and
 * one result back for each, checking every result's slot, chunk and first lane. Its data socket is a
 * java.nio channel (one system call per datagram) or, batched, a {@link BatchSocket} (one sendmmsg per
 * window, recvmmsg for the results).
 */
final class ProtocolPeer implements AutoCloseable
{
    private final Socket control;
    private final BufferedReader reader;
    private final DatagramChannel udp;
    private final BatchSocket batch;
    private final int lanes;
    private final int slots;
    private final ByteBuffer[] updates;
    private final UnsafeBuffer[] updateViews;
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private final byte[] received = new byte[DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1];
    private final DatagramPacket receivedPacket = new DatagramPacket(received, received.length);
    private final UnsafeBuffer receivedView = new UnsafeBuffer(received);
    private final boolean mac;
    private int jobId;
    private long k0;
    private long k1;
    private long round;

    /**
     * @param controlPort appliance's control port.
     * @param dataPort    appliance's (first shard's) data port.
     * @param lanes       k.
     * @param slots       s, also the window of updates in flight.
     * @param mac         whether the job uses MACs.
     */
    ProtocolPeer(final int controlPort, final int dataPort, final int lanes, final int slots, final boolean mac)
        throws IOException
    {
        this(controlPort, dataPort, lanes, slots, mac, false);
    }

    /**
     * @param batched whether the data socket is a {@link BatchSocket}.
     */
    ProtocolPeer(
        final int controlPort, final int dataPort, final int lanes, final int slots, final boolean mac, final boolean batched)
        throws IOException
    {
        this.lanes = lanes;
        this.slots = slots;
        this.mac = mac;
        control = new Socket("127.0.0.1", controlPort);
        reader = new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8));
        updates = new ByteBuffer[slots];
        updateViews = new UnsafeBuffer[slots];
        if (batched)
        {
            udp = null;
            batch = new BatchSocket(dataPort, slots);
            for (int slot = 0; slot < slots; slot++)
            {
                updateViews[slot] = batch.sendView(slot);
            }
        }
        else
        {
            batch = null;
            udp = DatagramChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            // a window of results arrives as one burst: 32 of k=8192 are 1 MiB
            udp.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            udp.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            udp.connect(new InetSocketAddress("127.0.0.1", dataPort));
            udp.socket().setSoTimeout(2_000);
            for (int slot = 0; slot < slots; slot++)
            {
                updates[slot] = ByteBuffer.allocateDirect(DataHeaderFlyweight.packetLength(lanes));
                updateViews[slot] = new UnsafeBuffer(updates[slot]);
            }
        }
    }

    Map<String, String> request(final String line) throws IOException
    {
        control.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
        return ControlProtocol.parse(reader.readLine());
    }

    /**
     * Create a job of world size 1 and join it as rank 0.
     */
    void createAndJoin(final String name) throws IOException
    {
        final Map<String, String> created = request("CREATE name=" + name + " world=1 type=int32 k=" + lanes + " s=" + slots +
            " mac=" + (mac ? "on" : "off") + " token=token-" + name + " ifAbsent=true");
        if (!"OK".equals(created.get("")))
        {
            throw new IllegalStateException(created.toString());
        }
        jobId = Integer.parseInt(created.get("job"));
        final int port = batch != null ? batch.port() : ((InetSocketAddress)udp.getLocalAddress()).getPort();
        final Map<String, String> joined = request("JOIN job=" + jobId + " rank=0 token=token-" + name + " ports=" + port);
        if (!"OK".equals(joined.get("")))
        {
            throw new IllegalStateException(joined.toString());
        }
        k0 = Long.parseUnsignedLong(joined.get("key").substring(0, 16), 16);
        k1 = Long.parseUnsignedLong(joined.get("key").substring(16), 16);
    }

    /**
     * Run request/response round trips: each round sends one update per slot, then reads a result for
     * each.
     *
     * @param packets updates to send (rounded up to whole windows).
     * @return results received.
     */
    long roundTrips(final long packets) throws IOException
    {
        long results = 0;
        while (results < packets)
        {
            sendWindow();
            results += receiveWindow();
        }
        return results;
    }

    /**
     * Send the next round's update for every slot.
     */
    void sendWindow() throws IOException
    {
        sendWindow(-1);
    }

    /**
     * Send the next round's update for every slot, one of them with a payload bit flipped after signing.
     *
     * @param forgedSlot the slot whose update is forged, or -1 for none.
     */
    void sendWindow(final int forgedSlot) throws IOException
    {
        final long r = round;
        final int version = (int)(r & 1);
        for (int slot = 0; slot < slots; slot++)
        {
            final long sequence = r * slots + slot;
            final UnsafeBuffer view = updateViews[slot];
            header.wrap(view, 0).writeHeader(DataHeaderFlyweight.TYPE_UPDATE, jobId, 0, version, ElementType.INT32, slot,
                sequence, lanes, DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
            header.lane(0, (int)sequence);
            if (mac)
            {
                PacketMac.sign(k0, k1, view, 0, DataHeaderFlyweight.packetLength(lanes));
            }
            if (slot == forgedSlot)
            {
                header.lane(lanes - 1, header.lane(lanes - 1) ^ 1);
            }
            if (batch == null)
            {
                final ByteBuffer update = updates[slot];
                update.clear();
                udp.write(update);
            }
        }
        if (batch != null)
        {
            batch.send(slots, DataHeaderFlyweight.packetLength(lanes));
        }
    }

    /**
     * Read the results of the round {@link #sendWindow()} sent, checking each.
     *
     * @return results received: the window.
     */
    int receiveWindow() throws IOException
    {
        return receiveWindow(slots);
    }

    /**
     * Read the results of the round {@link #sendWindow(int)} sent, checking each: one per slot but a forged one.
     *
     * @param results to read.
     * @return results received.
     */
    int receiveWindow(final int results) throws IOException
    {
        final long r = round++;
        int batched = 0;
        for (int i = 0; i < results; i++)
        {
            if (batch != null)
            {
                while (batched <= i)
                {
                    final int received = batch.receive(batched, results - batched);
                    if (received == 0)
                    {
                        throw new IllegalStateException("no result within 2 s in round " + r + " after " + i + " of its results");
                    }
                    batched += received;
                }
                header.wrap(batch.receiveView(i), 0);
            }
            else
            {
                try
                {
                    udp.socket().receive(receivedPacket);
                }
                catch (final SocketTimeoutException ex)
                {
                    throw new IllegalStateException("no result within 2 s in round " + r + " after " + i + " of its results", ex);
                }
                header.wrap(receivedView, 0);
            }
            final long expected = r * slots + header.slotIndex();
            if (header.type() != DataHeaderFlyweight.TYPE_RESULT || header.chunkSequence() != expected ||
                header.lane(0) != (int)expected)
            {
                throw new IllegalStateException("unexpected result: slot " + header.slotIndex() + " chunk " +
                    header.chunkSequence() + " lane 0 " + header.lane(0) + ", expected chunk " + expected);
            }
            if (mac && !PacketMac.verify(k0, k1, batch != null ? batch.receiveView(i) : receivedView, 0,
                DataHeaderFlyweight.packetLength(lanes)))
            {
                throw new IllegalStateException("result of slot " + header.slotIndex() + " in round " + r +
                    " has a bad MAC");
            }
        }
        return results;
    }

    public void close() throws IOException
    {
        control.close();
        if (udp != null)
        {
            udp.close();
        }
        if (batch != null)
        {
            batch.close();
        }
    }
}
