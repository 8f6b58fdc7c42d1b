package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendProvider;
import io.switchml.offload.tofino.model.P4Names;

import java.net.Inet4Address;
import java.nio.ByteBuffer;

/**
 * Registers the {@code tofino-model} backend: the Java model of the Tofino pipeline as a software switch in front of
 * the shard, controlled through P4Runtime like the real one ({@code switchml.appliance.backends=tofino-model,software}).
 * For end-to-end tests and demonstrations of the offload path; its speed is the model's, not a switch's.
 */
public final class TofinoModelBackendProvider implements BackendProvider
{
    public String name()
    {
        return TofinoBackend.MODEL_NAME;
    }

    public Backend create(final BackendEnvironment environment) throws BackendException
    {
        TofinoBackendProvider.oneShard(environment, TofinoBackend.MODEL_NAME);
        final TofinoOptions options = TofinoOptions.parse(environment.options(), environment.optionPrefix(), true, P4Names.SLOTS);
        final int applianceAddr = environment.bindAddress() instanceof Inet4Address v4 ? ByteBuffer.wrap(v4.getAddress()).getInt() : 0;
        final SwitchConnection connection = Connections.model(options, applianceAddr, environment.dataPorts(), environment.log());
        TofinoBackendProvider.writeDataPorts(connection, environment);
        environment.log().accept("tofino-model: primary controller of " + connection.describe() + "; " + options.registers() +
            " slots, multicast groups " + options.firstGroup() + "-" + options.lastGroup() + " (a model: not a switch's speed)");
        return new TofinoBackend(TofinoBackend.MODEL_NAME, environment, connection, options);
    }
}
