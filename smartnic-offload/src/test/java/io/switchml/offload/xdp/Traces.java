package io.switchml.offload.xdp;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.Arrays;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Seeded packet traces for differential tests of an aggregator against {@code SlotPool}: workers of several jobs
 * stream chunks through their slots (both pool versions, exponent-only rounds, short last chunks), and the network
 * and the ranks misbehave — loss, duplicates, reordering, retransmissions (also into completed slot versions and
 * across versions), probes, stray ranks sending mismatched chunks, forged sources, bad MACs, wrong shards, and
 * malformed packets of every kind the validator names, plus traffic that is not ours at all.
 */
final class Traces
{
    static final int APPLIANCE = 0x0A000001; // 10.0.0.1
    static final int STRANGER = 0x0A0000FE;

    private final SplittableRandom random;
    private final int[] dataPorts;
    private final List<byte[]> sent = new ArrayList<>();
    private final List<byte[]> window = new ArrayList<>();

    Traces(final long seed, final int[] dataPorts)
    {
        this.random = new SplittableRandom(seed);
        this.dataPorts = dataPorts.clone();
    }

    static int workerAddress(final int rank)
    {
        return 0x0A000000 + 11 + rank;
    }

    static int workerPort(final int rank, final int shard)
    {
        return 40_000 + 8 * rank + shard;
    }

    /** A job image for tests, with members at {@link #workerAddress} / {@link #workerPort}. */
    static XdpJobImage job(
        final int jobId, final int world, final int lanes, final int slots, final int slotBase, final byte type, final boolean mac,
        final int group, final int shards)
    {
        final int[] addresses = new int[world];
        final int[][] ports = new int[world][shards];
        for (int rank = 0; rank < world; rank++)
        {
            addresses[rank] = workerAddress(rank);
            for (int shard = 0; shard < shards; shard++)
            {
                ports[rank][shard] = workerPort(rank, shard);
            }
        }
        final int[] groupPorts = new int[group != 0 ? shards : 0];
        for (int shard = 0; shard < groupPorts.length; shard++)
        {
            groupPorts[shard] = 8471 + shard;
        }
        return new XdpJobImage(jobId, world, lanes, slots, slotBase, type, mac, 0x0123456789ABCDEFL * jobId, 0x5A5A1234L ^ jobId,
            group, groupPorts, addresses, ports);
    }

    /**
     * One job's streams: each rank walks the chunk sequence; chunk c uses slot c mod s and pool version (c / s) mod 2;
     * a rank runs at most s chunks ahead of the slowest, as the worker's flow control allows.
     */
    final class Stream
    {
        final XdpJobImage job;
        final int[] next;
        final int shards = dataPorts.length;

        Stream(final XdpJobImage job)
        {
            this.job = job;
            this.next = new int[job.worldSize()];
        }

        /**
         * A sender's look-ahead: now and then unknown (the next chunk not submitted) or not finite (it holds a NaN or
         * an infinity), which both win the maximum; otherwise any block exponent.
         */
        int lookaheadOf(final int draw)
        {
            return draw == 0 ? DataHeaderFlyweight.UNKNOWN_EXPONENT :
                draw == 1 ? DataHeaderFlyweight.NON_FINITE_EXPONENT : random.nextInt(-126, 129);
        }

        boolean exponentOnly(final long chunk)
        {
            return job.elementType() == ElementType.FLOAT32 && (chunk * 0x9E3779B97F4A7C15L >>> 60) == 0;
        }

        int count(final long chunk)
        {
            return exponentOnly(chunk) ? 0 : (chunk % 7 == 6 ? 1 + (int)((chunk * 31) % job.lanes()) : job.lanes());
        }

        int scale(final long chunk)
        {
            return job.elementType() == ElementType.INT32 ? DataHeaderFlyweight.NO_EXPONENT : (int)(chunk % 21) - 10;
        }

