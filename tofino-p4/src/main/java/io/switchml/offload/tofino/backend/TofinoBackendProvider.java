package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendProvider;
import io.switchml.offload.tofino.model.P4Names;

/**
 * Registers the {@code tofino} backend (a Tofino switch running switchml.p4, driven through P4Runtime):
 * {@code switchml.appliance.backends=tofino,software}.
 */
public final class TofinoBackendProvider implements BackendProvider
{
    public String name()
    {
        return TofinoBackend.NAME;
    }

    public Backend create(final BackendEnvironment environment) throws BackendException
    {
        oneShard(environment, TofinoBackend.NAME);
        final TofinoOptions options = TofinoOptions.parse(environment.options(), environment.optionPrefix(), false, P4Names.SLOTS);
        final org.agrona.concurrent.status.AtomicCounter reconnects = environment.counter().apply("reconnects");
        final SwitchConnection connection = Connections.remote(options, environment.optionPrefix(), TofinoBackend.NAME, environment.log(),
            reconnects::increment);
        writeDataPorts(connection, environment);
        environment.log().accept("tofino: primary controller of " + connection.describe() + "; " + options.registers() +
            " slots, multicast groups " + options.firstGroup() + "-" + options.lastGroup());
        final TofinoBackend backend = new TofinoBackend(TofinoBackend.NAME, environment, connection, options);
        connection.start();
        return backend;
    }

    /**
     * Tell the program's parser which UDP port is the aggregator's (its value set, empty on a fresh switch), so that
     * it takes the packets to this appliance's data port as SwitchML and no others; again on every new session.
     *
     * @throws BackendException with the switch's message, the connection closed, when it refuses the write.
     */
    static void writeDataPorts(final SwitchConnection connection, final BackendEnvironment environment) throws BackendException
    {
        final SwitchConnection.Step dataPorts = control -> control.writeValueSet(P4Names.DATA_PORTS,
            java.util.List.of(io.switchml.offload.tofino.JobInstaller.bytes(environment.dataPorts()[0], 16)));
        try
        {
            dataPorts.run(connection.control());
            connection.addReconnectStep(dataPorts);
        }
        catch (final io.switchml.offload.tofino.PipelineException ex)
        {
            connection.close();
            throw new BackendException(connection.describe() + " refused the data port " + environment.dataPorts()[0] + " in " +
                P4Names.DATA_PORTS + ": " + ex.detail(), ex);
        }
    }

    static void oneShard(final BackendEnvironment environment, final String name) throws BackendException
    {
        if (environment.dataPorts().length != 1)
        {
            throw new BackendException(name + " needs one data shard (switchml.appliance.shards=1): a switch returns results to the " +
                "port a rank sent from, and ranks use one port per shard; the appliance has " + environment.dataPorts().length);
        }
    }
}
