package io.switchml.offload.xdp;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendEnvironment;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendProvider;

/**
 * Registers the {@code xdp} backend with the appliance ({@code switchml.appliance.backends=xdp,software}).
 */
public final class XdpBackendProvider implements BackendProvider
{
    public String name()
    {
        return XdpBackend.NAME;
    }

    public Backend create(final BackendEnvironment environment) throws BackendException
    {
        return new XdpBackend(environment);
    }
}
