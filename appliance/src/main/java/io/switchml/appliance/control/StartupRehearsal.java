package io.switchml.appliance.control;

import io.switchml.appliance.backend.Backends;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Before the appliance says it is ready, runs two short jobs of its own through the real data path: created and
 * joined through the {@link JobRegistry} as the control server would (members on loopback sockets of this process,
 * each with a real control connection over a local TCP pair), then updates sent over UDP to every shard's port and
 * aggregated by the shards' threads, results sent as the configuration sends them (to the members, or to the job's
 * multicast group). One job uses MACs and one does not; a few updates are sent twice after their slot completed
 * (a retransmission the shard answers from its shadow copy) and a few probes ask about slots, so the rarer branches of
 * the shard's packet handling run too.
 * <p>
 * Why: a fresh appliance compiled its receive, aggregation and send code during the first job's first all-reduce (the
 * shard ran C1 code while C2 compiled beside it); on a loopback bench cell with 4 worker JVMs on 2 cores that first
 * all-reduce took about 20 % longer than against an appliance that had served a job before. {@link
 * io.switchml.appliance.engine.EngineWarmUp} warms the slot pool alone and left the socket path cold.
 * <p>
 * The jobs are of tenant {@value #TENANT} and end when every member leaves; the journal records them and the shard
 * counters count their packets like any job's. Bounded by a fixed amount of work and a wall-time budget; if the shards
 * stop completing slots (a firewall on loopback, say) it gives up, says so, and the appliance starts anyway. Runs once,
 * on the starting thread, before the ready line and systemd's READY=1; {@code --rehearsal off}
 * ({@link io.switchml.appliance.ApplianceContext#REHEARSAL_PROP}) turns it off.
 */
public final class StartupRehearsal
{
    /** Tenant of the rehearsal's jobs. */
    public static final String TENANT = "switchml-rehearsal";
    /** Longest the rehearsal runs in all. */
    static final long BUDGET_NS = 3_000_000_000L;
    /** Longest a window of slots may take to complete before the rehearsal gives up. */
    static final long WINDOW_TIMEOUT_NS = 500_000_000L;
    static final int WORLD = 2;
    static final int LANES = 1024;
    static final int SLOTS = 16;
    /** Windows (every slot once) per job: about 16,000 updates per job at {@link #WORLD} 2 and 16 slots. */
    static final int WINDOWS = 500;
    /** Every this many windows, a retransmission into a completed slot and a probe. */
    static final int RARE_EVERY = 8;
    /** Longest the members wait for each other at the join. */
    private static final long JOIN_TIMEOUT_MS = 5_000;

    /**
     * What one run did.
     *
     * @param jobs      jobs that ran to the end of their work.
     * @param completed slots completed over all jobs.
     * @param elapsedMs wall time.
     * @param stopped   why it stopped early, or null.
     * @param skipped   why it did not run, or null.
     */
    public record Outcome(int jobs, long completed, long elapsedMs, String stopped, String skipped)
    {
        public String describe()
        {
            if (skipped != null)
            {
                return "data path rehearsal skipped: " + skipped;
            }
            return "data path rehearsal: " + jobs + " job(s), " + completed +
                " slot(s) completed through the shards in " + elapsedMs + " ms" +
                (stopped == null ? "" : "; stopped early: " + stopped);
        }
    }

    private final JobRegistry registry;
    private final InetAddress address;
    private final int[] shardPorts;
    private final SecureRandom random = new SecureRandom();
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();

    /**
     * @param registry   the appliance's registry.
     * @param bind       the appliance's data address; the any-address means loopback.
     * @param shardPorts every shard's data port, by shard.
     */
    public StartupRehearsal(final JobRegistry registry, final InetAddress bind, final int[] shardPorts)
    {
        this.registry = registry;
        this.address = bind.isAnyLocalAddress() ? InetAddress.getLoopbackAddress() : bind;
        this.shardPorts = shardPorts.clone();
    }

    /**
     * Run both jobs, MAC on then off, within {@link #BUDGET_NS}.
     */
    public Outcome run()
    {
        final long startNs = System.nanoTime();
        final long deadlineNs = startNs + BUDGET_NS;
        if (registry.backends().stream().noneMatch(backend -> Backends.SOFTWARE.equals(backend.name())))
        {
            return new Outcome(0, 0, 0, null, "no " + Backends.SOFTWARE + " backend in " +
                io.switchml.appliance.ApplianceContext.BACKENDS_PROP + ": the shards take no jobs to rehearse");
        }
        int jobs = 0;
        long completed = 0;
        String stopped = null;
        for (final boolean mac : new boolean[] {true, false})
        {
            try
            {
                final long done = runJob(mac, deadlineNs);
                completed += done;
                if (done < (long)WINDOWS * SLOTS)
                {
                    stopped = "the " + BUDGET_NS / 1_000_000_000L + " s budget ran out";
                    break;
                }
                jobs++;
            }
            catch (final IOException | JobRegistry.RefusedException | RuntimeException ex)
            {
                stopped = ex.getMessage();
                break;
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                stopped = "interrupted";
                break;
            }
        }
        return new Outcome(jobs, completed, (System.nanoTime() - startNs) / 1_000_000, stopped, null);
    }

    /**
     * @return slots completed.
     */
    private long runJob(final boolean mac, final long deadlineNs)
        throws IOException, JobRegistry.RefusedException, InterruptedException
    {
        final byte[] tokenBytes = new byte[16];
        random.nextBytes(tokenBytes);
        final String token = HexFormat.of().formatHex(tokenBytes);
        final JobSpec spec = new JobSpec(TENANT, "rehearsal-" + token.substring(0, 8) + (mac ? "-mac" : ""), WORLD,
            ElementType.FLOAT32, LANES, SLOTS, mac, WINDOW_TIMEOUT_NS / 1_000_000 * 4, JOIN_TIMEOUT_MS);
        final Job job = registry.create(spec, token, false, Backends.SOFTWARE);
        final DatagramChannel[] members = new DatagramChannel[WORLD];
        final Socket[] clients = new Socket[WORLD];
        final ControlConnection[] connections = new ControlConnection[WORLD];
        final Thread[] joins = new Thread[WORLD];
        final Exception[] joinFailures = new Exception[WORLD];
        try (ServerSocket server = new ServerSocket(0, WORLD, InetAddress.getLoopbackAddress()))
        {
            for (int rank = 0; rank < WORLD; rank++)
            {
                members[rank] = DatagramChannel.open().bind(new InetSocketAddress(address, 0));
                members[rank].setOption(StandardSocketOptions.SO_RCVBUF, 1 << 20);
                members[rank].configureBlocking(false);
                clients[rank] = new Socket(server.getInetAddress(), server.getLocalPort());
                connections[rank] = new ControlConnection(server.accept());
            }
            for (int rank = 0; rank < WORLD; rank++)
            {
                final InetSocketAddress[] addresses = new InetSocketAddress[shardPorts.length];
                java.util.Arrays.fill(addresses, (InetSocketAddress)members[rank].getLocalAddress());
                final int member = rank;
                joins[rank] = Thread.ofPlatform().daemon().name("switchml-rehearsal-join-" + rank).start(() ->
                {
                    try
                    {
                        registry.join(job.jobId, member, token, addresses, connections[member]);
                    }
                    catch (final Exception ex)
                    {
                        joinFailures[member] = ex;
                    }
                });
            }
            for (int rank = 0; rank < WORLD; rank++)
            {
                joins[rank].join(JOIN_TIMEOUT_MS + 1_000);
                if (joinFailures[rank] != null)
                {
                    throw new IOException("rank " + rank + " could not join: " + joinFailures[rank].getMessage(),
                        joinFailures[rank]);
                }
            }
            return aggregate(job, members, deadlineNs);
        }
        finally
        {
            for (int rank = 0; rank < WORLD; rank++)
            {
                if (connections[rank] != null)
                {
                    registry.leave(job, rank);
                }
            }
            if (!registry.isEnded(job))
            {
                registry.abort(job, "data path rehearsal did not finish");
            }
            for (int rank = 0; rank < WORLD; rank++)
            {
                closeQuietly(members[rank]);
                closeQuietly(clients[rank]);
                closeQuietly(connections[rank]);
            }
        }
    }

    private long aggregate(final Job job, final DatagramChannel[] members, final long deadlineNs) throws IOException
    {
        final int length = DataHeaderFlyweight.packetLength(LANES);
        final ByteBuffer packet = ByteBuffer.allocateDirect(length);
        final UnsafeBuffer view = new UnsafeBuffer(packet);
        final ByteBuffer drain = ByteBuffer.allocateDirect(DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1);
        final InetSocketAddress[] shards = new InetSocketAddress[shardPorts.length];
        for (int shard = 0; shard < shards.length; shard++)
        {
            shards[shard] = new InetSocketAddress(address, shardPorts[shard]);
        }
        final long completedBefore = job.counters.slotsCompleted().get();
        for (int window = 0; window < WINDOWS; window++)
        {
            final int version = window & 1;
            // the same scale exponent from every rank, as workers agree on it; look-ahead exponents differ
            final int exponent = 100 + window % 7;
            for (int slot = 0; slot < SLOTS; slot++)
            {
                final long sequence = (long)window * SLOTS + slot;
                for (int rank = 0; rank < WORLD; rank++)
                {
                    writeUpdate(
                        view, job, DataHeaderFlyweight.TYPE_UPDATE, rank, version, slot, sequence, exponent, rank);
                    send(members[rank], packet, length, shards[slot % shards.length]);
                }
            }
            final long target = completedBefore + (long)(window + 1) * SLOTS;
            final long windowDeadlineNs = Math.min(deadlineNs, System.nanoTime() + WINDOW_TIMEOUT_NS);
            while (job.counters.slotsCompleted().get() < target)
            {
                drain(members, drain);
                if (System.nanoTime() - windowDeadlineNs > 0)
                {
                    if (System.nanoTime() - deadlineNs > 0)
                    {
                        return job.counters.slotsCompleted().get() - completedBefore;
                    }
                    throw new IOException("the shards completed " +
                        (job.counters.slotsCompleted().get() - completedBefore) + " of " + (target - completedBefore) +
                        " slots and then no more for " + WINDOW_TIMEOUT_NS / 1_000_000 + " ms");
                }
                Thread.onSpinWait();
            }
            if (window % RARE_EVERY == RARE_EVERY - 1)
            {
                // rank 0 resends its update into the completed slot 0 (answered from the shadow copy), then probes it
                final long sequence = (long)window * SLOTS;
                writeUpdate(view, job, DataHeaderFlyweight.TYPE_UPDATE, 0, version, 0, sequence, exponent, 0);
                send(members[0], packet, length, shards[0]);
                writeUpdate(view, job, DataHeaderFlyweight.TYPE_PROBE, 0, version, 0, sequence, exponent, 0);
                send(members[0], packet, DataHeaderFlyweight.HEADER_LENGTH, shards[0]);
            }
            drain(members, drain);
        }
        return job.counters.slotsCompleted().get() - completedBefore;
    }

    private void writeUpdate(
        final UnsafeBuffer view, final Job job, final byte type, final int rank, final int version, final int slot,
        final long sequence, final int exponent, final int lookahead)
    {
        // a probe is a header alone
        final int elements = type == DataHeaderFlyweight.TYPE_PROBE ? 0 : LANES;
        header.wrap(view, 0).writeHeader(type, job.jobId, rank, version, ElementType.FLOAT32, slot, sequence, elements,
            exponent, exponent + lookahead);
        for (int lane = 0; lane < elements; lane += 16)
        {
            header.lane(lane, (int)(sequence * 31 + lane * 7 + rank));
        }
        if (job.macEnabled)
        {
            PacketMac.sign(job.macK0, job.macK1, view, 0,
                DataHeaderFlyweight.HEADER_LENGTH + elements * Integer.BYTES);
        }
    }

    private static void send(
        final DatagramChannel channel, final ByteBuffer packet, final int length, final InetSocketAddress to)
        throws IOException
    {
        packet.clear().limit(length);
        // a full socket buffer (EAGAIN) loses the update; its slot then misses the window and the rehearsal gives up
        channel.send(packet, to);
    }

    private static void drain(final DatagramChannel[] members, final ByteBuffer buffer) throws IOException
    {
        for (final DatagramChannel member : members)
        {
            do
            {
                buffer.clear();
            }
            while (member.receive(buffer) != null);
        }
    }

    private static void closeQuietly(final AutoCloseable closeable)
    {
        if (closeable != null)
        {
            try
            {
                closeable.close();
            }
            catch (final Exception ignored)
            {
                // closing after the rehearsal: nothing to recover
            }
        }
    }
}
