package io.switchml.appliance;

import io.switchml.appliance.control.ControlServer;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.ApplianceCounters;
import io.switchml.appliance.transport.DataPlane;
import io.switchml.protocol.LossGenerator;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A running appliance: data-plane shards, control endpoint and job registry. Embeddable (tests, the
 * demo) and the body of {@code switchml appliance}.
 */
public final class Appliance implements AutoCloseable
{
    private final ApplianceContext context;
    private final ApplianceCounters controlCounters = new ApplianceCounters();
    private final ApplianceCounters[] shardCounters;
    private final JobRegistry registry;
    private final ExecutorService controlExecutor = Executors.newSingleThreadExecutor(
        runnable -> Thread.ofPlatform().name("switchml-control").daemon().unstarted(runnable));
    private final DataPlane dataPlane;
    private final ControlServer controlServer;
    private final long startMs = System.currentTimeMillis();

    private Appliance(final ApplianceContext context) throws IOException, InterruptedException
    {
        this.context = context;
        final int shards = context.shards();
        this.shardCounters = new ApplianceCounters[shards];
        final LossGenerator[] rxLoss = new LossGenerator[shards];
        final LossGenerator[] txLoss = new LossGenerator[shards];
        for (int shard = 0; shard < shards; shard++)
        {
            shardCounters[shard] = new ApplianceCounters();
            rxLoss[shard] = LossGenerator.of(context.lossRate(), context.lossSeed() * 1_000_003L + shard);
            txLoss[shard] = LossGenerator.of(context.lossRate(), context.lossSeed() * 31 + 7 + shard);
        }
        this.registry = new JobRegistry(context.memoryBudgetBytes(), context.tenantMemoryQuotaBytes(),
            context.tenantMaxJobs(), shards, controlCounters);
        this.dataPlane = new DataPlane(context.resolvedBindAddress(), context.dataPort(), shards,
            context.resolvedShardCpus(), context.transport(), context.socketBufferBytes(), registry, shardCounters, rxLoss,
            txLoss, controlExecutor);
        try
        {
            this.controlServer = new ControlServer(context.resolvedBindAddress(), context.controlPort(), registry,
                new ControlServer.ControlDefaults(context.defaultTenant(), context.slotTimeoutMs(), context.joinTimeoutMs(),
                    context.macEnabled()),
                dataPlane.ports(), this::counterSnapshot, this::healthLine);
        }
        catch (final IOException ex)
        {
            dataPlane.close();
            throw ex;
        }
    }

    /**
     * Validate the context and start an appliance.
     *
     * @param context configuration; {@link ApplianceContext#conclude()} is called here.
     * @return the running appliance.
     */
    public static Appliance launch(final ApplianceContext context) throws IOException, InterruptedException
    {
        return new Appliance(context.conclude());
    }

    private String healthLine()
    {
        return "status=up uptimeMs=" + (System.currentTimeMillis() - startMs) + " jobs=" + registry.jobCount() +
            " memoryUsedBytes=" + registry.memoryUsedBytes() + " memoryBudgetBytes=" + registry.memoryBudgetBytes() +
            " shards=" + context.shards() + " transport=" + dataPlane.transportName();
    }

    /**
     * @return every counter summed over the shards and the control plane.
     */
    public Map<String, Long> counterSnapshot()
    {
        final ApplianceCounters[] all = new ApplianceCounters[shardCounters.length + 1];
        System.arraycopy(shardCounters, 0, all, 0, shardCounters.length);
        all[shardCounters.length] = controlCounters;
        return ApplianceCounters.sum(all);
    }

    /**
     * @param name of a counter as in {@link #counterSnapshot()}.
     * @return its value summed over shards.
     */
    public long counter(final String name)
    {
        return counterSnapshot().getOrDefault(name, 0L);
    }

    public ApplianceContext context()
    {
        return context;
    }

    public JobRegistry registry()
    {
        return registry;
    }

    /**
     * @return the UDP port of the first shard.
     */
    public int dataPort()
    {
        return dataPlane.ports()[0];
    }

    public int[] dataPorts()
    {
        return dataPlane.ports();
    }

    public int controlPort()
    {
        return controlServer.port();
    }

    public String transportName()
    {
        return dataPlane.transportName();
    }

    public List<String> pinning()
    {
        return dataPlane.pinning();
    }

    /**
     * Abort running jobs with the reason, then stop the endpoints.
     */
    public void close(final String reason)
    {
        registry.abortAll(reason);
        controlServer.close();
        dataPlane.close();
        controlExecutor.shutdownNow();
    }

    public void close()
    {
        close("appliance shutting down");
    }
}
