package io.switchml.appliance.control;

import io.switchml.protocol.ElementType;

/**
 * What a CREATE asks for. Two creates of the same tenant and name describe the same job only if
 * every field agrees.
 *
 * @param tenant        owner of the job, for quotas and isolation.
 * @param name          job name, unique within the tenant while the job lives.
 * @param worldSize     number of ranks.
 * @param elementType   {@link ElementType} code.
 * @param lanes         k, elements per packet.
 * @param slots         s, pool size.
 * @param macEnabled    whether every data packet carries a SipHash-2-4 MAC.
 * @param slotTimeoutMs how long a slot may stay partly filled before the job is aborted.
 * @param joinTimeoutMs how long the job waits for all ranks.
 */
public record JobSpec(
    String tenant, String name, int worldSize, byte elementType, int lanes, int slots, boolean macEnabled,
    long slotTimeoutMs, long joinTimeoutMs)
{
    /**
     * @return a description of the first field that differs from another spec, or null.
     */
    String conflictWith(final JobSpec other)
    {
        if (worldSize != other.worldSize)
        {
            return "world size " + other.worldSize + " but the job has " + worldSize;
        }
        if (elementType != other.elementType)
        {
            return "element type " + ElementType.name(other.elementType) + " but the job has " + ElementType.name(elementType);
        }
        if (lanes != other.lanes)
        {
            return "k=" + other.lanes + " but the job has k=" + lanes;
        }
        if (slots != other.slots)
        {
            return "s=" + other.slots + " but the job has s=" + slots;
        }
        if (macEnabled != other.macEnabled)
        {
            return "mac=" + (other.macEnabled ? "on" : "off") + " but the job has mac=" + (macEnabled ? "on" : "off");
        }
        return null;
    }
}
