package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.transport.AddressKey;
import io.switchml.offload.tofino.model.TofinoModel;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The model of the switch as the data plane of {@code tofino-model} jobs: a shard hands it each datagram with its
 * source, the model runs it through the pipeline (under the pipeline's lock: one packet at a time, as a pipeline
 * does), and what the pipeline emits leaves from the shard's socket to the destination the egress rewrite gave it.
 * Ingress ports are numbered per source host in order of first appearance, as if each host were on its own port.
 * <p>
 * It allocates per packet (the model copies packets): it emulates a switch for tests and demonstrations, it is not
 * a fast path.
 */
final class ModelDataPath implements ShardDataPath
{
    private final TofinoModel model;
    private final Object lock;
    private final int applianceAddr;
    private final int[] dataPorts;
    private final Map<Integer, Integer> hostPorts = new HashMap<>();

    ModelDataPath(final TofinoModel model, final Object lock, final int applianceAddr, final int[] dataPorts)
    {
        this.model = model;
        this.lock = lock;
        this.applianceAddr = applianceAddr;
        this.dataPorts = dataPorts.clone();
    }

    public void onPacket(final DirectBuffer buffer, final int offset, final int length, final long senderKey, final PacketSink sink)
    {
        final byte[] bytes = new byte[length];
        buffer.getBytes(offset, bytes);
        final int srcAddr = AddressKey.ipv4(senderKey);
        final int srcPort = AddressKey.port(senderKey);
        final List<TofinoModel.PacketOut> out;
        synchronized (lock)
        {
            final int ingress = hostPorts.computeIfAbsent(srcAddr, host -> hostPorts.size() + 1);
            out = model.process(new TofinoModel.PacketIn(ingress, srcAddr, srcPort, applianceAddr, dataPorts[0], bytes, 0, length));
        }
        for (final TofinoModel.PacketOut packet : out)
        {
            if (packet.egressPort() >= 0)
            {
                sink.send(new UnsafeBuffer(packet.payload()), 0, packet.payload().length, AddressKey.of(packet.dstAddr(), packet.dstPort()));
            }
        }
    }
}
