package io.switchml.appliance.backend;

import org.agrona.concurrent.status.AtomicCounter;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * What the appliance gives a backend when it starts one.
 *
 * @param options          the backend's own options: every {@code switchml.appliance.<name>.*} property with that
 *                         prefix removed ("interface", "mode", ...); the backend validates them and fails naming
 *                         the full property.
 * @param optionPrefix     the prefix removed from the option names, for error messages
 *                         ("switchml.appliance.xdp.").
 * @param bindAddress      the address the data-plane shards bind to.
 * @param dataPorts        UDP port of each shard, in shard order.
 * @param multicastBase    first IPv4 address of the result groups (job j uses base + (j mod 65536)), host order,
 *                         or 0 when results are unicast.
 * @param multicastPorts   UDP port results of each shard are multicast to; empty when results are unicast.
 * @param counter          allocates a counter in the appliance's counters file by metric name ([a-z][a-z0-9_]*),
 *                         for the backend's own statistics ({@code ops counters}, {@code /metrics} as
 *                         switchml_backend_NAME_total{backend="..."}, see MetricNames).
 * @param log              writes one line to the appliance's log and journal.
 * @param stateDirectory   a directory for this backend alone that outlives the process ({@code <dir>/backends/<name>}
 *                         under the appliance's --dir, created before the backend starts): what a restarted
 *                         appliance must know about what an earlier one left behind.
 */
public record BackendEnvironment(
    Map<String, String> options,
    String optionPrefix,
    InetAddress bindAddress,
    int[] dataPorts,
    int multicastBase,
    int[] multicastPorts,
    Function<String, AtomicCounter> counter,
    Consumer<String> log,
    Path stateDirectory)
{
    /**
     * @return whether completed results go to a multicast group.
     */
    public boolean multicast()
    {
        return multicastPorts.length > 0;
    }
}
