package io.switchml.appliance.backend;

import io.switchml.appliance.control.JobSpec;
import io.switchml.protocol.ElementType;

import java.util.StringJoiner;

/**
 * What a {@link Backend} can hold, declared once at start-up (like Aeron's flow-control strategies declare what
 * they support): the element types it aggregates, the k values it takes, the largest world size, its slot
 * capacity, MAC support (possibly only up to some k) and how it delivers results.
 *
 * @param elementTypes     bit set of {@link ElementType} codes (bit = code) the backend aggregates.
 * @param minLanes         smallest k.
 * @param maxLanes         largest k.
 * @param maxWorldSize     largest number of ranks in one job.
 * @param slotCapacity     slot versions (2 per slot) the backend holds for all its jobs together.
 * @param macMaxLanes      largest k for which it verifies and signs MACs; 0 when it cannot at all.
 * @param unicastResults   whether it can deliver results to each member by unicast.
 * @param multicastResults whether it can deliver results to a multicast group.
 */
public record BackendCapabilities(
    int elementTypes,
    int minLanes,
    int maxLanes,
    int maxWorldSize,
    long slotCapacity,
    int macMaxLanes,
    boolean unicastResults,
    boolean multicastResults)
{
    /**
     * @param types element type codes.
     * @return the bit set for {@link #elementTypes}.
     */
    public static int typeSet(final byte... types)
    {
        int set = 0;
        for (final byte type : types)
        {
            set |= 1 << type;
        }
        return set;
    }

    /**
     * Check a job against the declared capabilities (not against current free capacity or health, which the
     * backend judges in {@link Backend#refusal}).
     *
     * @param spec      the job.
     * @param multicast whether the appliance multicasts results.
     * @return the first limit the job exceeds, as a short phrase ("k=8192 exceeds 256"), or null when it fits.
     */
    public String check(final JobSpec spec, final boolean multicast)
    {
        if ((elementTypes & (1 << spec.elementType())) == 0)
        {
            return "element type " + ElementType.name(spec.elementType()) + " not supported (" + typeNames() + ")";
        }
        if (spec.lanes() > maxLanes)
        {
            return "k=" + spec.lanes() + " exceeds " + maxLanes;
        }
        if (spec.lanes() < minLanes)
        {
            return "k=" + spec.lanes() + " is below " + minLanes;
        }
        if (spec.worldSize() > maxWorldSize)
        {
            return "world size " + spec.worldSize() + " exceeds " + maxWorldSize;
        }
        if (2L * spec.slots() > slotCapacity)
        {
            return "s=" + spec.slots() + " needs " + 2L * spec.slots() + " slot versions, capacity is " + slotCapacity;
        }
        if (spec.macEnabled() && spec.lanes() > macMaxLanes)
        {
            return macMaxLanes == 0 ? "mac=on not supported" : "mac=on not supported above k=" + macMaxLanes;
        }
        if (multicast ? !multicastResults : !unicastResults)
        {
            return (multicast ? "multicast" : "unicast") + " result delivery not supported";
        }
        return null;
    }

    private String typeNames()
    {
        final StringJoiner joiner = new StringJoiner(", ");
        for (int code = 0; code < 32; code++)
        {
            if ((elementTypes & (1 << code)) != 0 && ElementType.isValid((byte)code))
            {
                joiner.add(ElementType.name((byte)code));
            }
        }
        return joiner.toString();
    }
}
