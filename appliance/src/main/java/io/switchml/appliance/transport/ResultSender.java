package io.switchml.appliance.transport;

import io.switchml.appliance.control.Job;
import org.agrona.MutableDirectBuffer;

/**
 * Where a {@link ShardProcessor} writes result packets: one per transport. For each update the processor
 * claims a buffer big enough for any result of it before the slot pool runs (the pool writes the result
 * there), sends the result, now of known length, to zero or more destinations, and then releases the
 * claim. At most one claim is open at a time. Implementations run on the shard's thread and must not
 * block.
 */
interface ResultSender
{
    /**
     * Claim space for one result packet.
     *
     * @param capacityBytes the most the result can take.
     * @return the buffer the result is written to, at {@link #claimOffset()}; valid until {@link #release()}.
     */
    MutableDirectBuffer claim(int capacityBytes);

    /**
     * @return offset of the claimed result in the buffer {@link #claim(int)} returned.
     */
    int claimOffset();

    /**
     * Queue the claimed result for a member of a job, at the address it gave for this shard.
     *
     * @param lengthBytes of the result, at most the claimed capacity.
     * @return false when it could not be queued (the transport's batch is full), so that it is counted.
     */
    boolean sendToMember(Job job, int rank, int lengthBytes);

    /**
     * Queue the claimed result for the sender of the packet being processed.
     *
     * @param senderKey   its {@link AddressKey}.
     * @param lengthBytes of the result, at most the claimed capacity.
     * @return false when it could not be queued.
     */
    boolean sendToSender(long senderKey, int lengthBytes);

    /**
     * Queue the claimed result for an IP multicast group.
     *
     * @param groupKey    the group's address and port as an {@link AddressKey}.
     * @param lengthBytes of the result, at most the claimed capacity.
     * @return false when it could not be queued.
     */
    boolean sendToGroup(long groupKey, int lengthBytes);

    /**
     * Sign the claimed result (its job uses MACs): write the MAC of its first {@code lengthBytes} bytes into its MAC
     * field, before any of it leaves. Called once the result is written and before it is queued; its bytes do not
     * change after. An implementation may hash it later, with the other results of the batch, as long as that happens
     * before it hands them to the kernel.
     *
     * @param job         the result's job: its MAC key.
     * @param lengthBytes of the result.
     */
    void sign(Job job, int lengthBytes);

    /**
     * End the claim; what was queued stays queued.
     */
    void release();
}
