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
        if (environment.dataPorts()[0] != P4Names.UDP_PORT)
        {
            throw new BackendException("switchml.p4 takes SwitchML packets by UDP destination port " + P4Names.UDP_PORT +
                " (a constant of its parser), and the appliance's data port is " + environment.dataPorts()[0] +
                ": set switchml.appliance.data.port=" + P4Names.UDP_PORT + ", or change the program's parser and P4Names.UDP_PORT");
        }
        final TofinoOptions options = TofinoOptions.parse(environment.options(), environment.optionPrefix(), false, P4Names.SLOTS);
        final SwitchConnection connection = Connections.remote(options, environment.optionPrefix());
        environment.log().accept("tofino: primary controller of " + connection.describe() + "; " + options.registers() +
            " slots, multicast groups " + options.firstGroup() + "-" + options.lastGroup());
        return new TofinoBackend(TofinoBackend.NAME, environment, connection, options);
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
