package io.switchml.appliance;

import io.switchml.appliance.control.ControlServer;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.telemetry.ApplianceCounters;
import io.switchml.appliance.transport.DataPlane;
import io.switchml.protocol.LossGenerator;

import java.io.IOException;

/**
 * A running appliance: data plane, control endpoint and job registry. Embeddable (tests, the demo)
 * and the body of {@code switchml appliance}.
 */
public final class Appliance implements AutoCloseable
{
    private final ApplianceContext context;
    private final ApplianceCounters counters = new ApplianceCounters();
    private final JobRegistry registry;
    private final DataPlane dataPlane;
    private final ControlServer controlServer;

    private Appliance(final ApplianceContext context) throws IOException, InterruptedException
    {
        this.context = context;
        this.registry = new JobRegistry(context.memoryBudgetBytes(), context.joinTimeoutMs(), counters);
        final LossGenerator rxLoss = LossGenerator.of(context.lossRate(), context.lossSeed());
        final LossGenerator txLoss = LossGenerator.of(context.lossRate(), context.lossSeed() * 31 + 7);
        this.dataPlane = new DataPlane(context.resolvedBindAddress(), context.dataPort(), context.transport(),
            context.socketBufferBytes(), registry, counters, rxLoss, txLoss);
        try
        {
            this.controlServer = new ControlServer(context.resolvedBindAddress(), context.controlPort(), registry, counters,
                dataPlane.port());
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

    public ApplianceContext context()
    {
        return context;
    }

    public ApplianceCounters counters()
    {
        return counters;
    }

    public JobRegistry registry()
    {
        return registry;
    }

    public int dataPort()
    {
        return dataPlane.port();
    }

    public int controlPort()
    {
        return controlServer.port();
    }

    public String transportName()
    {
        return dataPlane.transportName();
    }

    /**
     * Abort running jobs with the reason, then stop the endpoints.
     */
    public void close(final String reason)
    {
        registry.abortAll(reason);
        controlServer.close();
        dataPlane.close();
    }

    public void close()
    {
        close("appliance shutting down");
    }
}
