package io.switchml.appliance.backend;

import io.switchml.appliance.control.JobSpec;

/**
 * Stands in for a configured backend that could not start (no XDP support, switch unreachable): it refuses every
 * job with the cause, so that placement records why jobs went elsewhere.
 */
public final class UnavailableBackend implements Backend
{
    private final String name;
    private final String cause;

    public UnavailableBackend(final String name, final String cause)
    {
        this.name = name;
        this.cause = cause;
    }

    public String name()
    {
        return name;
    }

    public BackendCapabilities capabilities()
    {
        return new BackendCapabilities(-1, 1, Integer.MAX_VALUE, Integer.MAX_VALUE, Long.MAX_VALUE, Integer.MAX_VALUE, true, true);
    }

    public String refusal(final JobSpec spec)
    {
        return cause;
    }

    public BackendJob reserve(final JobSpec spec, final int jobId) throws BackendException
    {
        throw new BackendException(cause);
    }

    public String health()
    {
        return cause; // never started: not healthy (switchml_backend_up 0); it has no jobs to abort
    }

    public String describe()
    {
        return name + ": " + cause;
    }

    public void close()
    {
    }
}
