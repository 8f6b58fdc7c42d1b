package io.switchml.appliance.backend;

/**
 * Creates a {@link Backend} by name; found with {@link java.util.ServiceLoader}, so an offload module on the class
 * path (smartnic-offload, tofino-p4) adds its backend without the appliance depending on it.
 */
public interface BackendProvider
{
    /**
     * @return the backend's name, as written in {@code switchml.appliance.backends}.
     */
    String name();

    /**
     * Start the backend (attach programs, connect to a switch).
     *
     * @param environment what the appliance offers a backend: its configuration, data ports, counters, log.
     * @return the running backend.
     * @throws BackendException naming the cause (and the option to change) when it cannot start.
     */
    Backend create(BackendEnvironment environment) throws BackendException;
}
