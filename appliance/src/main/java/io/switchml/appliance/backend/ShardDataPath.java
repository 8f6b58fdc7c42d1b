package io.switchml.appliance.backend;

import org.agrona.DirectBuffer;

/**
 * The data plane of a backend that runs on the appliance's own shard threads in place of the slot pool: a software
 * model of a switch pipeline ({@code tofino-model}), which stands where the switch would stand between the workers
 * and the appliance. A shard hands it every datagram of the job as received, before any check of its own (the
 * modelled switch parses, pins sources and drops by itself, and counts what it drops), and sends what it emits from
 * the shard's socket, so workers see results from the address they sent to.
 * <p>
 * Called on shard threads, several at once when the appliance has several shards: an implementation serialises as
 * the pipeline it models would.
 */
public interface ShardDataPath
{
    /**
     * Where the data path's output packets go: the shard's socket.
     */
    interface PacketSink
    {
        /**
         * Send a datagram.
         *
         * @param payload     holding the datagram.
         * @param offset      of the datagram in payload.
         * @param length      of the datagram.
         * @param destination IPv4 address and UDP port as an {@code AddressKey}.
         */
        void send(DirectBuffer payload, int offset, int length, long destination);
    }

    /**
     * One received datagram of a job placed on this data path.
     *
     * @param buffer    holding the datagram.
     * @param offset    of the datagram in buffer.
     * @param length    of the datagram.
     * @param senderKey the source IPv4 address and UDP port as an {@code AddressKey}.
     * @param sink      where output packets go.
     */
    void onPacket(DirectBuffer buffer, int offset, int length, long senderKey, PacketSink sink);
}
