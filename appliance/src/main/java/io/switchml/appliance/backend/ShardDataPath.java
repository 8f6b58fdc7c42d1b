package io.switchml.appliance.backend;

import io.switchml.protocol.DropReason;
import org.agrona.DirectBuffer;

/**
 * The data plane of a backend that runs on the appliance's own shard threads in place of the slot pool: a software
 * model of a switch pipeline ({@code tofino-model}), which stands where the switch would stand between the workers
 * and the appliance. A shard hands it every well-formed datagram with the job's id, before any check of its own (the
 * modelled switch parses, pins sources and drops by itself, and counts what it drops), and sends what it emits from
 * the shard's socket, so workers see results from the address they sent to. What the data path says of each
 * datagram decides whose counters move: the job's only for a packet that passed the job's member checks, the
 * shard's drop counter of the reason for any other, so a stranger sending with a job's id never moves the job's.
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
     * <p>
     * Holds nothing per source beyond a fixed bound: every source address on the wire can reach it.
     *
     * @param buffer    holding the datagram.
     * @param offset    of the datagram in buffer.
     * @param length    of the datagram.
     * @param senderKey the source IPv4 address and UDP port as an {@code AddressKey}.
     * @param sink      where output packets go.
     * @return {@link DropReason#NONE} when the datagram passed the job's member checks (its rank, pinned to its
     * source address and port); {@link DropReason#JOB_MISMATCH} when it passed them but disagrees with the job's
     * slots or element type (a member's packet, dropped); else the reason it was dropped before them
     * ({@link DropReason#OFFLOADED_JOB} when it went past the data path untouched, to a host that holds no slots).
     */
    DropReason onPacket(DirectBuffer buffer, int offset, int length, long senderKey, PacketSink sink);
}
