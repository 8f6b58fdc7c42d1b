package io.switchml.offload.tofino.model;

import io.switchml.offload.tofino.JobInstaller.JobImage;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.LinkedList;
import java.util.List;
import java.util.Random;
import java.util.function.Function;

/**
 * Packet traces as the worker protocol (Algorithm 4) produces them on a faulty network, generated online: ranks
 * stream chunks through their job's slots (chunk c in slot c mod s, pool version (c / s) mod 2, sent only when the
 * result of chunk c - s came back), the network loses, duplicates and reorders packets within a small window, ranks
 * retransmit on timeout (the update again, or a probe), sometimes too early, and NACKs make them resend. The
 * network reorders packets of different ranks, never one rank's own (its link is FIFO). Results go
 * back through the engine under test and drive the ranks. Mixed in: forged sources, unknown jobs, malformed and
 * wrong-type packets, slots out of range, unsupported element types.
 * <p>
 * Not produced (the switch cannot tell them apart, see TofinoModel): contributions whose chunk or geometry disagree
 * with their slot's, and a late copy of an update arriving after its slot version has moved two rounds on (the
 * reorder window is a few packets, far shorter than two rounds).
 */
final class WorkerTraces
{
    static final int DATA_PORT = 7471;
    static final int APPLIANCE_ADDR = 0x0A00_00FE;

    private final Random random;
    private final List<JobImage> jobs;
    private final int chunksPerRank;
    private final double loss;
    private final LinkedList<TofinoModel.PacketIn> network = new LinkedList<>();
    private final List<Rank> ranks = new ArrayList<>();
    private int emitted;
    private int pendings;

    /** One rank's stream. */
    private final class Rank
    {
        final JobImage job;
        final int rank;
        final long[] outstanding;
        final boolean[] done;
        int next;
        int completed;

        Rank(final JobImage job, final int rank)
        {
            this.job = job;
            this.rank = rank;
            this.outstanding = new long[job.slots()];
            java.util.Arrays.fill(outstanding, -1);
            this.done = new boolean[chunksPerRank];
        }

        boolean canSend()
        {
            return next < chunksPerRank && outstanding[next % job.slots()] < 0;
        }

        boolean finished()
        {
            return completed == chunksPerRank;
        }

