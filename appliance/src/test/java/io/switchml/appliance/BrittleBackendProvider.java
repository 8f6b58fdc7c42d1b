package io.switchml.appliance;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendCapabilities;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.BackendProvider;
import io.switchml.appliance.control.JobSpec;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * A test backend, {@code brittle}, that takes no job and whose {@link Backend#close} throws, as a real one can when
 * the kernel refuses to detach a program: {@link ApplianceCloseTest} checks the appliance still closes the rest.
 */
public final class BrittleBackendProvider implements BackendProvider
{
    static final String NAME = "brittle";
    static final String FAILURE = "brittle backend: detach failed";
    static final AtomicInteger CLOSES = new AtomicInteger();

    public String name()
    {
        return NAME;
    }

    public Backend create(final BackendEnvironment environment)
    {
        return new Backend()
        {
            public String name()
            {
                return NAME;
            }

            public BackendCapabilities capabilities()
            {
                return new BackendCapabilities(-1, 1, Integer.MAX_VALUE, Integer.MAX_VALUE, Long.MAX_VALUE,
                    Integer.MAX_VALUE, true, true);
            }

            public String refusal(final JobSpec spec)
            {
                return "takes no job";
            }

            public BackendJob reserve(final JobSpec spec, final int jobId) throws BackendException
            {
                throw new BackendException("takes no job");
            }

            public String health()
            {
                return null;
            }

            public String describe()
            {
                return NAME + ": takes no job";
            }

            public void close()
            {
                CLOSES.incrementAndGet();
                throw new IllegalStateException(FAILURE);
            }
        };
    }
}
