package io.switchml.offload.tofino;

import io.switchml.offload.tofino.PipelineControl.ActionParam;
import io.switchml.offload.tofino.PipelineControl.ExactMatch;
import io.switchml.offload.tofino.PipelineControl.Replica;
import io.switchml.offload.tofino.PipelineControl.TableEntry;
import io.switchml.offload.tofino.PipelineControl.UpdateType;
import io.switchml.offload.tofino.model.P4Names;

import java.util.ArrayList;
import java.util.List;

/**
 * The control plane's writes for one job on a switch running switchml.p4, through {@link PipelineControl} (so
 * through P4Runtime to a real switch, or straight into the model): at CREATE the job-table entry ({@link #admit});
 * when every rank has joined, the reset of the job's register cells, the source pinning entry of every rank, the
 * egress destination of every rank's replica and the multicast group ({@link #attach}); removal starts with the
 * job-table entry, so the job's packets stop touching its registers before anything else goes (the switch forwards
 * them on unchanged from then on, as any job it does not hold). A failed write removes what its call wrote, as far
 * as the session lets it (what it cannot is removed when the job is released, or by the backend's sweep of entries
 * it does not hold on the next session).
 */
public final class JobInstaller
{
    /**
     * A job as the switch holds it.
     *
     * @param poolBase    first slot of its range of the register arrays.
     * @param group       its multicast group of the replication engine.
     * @param addrs       each rank's IPv4 source address.
     * @param ports       each rank's UDP source port (the port results go back to).
     * @param switchPorts each rank's switch port (egress port of its replica).
     */
    public record JobImage(int jobId, int world, byte elementType, int lanes, int slots, int poolBase, int group, int[] addrs,
        int[] ports, int[] switchPorts)
    {
        /**
         * @return the replication id of a rank's copy of the job's results: unique per (group, rank).
         */
        public int rid(final int rank)
        {
            return group * P4Names.MAX_WORLD + rank;
        }
    }

    /**
     * The highest multicast group a job may use: a replica's replication id (16 bits on the switch) is
     * group * {@link P4Names#MAX_WORLD} + rank, so a higher group's ids would wrap onto a lower group's.
     */
    public static final int MAX_GROUP = 0xFFFF / P4Names.MAX_WORLD;

    private JobInstaller()
    {
    }

    /**
     * Install a job in one go: {@link #admit} then {@link #attach}.
     *
     * @throws PipelineException as the switch refused a write, after removing what was written.
     */
    public static void install(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        admit(pipeline, job);
        try
        {
            attach(pipeline, job);
        }
        catch (final PipelineException ex)
        {
            quietly(() -> pipeline.writeTableEntry(UpdateType.DELETE, jobEntry(job)));
            throw ex;
        }
    }

    /**
     * At CREATE: the job-table entry, which claims the job id on the switch and lets the switch refuse the job (a
     * full table, an id another controller installed) while the job can still go to another backend. Until
     * {@link #attach} pins its ranks, every packet of the job is dropped as from a stranger.
     * Only the job id, geometry, pool base and group of the image are used.
     */
    public static void admit(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        pipeline.writeTableEntry(UpdateType.INSERT, jobEntry(job));
    }

    /**
     * Withdraw an admitted job that was never attached.
     */
    public static void withdraw(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        pipeline.writeTableEntry(UpdateType.DELETE, jobEntry(job));
    }

    /**
     * After a lost session: remove what a released job may have left on the switch, as {@link #remove} (a job with
     * members) or {@link #withdraw} does, taking an entry the switch no longer has (NOT_FOUND: its agent restarted
     * empty) as removed.
     *
     * @throws PipelineException the first refusal other than NOT_FOUND.
     */
    public static void removeRemains(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        try
        {
            release(pipeline, job, true);
        }
        catch (final PipelineException ex)
        {
            if (!"NOT_FOUND".equals(ex.code()))
            {
                throw ex;
            }
        }
    }

    /**
     * Take a released job off the switch: one attached (its image has members) as {@link #remove} does, one only
     * admitted as {@link #withdraw} does. The one place that tells the two apart.
     *
     * @throws PipelineException for the first write the switch refused.
     */
    public static void release(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        release(pipeline, job, false);
    }

    private static void release(final PipelineControl pipeline, final JobImage job, final boolean missingIsGone)
        throws PipelineException
    {
        if (job.addrs().length > 0)
        {
            remove(pipeline, job, missingIsGone);
        }
        else
        {
            withdraw(pipeline, job);
        }
    }

    /**
     * When every rank has joined: zero the job's counts and seen bitmaps, pin each rank's source, give each rank's
     * replica its destination, and create the multicast group.
     *
     * @throws PipelineException as the switch refused a write, after removing what this call wrote.
     */
    public static void attach(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        final List<Runnable> undo = new ArrayList<>();
        try
        {
            resetRegisters(pipeline, job);
            final List<Replica> replicas = new ArrayList<>();
            for (int rank = 0; rank < job.world(); rank++)
            {
                final TableEntry source = rankSource(job, rank);
                pipeline.writeTableEntry(UpdateType.INSERT, source);
                undo.add(() -> quietly(() -> pipeline.writeTableEntry(UpdateType.DELETE, source)));
                final TableEntry dest = replicaDest(job, rank);
                pipeline.writeTableEntry(UpdateType.INSERT, dest);
                undo.add(() -> quietly(() -> pipeline.writeTableEntry(UpdateType.DELETE, dest)));
                replicas.add(new Replica(job.switchPorts()[rank], job.rid(rank)));
            }
            pipeline.writeMulticastGroup(UpdateType.INSERT, job.group(), replicas);
        }
        catch (final PipelineException ex)
        {
            for (int i = undo.size() - 1; i >= 0; i--)
            {
                undo.get(i).run();
            }
            throw ex;
        }
    }

