package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;

/**
 * What a Tofino backend holds of its switch: the P4Runtime session its writes go through, and, for the model, the
 * data path the appliance's shards feed.
 */
interface SwitchConnection extends AutoCloseable
{
    /**
     * @return the pipeline, by P4Info names, through the P4Runtime session.
     */
    PipelineControl control();

    /**
     * @return null while the session is up and this appliance is the primary controller, else why not.
     */
    String health();

    /**
     * @return the data path that shards hand the jobs' datagrams to, or null when the switch is on the wire.
     */
    ShardDataPath dataPath();

    /**
     * @return where the switch is, for logs ("switch 10.0.0.254:9559 device 1").
     */
    String describe();

    void close();

    /**
     * @return how many times the session was re-established: a job installed under an earlier one may be gone from
     * the switch.
     */
    default long generation()
    {
        return 0;
    }

    /**
     * A backend's step on a session: on a new one after a reconnection, before the backend uses it, or as upkeep.
     */
    @FunctionalInterface
    interface Step
    {
        void run(PipelineControl control) throws PipelineException;
    }

    /**
     * Run this step on every new session after the first (a connection that never reconnects ignores it); a step
     * that fails fails the reconnection, which is tried again later.
     */
    default void addReconnectStep(final Step step)
    {
    }

    /**
     * Run this step now and then while the session is healthy (a connection without a timer ignores it).
     */
    default void addUpkeepStep(final Step step)
    {
    }

    /**
     * Start watching the session, once every step is added.
     */
    default void start()
    {
    }
}
