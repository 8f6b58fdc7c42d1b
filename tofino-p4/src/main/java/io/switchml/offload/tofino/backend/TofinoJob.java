package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobSpec;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;

/**
 * A job's register range and multicast group on the switch, from CREATE to release. Activation writes its entries
 * through P4Runtime ({@link JobInstaller}); release removes them and frees the range.
 * <p>
 * A switch has no timers, so a slot that stays incomplete is not detected here: a rank that dies is detected by its
 * control connection (as on every backend) and the workers' own retransmission limits.
 */
final class TofinoJob implements BackendJob
{
    private final TofinoBackend backend;
    private final int jobId;
    private final JobSpec spec;
    private final int base;
    private final int group;
    private JobInstaller.JobImage installed;
    /** An attach that failed and may have left entries its undo could not remove (the session dropped). */
    private JobInstaller.JobImage attempted;
    private boolean released;
    /** The session generation the job was installed on, or -1 before. */
    private volatile long installedGeneration = -1;

    TofinoJob(final TofinoBackend backend, final int jobId, final JobSpec spec, final int base, final int group)
    {
        this.backend = backend;
        this.jobId = jobId;
        this.spec = spec;
        this.base = base;
        this.group = group;
    }

    public synchronized void activate(final Job job) throws BackendException
    {
        if (released)
        {
            // the registry installs outside its lock, so an abort's release can come first: its range and group may
            // belong to another job by now
            throw new BackendException(backend.name() + ": job " + jobId + " was released before its installation");
        }
        try
        {
            final JobInstaller.JobImage image = backend.image(job, jobId, base, group);
            final long generation = backend.connection().generation();
            attempted = image;
            JobInstaller.attach(backend.connection().control(), image);
            attempted = null;
            installed = image;
            installedGeneration = generation;
            backend.environment().log().accept(backend.name() + ": installed job " + jobId + " on " + backend.connection().describe() +
                ": slots " + base + ".." + (base + spec.slots() - 1) + ", multicast group " + group + ", " + job.worldSize() + " ranks pinned");
        }
        catch (final PipelineException ex)
        {
            throw new BackendException(backend.name() + ": installing job " + jobId + " on the switch failed: " + ex.getMessage(), ex);
        }
    }

    int jobId()
    {
        return jobId;
    }

    int group()
    {
        return group;
    }

    /**
     * What the switch may hold of this job: its installed image once attached, the image of an attach that failed
     * (its undo may not have reached the switch), its admission entry before.
     */
    private JobInstaller.JobImage onSwitch()
    {
        return installed != null ? installed : attempted != null ? attempted : admission();
    }

    /**
     * @return the job as admitted at CREATE: id, geometry, pool base and group (no members yet).
     */
    JobInstaller.JobImage admission()
    {
        return new JobInstaller.JobImage(jobId, spec.worldSize(), spec.elementType(), spec.lanes(), spec.slots(), base, group,
            new int[0], new int[0], new int[0]);
    }

    public String poll(final long nowNs)
    {
        final String health = backend.health();
        if (health != null)
        {
            return backend.name() + ": " + health;
        }
        // a session lost and re-established between two polls: the switch may have restarted without this job
        final long generation = installedGeneration;
        return generation >= 0 && generation != backend.connection().generation() ? backend.name() + ": the session with " +
            backend.connection().describe() + " was re-established since job " + jobId + " was installed; its entries may be gone" : null;
    }

    public ShardDataPath shardDataPath()
    {
        return backend.connection().dataPath();
    }

    public synchronized void release()
    {
        if (released)
        {
            return;
        }
        released = true;
        backend.released(this);
        try
        {
            if (installed == null && attempted != null)
            {
                // a failed attach: whatever of it its undo could not remove goes now (NOT_FOUND: never written or
                // undone), so that the group is not freed while its replica entries remain
                JobInstaller.removeRemains(backend.connection().control(), attempted);
            }
            else
            {
                JobInstaller.release(backend.connection().control(), onSwitch());
            }
            if (installed != null)
            {
                backend.environment().log().accept(backend.name() + ": removed job " + jobId);
            }
        }
        catch (final PipelineException ex)
        {
            backend.environment().log().accept(backend.name() + ": removing job " + jobId + " from the switch failed: " +
                ex.getMessage() + " (its register range stays reserved until a retry removes it)");
            backend.removeLater(this);
            return;
        }
        backend.free(base, spec.slots(), group);
    }

    /**
     * On a new session after a lost one: this job's entry again if it was admitted and is still waiting for its ranks.
     */
    void readmit(final PipelineControl control) throws PipelineException
    {
        synchronized (this)
        {
            if (released || installed != null)
            {
                return;
            }
        }
        // outside this job's lock: the last rank's JOIN must not wait for a switch that answers slowly; an
        // activation in between finds the entry (ALREADY_EXISTS here otherwise)
        try
        {
            JobInstaller.admit(control, admission());
        }
        catch (final PipelineException ex)
        {
            if (!"ALREADY_EXISTS".equals(ex.code()))
            {
                throw ex;
            }
            return;
        }
        synchronized (this)
        {
            if (!released)
            {
                // a release from now on finds the entry and removes it
                backend.environment().log().accept(backend.name() + ": admitted job " + jobId + " again after reconnecting");
                return;
            }
            // released while the entry was being written: its release may have come first and found nothing
            try
            {
                JobInstaller.withdraw(control, admission());
            }
            catch (final PipelineException ex)
            {
                if (!"NOT_FOUND".equals(ex.code()))
                {
                    backend.environment().log().accept(backend.name() + ": withdrawing job " + jobId + ", released while it was " +
                        "admitted again, failed: " + ex.getMessage() + " (removed with what this appliance does not hold on the " +
                        "next session)");
                }
            }
        }
    }

    /**
     * On a new session after a lost one: remove what this released job left on the switch, then free its range.
     */
    synchronized void removeRemains(final PipelineControl control) throws PipelineException
    {
        JobInstaller.removeRemains(control, onSwitch());
        backend.environment().log().accept(backend.name() + ": removed job " + jobId + " after reconnecting");
        backend.free(base, spec.slots(), group);
    }
}