    /**
     * Remove a job: first its job-table entry (its packets no longer reach its registers from then on), then the rest.
     *
     * @throws PipelineException for the first write the switch refused; the others are still tried.
     */
    public static void remove(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        remove(pipeline, job, false);
    }

    private static void remove(final PipelineControl pipeline, final JobImage job, final boolean missingIsGone) throws PipelineException
    {
        PipelineException first = null;
        final List<Write> writes = new ArrayList<>();
        writes.add(() -> pipeline.writeTableEntry(UpdateType.DELETE, jobEntry(job)));
        writes.add(() -> pipeline.writeMulticastGroup(UpdateType.DELETE, job.group(), List.of()));
        for (int rank = 0; rank < job.world(); rank++)
        {
            final int r = rank;
            writes.add(() -> pipeline.writeTableEntry(UpdateType.DELETE, rankSource(job, r)));
            writes.add(() -> pipeline.writeTableEntry(UpdateType.DELETE, replicaDest(job, r)));
        }
        for (final Write write : writes)
        {
            try
            {
                write.run();
            }
            catch (final PipelineException ex)
            {
                if (!(missingIsGone && "NOT_FOUND".equals(ex.code())))
                {
                    first = first == null ? ex : first;
                }
            }
        }
        if (first != null)
        {
            throw first;
        }
    }

    /**
     * Zero the job's cells of every register: counts and seen bitmaps must start empty, whatever an earlier job in
     * the same range left.
     */
    static void resetRegisters(final PipelineControl pipeline, final JobImage job) throws PipelineException
    {
        final byte[] zero32 = new byte[4];
        final byte[] zero64 = new byte[8];
        for (final P4Names.Register register : P4Names.REGISTERS)
        {
            final byte[] zero = register.pair() ? zero64 : zero32;
            final int perSlot = register.size() / P4Names.SLOTS;
            if (!register.name().equals(P4Names.SEEN) && !register.name().equals(P4Names.COUNT))
            {
                continue;
            }
            for (int index = job.poolBase() * perSlot, end = (job.poolBase() + job.slots()) * perSlot; index < end; index++)
            {
                pipeline.writeRegister(register.name(), index, zero);
            }
        }
    }

    private static TableEntry jobEntry(final JobImage job)
    {
        return new TableEntry(P4Names.JOB_TABLE, List.of(new ExactMatch(P4Names.JOB_ID, bytes(job.jobId() & 0xFFFF_FFFFL, 32))),
            P4Names.SET_JOB, List.of(
            new ActionParam("pool_base", bytes(job.poolBase(), 16)), new ActionParam("pool_size", bytes(job.slots(), 16)),
            new ActionParam("world_size", bytes(job.world(), 8)), new ActionParam("elem_type", bytes(job.elementType(), 8)),
            new ActionParam("lanes", bytes(job.lanes(), 16)), new ActionParam("mcast_grp", bytes(job.group(), 16))));
    }

    private static TableEntry rankSource(final JobImage job, final int rank)
    {
        return new TableEntry(P4Names.RANK_SOURCE, List.of(
            new ExactMatch(P4Names.JOB_ID, bytes(job.jobId() & 0xFFFF_FFFFL, 32)), new ExactMatch(P4Names.WORKER_RANK, bytes(rank, 16)),
            new ExactMatch(P4Names.IPV4_SRC, bytes(job.addrs()[rank] & 0xFFFF_FFFFL, 32)),
            new ExactMatch(P4Names.UDP_SRC, bytes(job.ports()[rank], 16))), P4Names.ALLOW_RANK, List.of());
    }

    private static TableEntry replicaDest(final JobImage job, final int rank)
    {
        return new TableEntry(P4Names.REPLICA_DEST, List.of(new ExactMatch(P4Names.EGRESS_RID, bytes(job.rid(rank), 16))),
            P4Names.SET_DEST, List.of(
            new ActionParam("dst_addr", bytes(job.addrs()[rank] & 0xFFFF_FFFFL, 32)),
            new ActionParam("dst_port", bytes(job.ports()[rank], 16))));
    }

    /**
     * @return value as a big-endian byte string of the field's width.
     */
    public static byte[] bytes(final long value, final int bits)
    {
        final int length = (bits + 7) / 8;
        final byte[] out = new byte[length];
        for (int i = 0; i < length; i++)
        {
            out[length - 1 - i] = (byte)(value >>> (8 * i));
        }
        return out;
    }

    private interface Write
    {
        void run() throws PipelineException;
    }

    private static void quietly(final Write write)
    {
        try
        {
            write.run();
        }
        catch (final PipelineException ignored)
        {
            // undoing a failed install: the first error is the one reported
        }
    }
}
