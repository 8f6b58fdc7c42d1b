package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.offload.tofino.PipelineControl;

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
     * A step run on a new session after a reconnection, before the backend uses it.
     */
    @FunctionalInterface
    interface ReconnectStep
    {
        void run(PipelineControl control) throws io.switchml.offload.tofino.PipelineException;
    }

    /**
     * Run this step on every new session after the first (a connection that never reconnects ignores it).
     */
    default void onReconnected(final ReconnectStep step)
    {
    }
}
