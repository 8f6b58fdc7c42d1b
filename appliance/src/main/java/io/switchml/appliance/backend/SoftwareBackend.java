package io.switchml.appliance.backend;

import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobSpec;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;

/**
 * The appliance's own data-plane shards running {@code SlotPool}: the reference implementation of Algorithm 3 and
 * the backend of last resort. It takes every job the appliance admits (memory budget and tenant quotas are checked
 * by the job registry); its slots live in the shards, which scan their own deadlines.
 */
public final class SoftwareBackend implements Backend
{
    private static final BackendJob JOB = new BackendJob()
    {
        public void activate(final Job job)
        {
        }

        public String poll(final long nowNs)
        {
            return null;
        }

        public void release()
        {
        }
    };

    private final BackendCapabilities capabilities = new BackendCapabilities(
        BackendCapabilities.typeSet(ElementType.INT32, ElementType.FLOAT32, ElementType.FLOAT16, ElementType.BFLOAT16),
        1, DataHeaderFlyweight.MAX_ELEMENTS, DataHeaderFlyweight.MAX_WORKERS, Long.MAX_VALUE, DataHeaderFlyweight.MAX_ELEMENTS,
        true, true);

    public String name()
    {
        return Backends.SOFTWARE;
    }

    public BackendCapabilities capabilities()
    {
        return capabilities;
    }

    public String refusal(final JobSpec spec)
    {
        return null;
    }

    public boolean slotsInShards()
    {
        return true;
    }

    public BackendJob reserve(final JobSpec spec, final int jobId)
    {
        return JOB;
    }

    public String health()
    {
        return null;
    }

    public String describe()
    {
        return "software: the appliance's data-plane shards (SlotPool)";
    }

    public void close()
    {
    }
}
