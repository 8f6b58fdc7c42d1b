package io.switchml.appliance.control;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.SoftwareBackend;
import io.switchml.appliance.control.JobRegistry.RefusedException;
import io.switchml.protocol.ControlProtocol;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.ArrayList;
import java.util.List;
import java.util.function.BiConsumer;

/**
 * Where a new job runs: the backend it asked for, or the first of the preference list whose capabilities, own state
 * and the tenant's offload quota admit it, with every backend passed over recorded and reported with its reason.
 * Not thread-safe: the {@link JobRegistry} calls it under its lock.
 */
final class JobPlacement
{
    /**
     * A placed job: its backend, the backends passed over ("name: reason; ..."), and the reservation there.
     */
    record Placement(Backend backend, String fallback, BackendJob backendJob)
    {
    }

    private final AtomicCounter admissionRefusals;
    private List<Backend> backends = List.of(new SoftwareBackend());
    private boolean multicast;
    private BiConsumer<String, String> onFallback = (backend, reason) -> { };
    /** Offload slot versions one tenant may hold; 0: no limit. */
    private long tenantOffloadSlots;

    JobPlacement(final AtomicCounter admissionRefusals)
    {
        this.admissionRefusals = admissionRefusals;
    }

    void configure(final List<Backend> backends, final boolean multicast, final BiConsumer<String, String> onFallback)
    {
        this.backends = List.copyOf(backends);
        this.multicast = multicast;
        this.onFallback = onFallback;
    }

    void tenantOffloadSlots(final long slots)
    {
        this.tenantOffloadSlots = slots;
    }

    List<Backend> backends()
    {
        return backends;
    }

    /**
     * @return the slot versions a job holds on a backend that keeps its slots outside the shards.
     */
    static long offloadSlots(final JobSpec spec)
    {
        return 2L * spec.slots();
    }

    /**
     * Choose the backend of a new job and reserve its slots there: the one it asked for (refused, not moved, when
     * that one cannot take it), or the first in the preference list that can, recording every one passed over with
     * its reason. A backend whose reservation fails (a switch that refuses the write) is passed over like one whose
     * limits do not admit the job, with the backend's message as the reason.
     *
     * @param requested         {@link ControlProtocol#BACKEND_AUTO}, null, or a backend's name.
     * @param heldOffloadSlots  slot versions the job's tenant already holds on offload backends.
     */
    Placement place(final JobSpec spec, final String requested, final int jobId, final long heldOffloadSlots)
        throws RefusedException
    {
        if (requested != null && !ControlProtocol.BACKEND_AUTO.equals(requested))
        {
            for (final Backend backend : backends)
            {
                if (backend.name().equals(requested))
                {
                    final String reason = refusalOf(backend, spec, heldOffloadSlots);
                    if (reason != null)
                    {
                        admissionRefusals.increment();
                        throw new RefusedException("backend " + requested + " cannot take job '" + spec.name() + "': " + reason);
                    }
                    try
                    {
                        return new Placement(backend, "", backend.reserve(spec, jobId));
                    }
                    catch (final BackendException ex)
                    {
                        admissionRefusals.increment();
                        throw new RefusedException("backend " + requested + " cannot take job '" + spec.name() + "': " + ex.getMessage());
                    }
                }
            }
            throw new RefusedException("unknown backend '" + requested + "' (this appliance has: " + ControlProtocol.BACKEND_AUTO + ", " +
                String.join(", ", backends.stream().map(Backend::name).toList()) + ")");
        }
        final List<String> passed = new ArrayList<>();
        for (final Backend backend : backends)
        {
            String reason = refusalOf(backend, spec, heldOffloadSlots);
            if (reason == null)
            {
                try
                {
                    return new Placement(backend, String.join("; ", passed), backend.reserve(spec, jobId));
                }
                catch (final BackendException ex)
                {
                    reason = ex.getMessage();
                }
            }
            passed.add(backend.name() + ": " + reason);
            onFallback.accept(backend.name(), reason);
        }
        admissionRefusals.increment();
        throw new RefusedException("no backend can take job '" + spec.name() + "': " + String.join("; ", passed));
    }

    private String refusalOf(final Backend backend, final JobSpec spec, final long heldOffloadSlots)
    {
        final String limit = backend.capabilities().check(spec, multicast);
        if (limit != null)
        {
            return limit;
        }
        // the backend's own state first: one that is down or reconnecting says so, not that a quota was reached
        final String refusal = backend.refusal(spec);
        if (refusal != null)
        {
            return refusal;
        }
        if (tenantOffloadSlots > 0 && !backend.slotsInShards() && heldOffloadSlots + offloadSlots(spec) > tenantOffloadSlots)
        {
            return "tenant '" + spec.tenant() + "' would hold " + (heldOffloadSlots + offloadSlots(spec)) + " offload slot versions, " +
                "over its quota of " + tenantOffloadSlots + " (switchml.appliance.tenant.offload.slots)";
        }
        return null;
    }
}
