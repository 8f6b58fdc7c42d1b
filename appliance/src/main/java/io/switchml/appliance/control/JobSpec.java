package io.switchml.appliance.control;

import io.switchml.protocol.DataHeaderFlyweight;
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
    /** Largest number of ranks in a job. */
    public static final int MAX_WORLD_SIZE = DataHeaderFlyweight.MAX_WORKERS;
    /** Largest pool a job may ask for. */
    public static final int MAX_SLOTS = 1 << 20;
    /** Shortest and longest slot and join timeouts a CREATE may ask for. */
    public static final long MIN_TIMEOUT_MS = 10;
    public static final long MAX_TIMEOUT_MS = 3_600_000;

    /**
     * @return what makes this spec unacceptable whatever the appliance's state (names, ranges), or null.
     */
    String problem()
    {
        if (!tenant.matches("[0-9A-Za-z_.\\-]{1,64}") || !name.matches("[0-9A-Za-z_.\\-]{1,128}"))
        {
            return "tenant and name must be 1 to 64 (128 for names) characters of [0-9A-Za-z_.-]";
        }
        if (worldSize < 1 || worldSize > MAX_WORLD_SIZE)
        {
            return "world size must be within 1.." + MAX_WORLD_SIZE + ": " + worldSize;
        }
        if (lanes < 1 || lanes > DataHeaderFlyweight.MAX_ELEMENTS)
        {
            return "k must be within 1.." + DataHeaderFlyweight.MAX_ELEMENTS + ": " + lanes;
        }
        if (slots < 1 || slots > MAX_SLOTS)
        {
            return "s must be within 1.." + MAX_SLOTS + ": " + slots;
        }
        if (slotTimeoutMs < MIN_TIMEOUT_MS || slotTimeoutMs > MAX_TIMEOUT_MS)
        {
            return "slotTimeoutMs must be within " + MIN_TIMEOUT_MS + ".." + MAX_TIMEOUT_MS + ": " + slotTimeoutMs;
        }
        if (joinTimeoutMs < MIN_TIMEOUT_MS || joinTimeoutMs > MAX_TIMEOUT_MS)
        {
            return "joinTimeoutMs must be within " + MIN_TIMEOUT_MS + ".." + MAX_TIMEOUT_MS + ": " + joinTimeoutMs;
        }
        return null;
    }

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