        /** The update of a rank for a chunk, signed when the job has MAC on. */
        byte[] update(final int rank, final long chunk, final int extraFlags)
        {
            final int slot = (int)(chunk % job.slots());
            final int version = (int)((chunk / job.slots()) & 1);
            final int count = count(chunk);
            final int flags = version | (exponentOnly(chunk) ? DataHeaderFlyweight.FLAG_EXPONENT_ONLY : 0) | extraFlags;
            final int lookahead = job.elementType() == ElementType.INT32 ? DataHeaderFlyweight.NO_EXPONENT :
                lookaheadOf(random.nextInt(50));
            final int check = DataHeaderFlyweight.tensorCheckOf(random.nextInt(40) == 0 ? random.nextInt(256) : (int)chunk * 7);
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(count)]);
            final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
            header.writeHeader(DataHeaderFlyweight.TYPE_UPDATE, job.jobId(), rank, flags, job.elementType(), slot, chunk, count,
                scale(chunk), lookahead, check);
            final int limit = Integer.MAX_VALUE / job.worldSize();
            for (int i = 0; i < count; i++)
            {
                header.lane(i, random.nextInt(20) == 0 ? (random.nextBoolean() ? limit : -limit) : random.nextInt(-limit, limit));
            }
            return frame(rank, slot % shards, buffer.byteArray(), buffer.capacity());
        }

        /** A probe of a rank about its update of a chunk. */
        byte[] probe(final int rank, final long chunk)
        {
            final int slot = (int)(chunk % job.slots());
            final int version = (int)((chunk / job.slots()) & 1);
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.HEADER_LENGTH]);
            new DataHeaderFlyweight().wrap(buffer, 0).writeHeader(DataHeaderFlyweight.TYPE_PROBE, job.jobId(), rank,
                version | (exponentOnly(chunk) ? DataHeaderFlyweight.FLAG_EXPONENT_ONLY : 0), job.elementType(), slot, chunk, 0,
                scale(chunk), job.elementType() == ElementType.INT32 ? DataHeaderFlyweight.NO_EXPONENT : 0, 0);
            return frame(rank, slot % shards, buffer.byteArray(), buffer.capacity());
        }

        byte[] frame(final int rank, final int shard, final byte[] datagram, final int length)
        {
            if (job.macEnabled())
            {
                PacketMac.sign(job.macK0(), job.macK1(), new UnsafeBuffer(datagram), 0, length);
            }
            return Frames.udp(workerAddress(rank), workerPort(rank, shard), APPLIANCE, dataPorts[shard], datagram, length);
        }

        /** The next fresh update of some rank that may send, or null. */
        byte[] nextUpdate()
        {
            int slowest = Integer.MAX_VALUE;
            for (final int n : next)
            {
                slowest = Math.min(slowest, n);
            }
            final int start = random.nextInt(next.length);
            for (int i = 0; i < next.length; i++)
            {
                final int rank = (start + i) % next.length;
                if (next[rank] < slowest + job.slots())
                {
                    return update(rank, next[rank]++, 0);
                }
            }
            return null;
        }

        int rankBehind()
        {
            return random.nextInt(next.length);
        }
    }

    /**
     * The whole trace: interleaved streams of the given jobs with faults, in sending order.
     *
     * @param steps  number of generation steps (each emits zero or more frames).
     * @param others jobs whose packets the program does not know (they must pass untouched).
     */
    List<byte[]> generate(final List<XdpJobImage> jobs, final List<XdpJobImage> others, final int steps)
    {
        final List<Stream> streams = new ArrayList<>();
        for (final XdpJobImage job : jobs)
        {
            streams.add(new Stream(job));
        }
        final List<Stream> unknown = new ArrayList<>();
        for (final XdpJobImage job : others)
        {
            unknown.add(new Stream(job));
        }
        final List<byte[]> trace = new ArrayList<>();
        final List<long[]> lost = new ArrayList<>();
        for (int step = 0; step < steps; step++)
        {
            final Stream stream = streams.get(random.nextInt(streams.size()));
            final int dice = random.nextInt(1000);
            if (dice < 700)
            {
                final byte[] update = stream.nextUpdate();
                if (update != null)
                {
                    sent.add(update);
                    if (random.nextInt(100) >= 4)
                    {
                        window.add(update);
                    }
                    else
                    {
                        // lost on the way; its sender's timer resends it a little later
                        lost.add(new long[] {step + random.nextInt(5, 40), sent.size() - 1});
                    }
                }
            }
            else if (dice < 760 && !sent.isEmpty())
            {
                window.add(sent.get(random.nextInt(Math.max(0, sent.size() - 200), sent.size()))); // network duplicate
            }
            else if (dice < 830)
            {
                final int rank = stream.rankBehind();
                final long chunk = Math.max(0, stream.next[rank] - 1 - random.nextInt(2 * stream.job.slots() + 1));
                window.add(stream.update(rank, chunk, DataHeaderFlyweight.FLAG_RETRANSMIT)); // retransmission
            }
            else if (dice < 900)
            {
                final int rank = stream.rankBehind();
                final long chunk = Math.max(0, stream.next[rank] - 1 - random.nextInt(stream.job.slots() + 1));
                window.add(stream.probe(rank, chunk));
            }
            else if (dice < 915)
            {
                // a rank sends a chunk that disagrees with its slot (another count or exponent)
                final int rank = stream.rankBehind();
                final byte[] update = stream.update(rank, stream.next[rank], 0);
                final int countOffset = Frames.PAYLOAD + DataHeaderFlyweight.ELEMENT_COUNT_OFFSET;
                if (Frames.getShort(update, countOffset) > 1)
                {
                    window.add(mutateScale(stream, update));
                }
            }
            else if (dice < 960)
            {
                window.add(forge(stream));
            }
            else if (dice < 980 && !unknown.isEmpty())
            {
                final byte[] update = unknown.get(random.nextInt(unknown.size())).nextUpdate();
                if (update != null)
                {
                    window.add(update);
                }
            }
            else
            {
                window.add(notOurs(stream));
            }
            for (int i = lost.size() - 1; i >= 0; i--)
            {
                if (lost.get(i)[0] <= step)
                {
                    window.add(retransmission(streams, sent.get((int)lost.remove(i)[1])));
                }
            }
            while (!window.isEmpty() && (window.size() > 6 || random.nextInt(3) == 0))
            {
                trace.add(window.remove(random.nextInt(window.size()))); // reordering within a small window
            }
        }
        trace.addAll(window);
        window.clear();
        return trace;
    }

    /** The same update again with the retransmission flag, signed again. */
    private byte[] retransmission(final List<Stream> streams, final byte[] update)
    {
        final byte[] datagram = Frames.payload(update);
        datagram[DataHeaderFlyweight.FLAGS_OFFSET] |= DataHeaderFlyweight.FLAG_RETRANSMIT;
        final int jobId = new UnsafeBuffer(datagram).getInt(DataHeaderFlyweight.JOB_ID_OFFSET, java.nio.ByteOrder.BIG_ENDIAN);
        for (final Stream stream : streams)
        {
            if (stream.job.jobId() == jobId)
            {
                return resign(stream, update, datagram);
            }
        }
        return update;
    }

    private byte[] mutateScale(final Stream stream, final byte[] update)
    {
        final byte[] datagram = Frames.payload(update);
        final UnsafeBuffer buffer = new UnsafeBuffer(datagram);
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
        if (stream.job.elementType() == ElementType.FLOAT32 && !header.isExponentOnly())
        {
            header.scaleExponent(header.scaleExponent() + 1);
        }
        else
        {
            // another element count: a shorter packet
            final int count = header.elementCount() - 1;
            final byte[] shorter = new byte[DataHeaderFlyweight.packetLength(count)];
            System.arraycopy(datagram, 0, shorter, 0, shorter.length);
            final UnsafeBuffer shortBuffer = new UnsafeBuffer(shorter);
            shortBuffer.putShort(DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, (short)count, java.nio.ByteOrder.BIG_ENDIAN);
            return resign(stream, update, shorter);
        }
        return resign(stream, update, datagram);
    }

    private byte[] resign(final Stream stream, final byte[] like, final byte[] datagram)
    {
        if (stream.job.macEnabled())
        {
            PacketMac.sign(stream.job.macK0(), stream.job.macK1(), new UnsafeBuffer(datagram), 0, datagram.length);
        }
        return Frames.udp(Frames.srcAddress(like), Frames.srcPort(like), Frames.dstAddress(like), Frames.dstPort(like), datagram,
            datagram.length);
    }

    /** A packet that a stranger or a broken sender made. */
    private byte[] forge(final Stream stream)
    {
        final int rank = stream.rankBehind();
        final byte[] update = stream.update(rank, Math.max(0, stream.next[rank] - 1), 0);
        final byte[] datagram = Frames.payload(update);
        final int kind = random.nextInt(12);
        switch (kind)
        {
            case 0 -> // bad MAC (or, with MAC off, a flipped lane that nobody can tell)
                datagram[datagram.length - 1] ^= 0x10;
            case 1 -> // another source port
            {
                return Frames.udp(Frames.srcAddress(update), Frames.srcPort(update) + 1, APPLIANCE, Frames.dstPort(update), datagram,
                    datagram.length);
            }
            case 2 -> // a stranger's address
            {
                return Frames.udp(STRANGER, Frames.srcPort(update), APPLIANCE, Frames.dstPort(update), datagram, datagram.length);
            }
            case 3 -> // the other shard's port
            {
                final int other = dataPorts[(indexOf(Frames.dstPort(update)) + 1) % dataPorts.length];
                return Frames.udp(Frames.srcAddress(update), Frames.srcPort(update), APPLIANCE, other, datagram, datagram.length);
            }
            case 4 -> // rank beyond the world size (still a valid rank)
                Frames.putShort(datagram, DataHeaderFlyweight.WORKER_RANK_OFFSET, stream.job.worldSize() + random.nextInt(3));
            case 5 -> // slot beyond the job's slots
                Frames.putShort(datagram, DataHeaderFlyweight.SLOT_INDEX_OFFSET + 2, stream.job.slots() + random.nextInt(1, 4) * dataPorts.length);
            case 6 -> // truncated
            {
                return Frames.udp(Frames.srcAddress(update), Frames.srcPort(update), APPLIANCE, Frames.dstPort(update), datagram,
                    random.nextInt(datagram.length));
            }
            case 7 -> // a result from the outside
                datagram[DataHeaderFlyweight.TYPE_OFFSET] = DataHeaderFlyweight.TYPE_RESULT;
            case 9 -> // a PENDING from the outside (only the aggregator sends them): well-formed, or keeping the lanes
            {
                // chosen by the chunk's parity, not the random stream, so that the traces stay as they were otherwise
                final boolean withLanes = (datagram[DataHeaderFlyweight.CHUNK_SEQUENCE_OFFSET + 7] & 1) != 0;
                final byte[] pending = withLanes ? datagram : Arrays.copyOf(datagram, DataHeaderFlyweight.HEADER_LENGTH);
                pending[DataHeaderFlyweight.TYPE_OFFSET] = DataHeaderFlyweight.TYPE_PENDING;
                if (!withLanes)
                {
                    Frames.putShort(pending, DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, 0);
                }
                return Frames.udp(Frames.srcAddress(update), Frames.srcPort(update), APPLIANCE, Frames.dstPort(update), pending,
                    pending.length);
            }
            case 8 -> // another element type
                datagram[DataHeaderFlyweight.ELEMENT_TYPE_OFFSET] = (byte)(stream.job.elementType() == ElementType.INT32 ?
                    ElementType.FLOAT32 : ElementType.INT32);
            case 10 -> // the not-finite look-ahead value as a scale exponent, which it never is
                Frames.putShort(datagram, DataHeaderFlyweight.SCALE_EXPONENT_OFFSET, DataHeaderFlyweight.NON_FINITE_EXPONENT);
            default -> // random header bytes: magic, version, type, flags, rank, element type, count, exponents, slot
                datagram[random.nextInt(DataHeaderFlyweight.HEADER_LENGTH - 8)] ^= (byte)(1 << random.nextInt(8));
        }
        if (kind >= 4 && kind != 7 && stream.job.macEnabled() && random.nextBoolean())
        {
            PacketMac.sign(stream.job.macK0(), stream.job.macK1(), new UnsafeBuffer(datagram), 0, datagram.length);
        }
        return Frames.udp(Frames.srcAddress(update), Frames.srcPort(update), APPLIANCE, Frames.dstPort(update), datagram,
            datagram.length);
    }

    private byte[] notOurs(final Stream stream)
    {
        final byte[] update = stream.update(0, 0, 0);
        final byte[] datagram = Frames.payload(update);
        final byte[] frame = Frames.udp(Frames.srcAddress(update), Frames.srcPort(update), APPLIANCE, 53, datagram, datagram.length);
        if (random.nextBoolean())
        {
            frame[Frames.ETH + 9] = 6; // TCP
        }
        return frame;
    }

    private int indexOf(final int port)
    {
        for (int i = 0; i < dataPorts.length; i++)
        {
            if (dataPorts[i] == port)
            {
                return i;
            }
        }
        return 0;
    }
}
