package io.switchml.appliance.backend;

import io.switchml.appliance.control.Job;

/**
 * A job's slots in one {@link Backend}, from CREATE (reserved) through activation (every rank joined, the
 * members' addresses known) to release.
 */
public interface BackendJob
{
    /**
     * Every rank has joined: install the job (members, keys, result delivery) so that its packets aggregate.
     * Called outside the job registry's lock (a switch's installation is many RPCs), before the job is published to
     * the data-plane shards. An abort may {@link #release()} the job at any time, also before or while this runs: an
     * implementation serializes the two and refuses to install a released job.
     *
     * @param job the job, with its members.
     * @throws BackendException with the cause when the backend cannot install it; the job is then aborted.
     */
    void activate(Job job) throws BackendException;

    /**
     * Check the job's slots in the backend; called periodically on a control thread while the job runs.
     *
     * @param nowNs {@link System#nanoTime()}.
     * @return null while the job is fine, else why it must be aborted (a slot incomplete past the job's slot
     * timeout naming the missing ranks, an ordering violation naming the rank, or the backend's failure).
     */
    String poll(long nowNs);

    /**
     * @return the data path the shards hand this job's datagrams to, when the backend's data plane runs on the shard
     * threads (a software model of a switch); null when the shards hold the slots themselves or the data plane is
     * elsewhere (an XDP program, a switch).
     */
    default ShardDataPath shardDataPath()
    {
        return null;
    }

    /**
     * Remove the job from the backend and free its slot space. Idempotent. Called outside the registry's lock, on a
     * thread of its own, possibly before {@link #activate} (see there).
     */
    void release();
}
