package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.transport.AddressKey;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.protocol.DropReason;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.List;

/**
 * The model of the switch as the data plane of {@code tofino-model} jobs: a shard hands it each datagram with its
 * source, the model runs it through the pipeline (under the pipeline's lock: one packet at a time, as a pipeline
 * does), and what the pipeline emits leaves from the shard's socket to the destination the egress rewrite gave it.
 * <p>
 * Ingress ports: a switch has a fixed set, so the model has {@link #HOST_PORTS}. A source host gets a port of its own,
 * in order of first admission, once the pipeline has taken one of its packets as a member's; a host not admitted yet
 * (a stranger), and every host after the table is full, arrives on the shared port {@link #SHARED_PORT}, as hosts
 * behind one downstream link would. Nothing is evicted: the port only names where a unicast answer leaves, which the
 * shard's socket ignores (it sends to the rewritten destination), so what a host shares changes no packet.
 * <p>
 * It allocates per packet (the model copies packets): it emulates a switch for tests and demonstrations, it is not
 * a fast path.
 */
final class ModelDataPath implements ShardDataPath
{
    /** Front-panel ports of a Tofino 1 (64 × 100G): the ingress ports hosts are numbered onto, 1 to 64. */
    static final int HOST_PORTS = 64;
    /** The port of hosts without one of their own (strangers, and hosts past the first {@link #HOST_PORTS} - 1). */
    static final int SHARED_PORT = HOST_PORTS;

    private final TofinoModel model;
    private final Object lock;
    private final int applianceAddr;
    private final int[] dataPorts;
    private final int[] hostAddrs = new int[HOST_PORTS - 1];
    private int hosts;

    ModelDataPath(final TofinoModel model, final Object lock, final int applianceAddr, final int[] dataPorts)
    {
        this.model = model;
        this.lock = lock;
        this.applianceAddr = applianceAddr;
        this.dataPorts = dataPorts.clone();
    }

    public DropReason onPacket(final DirectBuffer buffer, final int offset, final int length, final long senderKey, final PacketSink sink)
    {
        final byte[] bytes = new byte[length];
        buffer.getBytes(offset, bytes);
        final int srcAddr = AddressKey.ipv4(senderKey);
        final int srcPort = AddressKey.port(senderKey);
        final List<TofinoModel.PacketOut> out;
        final DropReason verdict;
        synchronized (lock)
        {
            final int ingress = ingressPort(srcAddr);
            out = model.process(new TofinoModel.PacketIn(ingress, srcAddr, srcPort, applianceAddr, dataPorts[0], bytes, 0, length));
            // passed through unchanged (the data port not in the parser's set yet, or the job not in job_table: the
            // switch forwards what is not its job): on to the appliance's host, whose shards hold no slots of the job
            verdict = out.size() == 1 && out.get(0).egressPort() < 0 ? DropReason.OFFLOADED_JOB : model.lastDrop();
            if (verdict == DropReason.NONE && ingress == SHARED_PORT)
            {
                admitHost(srcAddr);
            }
        }
        for (final TofinoModel.PacketOut packet : out)
        {
            if (packet.egressPort() >= 0)
            {
                sink.send(new UnsafeBuffer(packet.payload()), 0, packet.payload().length, AddressKey.of(packet.dstAddr(), packet.dstPort()));
            }
        }
        return verdict;
    }

    /**
     * @return hosts holding a port of their own: never more than {@link #HOST_PORTS} - 1, whoever sends.
     */
    int hostsOnOwnPorts()
    {
        synchronized (lock)
        {
            return hosts;
        }
    }

    private int ingressPort(final int srcAddr)
    {
        for (int i = 0; i < hosts; i++)
        {
            if (hostAddrs[i] == srcAddr)
            {
                return i + 1;
            }
        }
        return SHARED_PORT;
    }

    private void admitHost(final int srcAddr)
    {
        if (hosts < hostAddrs.length)
        {
            hostAddrs[hosts++] = srcAddr;
        }
    }
}
