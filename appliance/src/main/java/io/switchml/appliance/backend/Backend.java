package io.switchml.appliance.backend;

import io.switchml.appliance.control.JobSpec;

/**
 * One implementation of Algorithm 3 that jobs can be placed on: the software shards ({@code software}, the
 * reference), an XDP program in the NIC driver's receive path ({@code xdp}), a Tofino switch
 * ({@code tofino}). The appliance holds an ordered preference list of backends; at CREATE a job goes to the first
 * one whose {@link #capabilities()} admit it and whose {@link #refusal} is null, and every backend passed over
 * is recorded with its reason (placement is never silent).
 * <p>
 * Methods are called on control threads, never on a data-plane shard.
 */
public interface Backend extends AutoCloseable
{
    /**
     * @return the name used in configuration, CREATE's {@code backend=} field, replies, metrics and logs.
     */
    String name();

    /**
     * @return what the backend can hold; fixed for its lifetime.
     */
    BackendCapabilities capabilities();

    /**
     * Why the backend cannot take this job now, beyond its declared capabilities: not enough free slot space,
     * unhealthy (program detached, switch unreachable). Reserves nothing.
     *
     * @param spec the job.
     * @return a short reason naming the limit ("only 12 of 1024 slot versions free", "interface eth1 has no
     * native XDP"), or null when it can take the job.
     */
    String refusal(JobSpec spec);

    /**
     * @return true when this backend's jobs keep their slots in the appliance's own shards (the software backend):
     * they count against the aggregator-memory budget and not against a tenant's offload quota, and need no polling.
     * False: the slots live elsewhere and a shard only relays what the backend hands up to it.
     */
    default boolean slotsInShards()
    {
        return false;
    }

    /**
     * Reserve the job's slot space at CREATE. Called only after {@link #refusal} returned null, under the job
     * registry's lock, so no other reservation races it.
     *
     * @param spec  the job.
     * @param jobId the appliance's id for it.
     * @return the job's handle in this backend.
     * @throws BackendException with the reason when the reservation fails after all.
     */
    BackendJob reserve(JobSpec spec, int jobId) throws BackendException;

    /**
     * @return null while the backend is healthy, else why not ("xdp program detached from eth1"); an unhealthy
     * backend refuses new jobs and its running jobs are aborted with this reason. It may be healthy again later (the
     * switch reconnected, the XDP program put back); jobs aborted meanwhile stay aborted.
     */
    String health();

    /**
     * @return one line describing the backend's state for logs and {@code ops status}.
     */
    String describe();

    /**
     * Release everything the backend holds (detach programs, close sessions).
     */
    void close();
}
