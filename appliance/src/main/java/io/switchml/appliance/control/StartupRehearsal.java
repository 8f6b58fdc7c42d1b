package io.switchml.appliance.control;

import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.backend.Backends;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMac;
import org.agrona.CloseHelper;
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
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Before the appliance says it is ready, runs two short jobs of its own through the real data path: created and
 * joined through the {@link JobRegistry} as the control server would (members on UDP sockets of this process on the
 * data address, each with a real control connection over a local TCP pair), then updates sent to every shard's port
 * and aggregated by the shards' threads. One job uses MACs and one does not. Each job's results go to its members;
 * with multicast on, the MAC job's last {@link #GROUP_WINDOWS} windows go to its group instead (a few hundred KiB on
 * the data interface, under the job's own key), so that the group path is compiled too. Every {@link #RARE_EVERY}
 * windows one slot also takes the rarer answers: a probe from the rank that has not sent (NACK), a probe and a
 * duplicate from the one that has (PENDING, DUPLICATE), then a resend and a probe into the completed slot (both
 * answered from its shadow copy). Stale updates are not rehearsed.
 * <p>
 * Why: a fresh appliance compiled its receive, aggregation and send code during the first job's first all-reduce (the
 * shard ran C1 code while C2 compiled beside it); {@link io.switchml.appliance.engine.EngineWarmUp} warms the slot
 * pool alone and left the socket path cold. Measured on loopback: docs/bench/worker-transport-2026-11-25.md,
 * session 32.
 * <p>
 * The jobs are of tenant {@value #TENANT}; the journal records them and the shard counters count their packets like
 * any job's. It paces itself on the job's completed-slot counter (no result needs to reach it), and stops early, says
 * why, and aborts its job with that reason when the shards stop completing slots for {@link #WINDOW_TIMEOUT_NS}, when
 * its budget runs out or when the appliance is stopping; the appliance starts anyway. Skipped when the appliance drops
 * packets on purpose (a loss rate) or has no software backend. Runs once, on the starting thread, before the ready
 * line and systemd's READY=1; {@code --rehearsal off} ({@link ApplianceContext#REHEARSAL_PROP}) turns it off.
 */
public final class StartupRehearsal
{
    /** Tenant of the rehearsal's jobs. */
    public static final String TENANT = "switchml-rehearsal";
    /** Longest the rehearsal runs in all, joins included. */
    public static final long BUDGET_NS = 3_000_000_000L;
    /** Longest a window of slots may take to complete before the rehearsal gives up. */
    static final long WINDOW_TIMEOUT_NS = 500_000_000L;
    static final int WORLD = 2;
    static final int LANES = 1024;
    /** Updates per rank per job, about: the windows are this over the slots. */
    static final int SLOT_ROUNDS = 8_000;
    /** Every this many windows, the rarer answers for slot 0. */
    static final int RARE_EVERY = 8;
    /** Windows at the end of the MAC job whose results go to the job's group when the appliance multicasts. */
    static final int GROUP_WINDOWS = 4;
    /** Longest the members wait for each other at the join, and for the local control connections. */
    private static final long JOIN_TIMEOUT_MS = 5_000;
    private static final int CONNECT_TIMEOUT_MS = 1_000;
    private static final long PACE_NS = 20_000;
    private static final byte UPDATE = DataHeaderFlyweight.TYPE_UPDATE;
    private static final byte PROBE = DataHeaderFlyweight.TYPE_PROBE;

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
        /**
         * @return an outcome of a rehearsal that did not run.
         */
        public static Outcome skipped(final String reason)
        {
            return new Outcome(0, 0, 0, null, reason);
        }

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
    private final int slots;
    private final int windows;
    private final boolean multicast;
    private final long budgetNs;
    private final BooleanSupplier stopping;
    private final SecureRandom random = new SecureRandom();
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();

    /**
     * @param registry   the appliance's registry.
     * @param bind       the appliance's data address; the any-address means loopback.
     * @param shardPorts every shard's data port, by shard.
     * @param multicast  whether the appliance multicasts results.
     * @param budgetNs   longest it runs, {@link #BUDGET_NS} for an appliance.
     * @param stopping   true once the appliance is closing: the rehearsal then stops.
     */
    public StartupRehearsal(
        final JobRegistry registry, final InetAddress bind, final int[] shardPorts, final boolean multicast,
        final long budgetNs, final BooleanSupplier stopping)
    {
        this.registry = registry;
        this.address = bind.isAnyLocalAddress() ? InetAddress.getLoopbackAddress() : bind;
        this.shardPorts = shardPorts.clone();
        this.slots = slotsFor(shardPorts.length);
        this.windows = windowsFor(slots);
        this.multicast = multicast;
        this.budgetNs = budgetNs;
        this.stopping = stopping;
    }

    /**
     * @return slots per job: at least 16, and a whole number in every shard, so that every shard is rehearsed.
     */
    static int slotsFor(final int shards)
    {
        return (Math.max(16, shards) + shards - 1) / shards * shards;
    }

    /**
     * @return windows (every slot once) per job.
     */
    static int windowsFor(final int slots)
    {
        return Math.max(2 * RARE_EVERY, SLOT_ROUNDS / slots);
    }

    /**
     * Run both jobs, MAC on then off, within the budget.
     */
    public Outcome run()
    {
        final long startNs = System.nanoTime();
        if (registry.backends().stream().noneMatch(backend -> Backends.SOFTWARE.equals(backend.name())))
        {
            return Outcome.skipped("no " + Backends.SOFTWARE + " backend in " + ApplianceContext.BACKENDS_PROP +
                ": the shards take no jobs to rehearse");
        }
        final long deadlineNs = startNs + budgetNs;
        int jobs = 0;
        long completed = 0;
        String stopped = null;
        for (final boolean mac : new boolean[] {true, false})
        {
            final Progress progress = new Progress();
            try
            {
                runJob(mac, deadlineNs, progress);
                jobs++;
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                stopped = "interrupted";
            }
            catch (final IOException | JobRegistry.RefusedException | RuntimeException ex)
            {
                stopped = ex.getMessage() != null ? ex.getMessage() : ex.toString();
            }
            completed += progress.completed;
            if (stopped != null)
            {
                break;
            }
        }
        return new Outcome(jobs, completed, (System.nanoTime() - startNs) / 1_000_000, stopped, null);
    }

    /** Slots one job completed, kept when it stops early. */
    private static final class Progress
    {
        long completed;
    }

    private void runJob(final boolean mac, final long deadlineNs, final Progress progress)
        throws IOException, JobRegistry.RefusedException, InterruptedException
    {
        checkGoingOn(deadlineNs);
        final byte[] tokenBytes = new byte[16];
        random.nextBytes(tokenBytes);
        final String token = HexFormat.of().formatHex(tokenBytes);
        final JobSpec spec = new JobSpec(TENANT, mac ? "rehearsal-mac" : "rehearsal-plain", WORLD, ElementType.FLOAT32,
            LANES, slots, mac, WINDOW_TIMEOUT_NS / 1_000_000 * 4, JOIN_TIMEOUT_MS);
        final Job job = registry.create(spec, token, false, Backends.SOFTWARE);
        job.resultsToMembers(true);
        final DatagramChannel[] members = new DatagramChannel[WORLD];
        final Socket[] clients = new Socket[WORLD];
        final Socket[] accepted = new Socket[WORLD];
        final ControlConnection[] connections = new ControlConnection[WORLD];
        String failure = "interrupted";
        try (ServerSocket server = new ServerSocket(0, WORLD, InetAddress.getLoopbackAddress()))
        {
            server.setSoTimeout(CONNECT_TIMEOUT_MS);
            for (int rank = 0; rank < WORLD; rank++)
            {
                members[rank] = DatagramChannel.open();
                members[rank].bind(new InetSocketAddress(address, 0));
                members[rank].setOption(StandardSocketOptions.SO_RCVBUF, 1 << 20);
                members[rank].configureBlocking(false);
                clients[rank] = new Socket();
                clients[rank].connect(server.getLocalSocketAddress(), CONNECT_TIMEOUT_MS);
                accepted[rank] = server.accept();
                connections[rank] = new ControlConnection(accepted[rank]);
            }
            join(job, token, members, connections);
            aggregate(job, members, deadlineNs, progress);
            failure = null;
        }
        catch (final IOException | RuntimeException ex)
        {
            failure = ex.getMessage() != null ? ex.getMessage() : ex.toString();
            throw ex;
        }
        catch (final InterruptedException ex)
        {
            failure = "interrupted";
            throw ex;
        }
        finally
        {
            if (failure != null && !registry.isEnded(job))
            {
                registry.abort(job, "data path rehearsal stopped: " + failure);
            }
            for (int rank = 0; rank < WORLD; rank++)
            {
                if (connections[rank] != null)
                {
                    registry.leave(job, rank);
                }
            }
            for (int rank = 0; rank < WORLD; rank++)
            {
                CloseHelper.quietClose(members[rank]);
                CloseHelper.quietClose(clients[rank]);
                CloseHelper.quietClose(connections[rank]);
                CloseHelper.quietClose(accepted[rank]);
            }
        }
    }

    private void join(
        final Job job, final String token, final DatagramChannel[] members, final ControlConnection[] connections)
        throws IOException, InterruptedException
    {
        final Thread[] joins = new Thread[WORLD];
        final Exception[] failures = new Exception[WORLD];
        for (int rank = 0; rank < WORLD; rank++)
        {
            final InetSocketAddress[] addresses = new InetSocketAddress[shardPorts.length];
            Arrays.fill(addresses, (InetSocketAddress)members[rank].getLocalAddress());
            final int member = rank;
            joins[rank] = Thread.ofPlatform().daemon().name("switchml-rehearsal-join-" + rank).start(() ->
            {
                try
                {
                    registry.join(job.jobId, member, token, addresses, connections[member]);
                }
                catch (final Exception ex)
                {
                    failures[member] = ex;
                }
            });
        }
        for (int rank = 0; rank < WORLD; rank++)
        {
            joins[rank].join(JOIN_TIMEOUT_MS + 1_000);
            if (failures[rank] != null)
            {
                throw new IOException("rank " + rank + " could not join: " + failures[rank].getMessage(),
                    failures[rank]);
            }
            if (joins[rank].isAlive())
            {
                throw new IOException("rank " + rank + " did not join within " + JOIN_TIMEOUT_MS + " ms");
            }
        }
    }

    private void aggregate(
        final Job job, final DatagramChannel[] members, final long deadlineNs, final Progress progress)
        throws IOException
    {
        final ByteBuffer packet = ByteBuffer.allocateDirect(DataHeaderFlyweight.packetLength(LANES));
        final UnsafeBuffer view = new UnsafeBuffer(packet);
        final ByteBuffer drain = ByteBuffer.allocateDirect(DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1);
        final InetSocketAddress[] shards = new InetSocketAddress[shardPorts.length];
        for (int shard = 0; shard < shards.length; shard++)
        {
            shards[shard] = new InetSocketAddress(address, shardPorts[shard]);
        }
        final long completedBefore = job.counters.slotsCompleted().get();
        for (int window = 0; window < windows; window++)
        {
            checkGoingOn(deadlineNs);
            if (multicast && job.macEnabled && window == windows - GROUP_WINDOWS)
            {
                job.resultsToMembers(false);
            }
            final int version = window & 1;
            final boolean rare = window % RARE_EVERY == RARE_EVERY - 1;
            // the same scale exponent from every rank, as workers agree on it; look-ahead exponents differ
            final int exponent = 100 + window % 7;
            for (int slot = 0; slot < slots; slot++)
            {
                final long sequence = (long)window * slots + slot;
                final InetSocketAddress shard = shards[slot % shards.length];
                for (int rank = 0; rank < WORLD; rank++)
                {
                    send(members[rank], view, packet, job, UPDATE, rank, version, slot, sequence, exponent, shard);
                    if (rare && slot == 0 && rank == 0)
                    {
                        // with rank 0's update in: rank 1 asks about the round (NACK), rank 0 asks (PENDING), then
                        // sends its update again (DUPLICATE); the ranks' sockets reach the shard's in this order
                        send(members[1], view, packet, job, PROBE, 1, version, slot, sequence, exponent, shard);
                        send(members[0], view, packet, job, PROBE, 0, version, slot, sequence, exponent, shard);
                        send(members[0], view, packet, job, UPDATE, 0, version, slot, sequence, exponent, shard);
                    }
                }
            }
            final long target = (long)(window + 1) * slots;
            final long windowDeadlineNs = Math.min(deadlineNs, System.nanoTime() + WINDOW_TIMEOUT_NS);
            while ((progress.completed = job.counters.slotsCompleted().get() - completedBefore) < target)
            {
                drain(members, drain);
                if (System.nanoTime() - windowDeadlineNs > 0)
                {
                    checkGoingOn(deadlineNs);
                    throw new IOException("the shards completed " + progress.completed + " of " + target +
                        " slots and then no more for " + WINDOW_TIMEOUT_NS / 1_000_000 + " ms");
                }
                LockSupport.parkNanos(PACE_NS);
            }
            if (rare)
            {
                // rank 0 resends into the completed slot 0 and probes it: both answered from the shadow copy
                final long sequence = (long)window * slots;
                send(members[0], view, packet, job, UPDATE, 0, version, 0, sequence, exponent, shards[0]);
                send(members[0], view, packet, job, PROBE, 0, version, 0, sequence, exponent, shards[0]);
            }
            drain(members, drain);
        }
    }

    private void checkGoingOn(final long deadlineNs) throws IOException
    {
        if (stopping.getAsBoolean())
        {
            throw new IOException("the appliance is stopping");
        }
        if (System.nanoTime() - deadlineNs > 0)
        {
            throw new IOException("its " + budgetNs / 1_000_000 + " ms budget ran out");
        }
    }

    private void send(
        final DatagramChannel channel, final UnsafeBuffer view, final ByteBuffer packet, final Job job, final byte type,
        final int rank, final int version, final int slot, final long sequence, final int exponent,
        final InetSocketAddress to) throws IOException
    {
        // a probe is a header alone
        final int elements = type == DataHeaderFlyweight.TYPE_PROBE ? 0 : LANES;
        header.wrap(view, 0).writeHeader(type, job.jobId, rank, version, ElementType.FLOAT32, slot, sequence, elements,
            exponent, exponent + rank);
        for (int lane = 0; lane < elements; lane += 16)
        {
            header.lane(lane, (int)(sequence * 31 + lane * 7 + rank));
        }
        final int length = DataHeaderFlyweight.HEADER_LENGTH + elements * Integer.BYTES;
        if (job.macEnabled)
        {
            PacketMac.sign(job.macK0, job.macK1, view, 0, length);
        }
        packet.clear().limit(length);
        // a full socket buffer loses the packet; its slot then misses the window and the rehearsal gives up
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
}
