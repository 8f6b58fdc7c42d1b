package io.switchml.appliance.control;

import io.switchml.appliance.control.JobRegistry.RefusedException;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.HashMap;
import java.util.Map;

/**
 * What the jobs hold against the appliance's aggregator-memory budget and each tenant's quotas (memory, number of
 * jobs, offload slot versions), and the admission check of a new job against them. Not thread-safe: the {@link
 * JobRegistry} calls it under its lock.
 */
final class TenantAccounts
{
    /** A tenant's holdings. */
    private static final class Usage
    {
        long memoryBytes;
        int jobs;
        long offloadSlots;
    }

    private final Map<String, Usage> tenants = new HashMap<>();
    private final long memoryBudgetBytes;
    private final long tenantMemoryQuotaBytes;
    private final int tenantMaxJobs;
    private final AtomicCounter admissionRefusals;
    private long memoryUsedBytes;

    TenantAccounts(
        final long memoryBudgetBytes, final long tenantMemoryQuotaBytes, final int tenantMaxJobs,
        final AtomicCounter admissionRefusals)
    {
        this.memoryBudgetBytes = memoryBudgetBytes;
        this.tenantMemoryQuotaBytes = tenantMemoryQuotaBytes;
        this.tenantMaxJobs = tenantMaxJobs;
        this.admissionRefusals = admissionRefusals;
    }

    /**
     * Admit a job that would hold this much aggregator memory, or refuse it naming the budget or quota it exceeds.
     *
     * @param memoryBytes the shards' memory it needs (0 on a backend that keeps its slots elsewhere).
     */
    void check(final JobSpec spec, final long memoryBytes) throws RefusedException
    {
        if (memoryUsedBytes + memoryBytes > memoryBudgetBytes)
        {
            admissionRefusals.increment();
            throw new RefusedException("job '" + spec.name() + "' needs " + memoryBytes + " bytes of aggregator memory but only " +
                (memoryBudgetBytes - memoryUsedBytes) + " of " + memoryBudgetBytes + " are free");
        }
        final Usage usage = tenants.get(spec.tenant());
        final long tenantMemory = usage == null ? 0 : usage.memoryBytes;
        final int tenantJobs = usage == null ? 0 : usage.jobs;
        if (tenantMemory + memoryBytes > tenantMemoryQuotaBytes)
        {
            admissionRefusals.increment();
            throw new RefusedException("tenant '" + spec.tenant() + "' would use " + (tenantMemory + memoryBytes) +
                " bytes of aggregator memory, over its quota of " + tenantMemoryQuotaBytes);
        }
        if (tenantJobs + 1 > tenantMaxJobs)
        {
            admissionRefusals.increment();
            throw new RefusedException("tenant '" + spec.tenant() + "' already runs " + tenantJobs + " jobs, its limit");
        }
    }

    /**
     * @return offload slot versions the tenant's jobs hold.
     */
    long offloadSlots(final String tenant)
    {
        final Usage usage = tenants.get(tenant);
        return usage == null ? 0 : usage.offloadSlots;
    }

    void add(final String tenant, final long memoryBytes, final long offloadSlots)
    {
        final Usage usage = tenants.computeIfAbsent(tenant, t -> new Usage());
        usage.memoryBytes += memoryBytes;
        usage.jobs++;
        usage.offloadSlots += offloadSlots;
        memoryUsedBytes += memoryBytes;
    }

    void remove(final String tenant, final long memoryBytes, final long offloadSlots)
    {
        final Usage usage = tenants.get(tenant);
        usage.memoryBytes -= memoryBytes;
        usage.jobs--;
        usage.offloadSlots -= offloadSlots;
        memoryUsedBytes -= memoryBytes;
        if (usage.jobs == 0)
        {
            tenants.remove(tenant);  // tenant names come from clients where authorization is off: keep no trace
        }
    }

    long memoryUsedBytes()
    {
        return memoryUsedBytes;
    }

    long memoryBudgetBytes()
    {
        return memoryBudgetBytes;
    }

    /**
     * @return tenants holding jobs now.
     */
    int tenantCount()
    {
        return tenants.size();
    }
}