        byte[] update(final long chunk, final boolean retransmit)
        {
            final int count = count(job, chunk);
            final boolean exponentOnly = exponentOnly(job, chunk);
            final int flags = version(chunk) | (exponentOnly ? DataHeaderFlyweight.FLAG_EXPONENT_ONLY : 0) |
                (retransmit ? DataHeaderFlyweight.FLAG_RETRANSMIT : 0);
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(count)]);
            final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
            final Random lanes = new Random(job.jobId() * 1_000_003L + rank * 7919L + chunk);
            header.writeHeader(DataHeaderFlyweight.TYPE_UPDATE, job.jobId(), rank, flags, job.elementType(), slot(chunk), chunk, count,
                scale(job, chunk), lookahead(lanes), DataHeaderFlyweight.tensorCheckOf(lanes.nextInt(40) == 0 ? lanes.nextInt(256) : (int)chunk * 7));
            for (int i = 0; i < count; i++)
            {
                header.lane(i, lanes.nextInt());
            }
            return buffer.byteArray();
        }

        byte[] probe(final long chunk)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.HEADER_LENGTH]);
            new DataHeaderFlyweight().wrap(buffer, 0).writeHeader(DataHeaderFlyweight.TYPE_PROBE, job.jobId(), rank,
                version(chunk) | (exponentOnly(job, chunk) ? DataHeaderFlyweight.FLAG_EXPONENT_ONLY : 0), job.elementType(), slot(chunk),
                chunk, 0, scale(job, chunk), job.elementType() == ElementType.INT32 ? DataHeaderFlyweight.NO_EXPONENT : 0, 0);
            return buffer.byteArray();
        }

        int slot(final long chunk)
        {
            return (int)(chunk % job.slots());
        }

        int version(final long chunk)
        {
            return (int)((chunk / job.slots()) & 1);
        }

        int lookahead(final Random lanes)
        {
            return job.elementType() == ElementType.INT32 ? DataHeaderFlyweight.NO_EXPONENT :
                lanes.nextInt(50) == 0 ? DataHeaderFlyweight.UNKNOWN_EXPONENT :
                lanes.nextInt(50) == 0 ? DataHeaderFlyweight.NON_FINITE_EXPONENT : lanes.nextInt(-126, 129);
        }

        void send(final byte[] datagram)
        {
            network.add(new TofinoModel.PacketIn(rank + 1, job.addrs()[rank], job.ports()[rank], APPLIANCE_ADDR, DATA_PORT,
                datagram, 0, datagram.length));
        }

        /** A packet for this rank came back. */
        void receive(final byte[] packet)
        {
            final DataHeaderFlyweight h = new DataHeaderFlyweight().wrap(new UnsafeBuffer(packet), 0);
            final long chunk = h.chunkSequence();
            final int slot = slot(chunk);
            if (outstanding[slot] != chunk)
            {
                return;
            }
            if (h.type() == DataHeaderFlyweight.TYPE_NACK)
            {
                send(update(chunk, true));
                return;
            }
            if (h.type() == DataHeaderFlyweight.TYPE_PENDING)
            {
                pendings++;
                return; // the aggregator holds the update: wait for the result (the timer still probes again)
            }
            outstanding[slot] = -1;
            done[(int)chunk] = true;
            completed++;
        }

        /** The retransmission timer of the oldest outstanding chunk fired. */
        void timeout()
        {
            long oldest = Long.MAX_VALUE;
            for (final long chunk : outstanding)
            {
                if (chunk >= 0)
                {
                    oldest = Math.min(oldest, chunk);
                }
            }
            if (oldest != Long.MAX_VALUE)
            {
                send(random.nextBoolean() ? probe(oldest) : update(oldest, true));
            }
        }
    }

    WorkerTraces(final long seed, final List<JobImage> jobs, final int chunksPerRank, final double loss)
    {
        this.random = new Random(seed);
        this.jobs = jobs;
        this.chunksPerRank = chunksPerRank;
        this.loss = loss;
        for (final JobImage job : jobs)
        {
            for (int rank = 0; rank < job.world(); rank++)
            {
                ranks.add(new Rank(job, rank));
            }
        }
    }

    static boolean exponentOnly(final JobImage job, final long chunk)
    {
        return job.elementType() == ElementType.FLOAT32 && (chunk * 0x9E3779B97F4A7C15L >>> 60) == 0;
    }

    static int count(final JobImage job, final long chunk)
    {
        return exponentOnly(job, chunk) ? 0 : (chunk % 7 == 6 ? 1 + (int)((chunk * 31) % job.lanes()) : job.lanes());
    }

    static int scale(final JobImage job, final long chunk)
    {
        return job.elementType() == ElementType.INT32 ? DataHeaderFlyweight.NO_EXPONENT : (int)(chunk % 21) - 10;
    }

    /**
     * Run the trace to the end through an engine.
     *
     * @param engine one packet in, the packets it sends out (compared by the caller).
     * @return packets fed to the engine.
     */
    int run(final Function<TofinoModel.PacketIn, List<TofinoModel.PacketOut>> engine, final int maxSteps)
    {
        int fed = 0;
        for (int step = 0; step < maxSteps && !ranks.stream().allMatch(Rank::finished); step++)
        {
            final Rank sender = ranks.get(random.nextInt(ranks.size()));
            if (sender.canSend() && random.nextInt(3) > 0)
            {
                final long chunk = sender.next++;
                sender.outstanding[sender.slot(chunk)] = chunk;
                sender.send(sender.update(chunk, false));
                continue;
            }
            if (network.isEmpty() || random.nextInt(100) < 2)
            {
                // a timer fires: the network went quiet (a loss), or a rank on a busy host retransmits too early
                ranks.get(random.nextInt(ranks.size())).timeout();
                if (network.isEmpty())
                {
                    for (final Rank rank : ranks)
                    {
                        rank.timeout();
                    }
                }
                continue;
            }
            final TofinoModel.PacketIn packet = network.remove(pickDeliverable());
            if (random.nextDouble() < loss)
            {
                continue;
            }
            if (random.nextDouble() < 0.03)
            {
                network.addFirst(packet);
            }
            final TofinoModel.PacketIn faulty = noise(packet);
            fed++;
            for (final TofinoModel.PacketOut out : engine.apply(faulty))
            {
                if (random.nextDouble() < loss)
                {
                    continue;
                }
                for (final Rank rank : ranks)
                {
                    if (rank.job.addrs()[rank.rank] == out.dstAddr() && rank.job.ports()[rank.rank] == out.dstPort())
                    {
                        rank.receive(out.payload());
                    }
                }
            }
            emitted++;
        }
        return fed;
    }

    /**
     * Reorder across ranks, never within one rank's packets: a rank's link to the switch is FIFO, as Algorithm 3
     * assumes (a retransmission overtaken by the same rank's next update would look like a new round to it).
     *
     * @return the index of a packet among the first four that is the oldest of its sender's.
     */
    private int pickDeliverable()
    {
        final int window = Math.min(4, network.size());
        final int choice = random.nextInt(window);
        for (int i = choice; i >= 0; i--)
        {
            final TofinoModel.PacketIn candidate = network.get(i);
            boolean oldest = true;
            for (int j = 0; j < i; j++)
            {
                final TofinoModel.PacketIn earlier = network.get(j);
                if (earlier.srcAddr() == candidate.srcAddr() && earlier.srcPort() == candidate.srcPort())
                {
                    oldest = false;
                    break;
                }
            }
            if (oldest)
            {
                return i;
            }
        }
        return 0;
    }

    /** @return PENDING answers the ranks received. */
    int pendings()
    {
        return pendings;
    }

    boolean allFinished()
    {
        return ranks.stream().allMatch(Rank::finished);
    }

    /**
     * Sometimes replace a packet by a faulty variant (the original is then lost to the ranks, like a loss).
     */
    private TofinoModel.PacketIn noise(final TofinoModel.PacketIn packet)
    {
        final int dice = random.nextInt(200);
        final byte[] bytes = packet.payload().clone();
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        return switch (dice)
        {
            case 0 -> new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort() + 1, packet.dstAddr(),
                packet.dstPort(), bytes, 0, bytes.length); // forged: another source port
            case 1 -> new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr() ^ 0x100, packet.srcPort(), packet.dstAddr(),
                packet.dstPort(), bytes, 0, bytes.length); // forged: another host
            case 2 ->
            {
                buffer.putInt(DataHeaderFlyweight.JOB_ID_OFFSET, 999, java.nio.ByteOrder.BIG_ENDIAN);
                yield new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                    packet.dstPort(), bytes, 0, bytes.length);
            }
            case 3 -> new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                packet.dstPort(), bytes, 0, Math.max(1, bytes.length - 3)); // truncated
            case 4 ->
            {
                buffer.putByte(DataHeaderFlyweight.TYPE_OFFSET, DataHeaderFlyweight.TYPE_RESULT);
                yield new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                    packet.dstPort(), bytes, 0, bytes.length);
            }
            case 5 ->
            {
                buffer.putInt(DataHeaderFlyweight.SLOT_INDEX_OFFSET, 5000, java.nio.ByteOrder.BIG_ENDIAN);
                yield new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                    packet.dstPort(), bytes, 0, bytes.length);
            }
            case 6 ->
            {
                buffer.putByte(DataHeaderFlyweight.ELEMENT_TYPE_OFFSET, ElementType.FLOAT16);
                yield new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                    packet.dstPort(), bytes, 0, bytes.length);
            }
            case 7 ->
            {
                buffer.putShort(DataHeaderFlyweight.MAGIC_OFFSET, (short)0x1234, java.nio.ByteOrder.BIG_ENDIAN);
                yield new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                    packet.dstPort(), bytes, 0, bytes.length);
            }
            case 8 ->
            {
                // the not-finite look-ahead value as a scale exponent, which it never is
                buffer.putShort(DataHeaderFlyweight.SCALE_EXPONENT_OFFSET, DataHeaderFlyweight.NON_FINITE_EXPONENT,
                    java.nio.ByteOrder.BIG_ENDIAN);
                yield new TofinoModel.PacketIn(packet.ingressPort(), packet.srcAddr(), packet.srcPort(), packet.dstAddr(),
                    packet.dstPort(), bytes, 0, bytes.length);
            }
            default -> packet;
        };
    }
}
