package io.switchml.offload.tofino.model;

import io.switchml.offload.tofino.JobInstaller.JobImage;

import java.util.function.IntUnaryOperator;

/**
 * Jobs as the tests install them: rank r at the address the test gives it, UDP port 40000 + r, switch port r + 1.
 */
public final class TestJobImages
{
    private TestJobImages()
    {
    }

    /**
     * @param addressOfRank the IPv4 address (as an int) of each rank.
     * @return the job's image for {@code JobInstaller}.
     */
    public static JobImage job(
        final int jobId, final int world, final byte type, final int lanes, final int slots, final int poolBase,
        final int group, final IntUnaryOperator addressOfRank)
    {
        final int[] addrs = new int[world];
        final int[] ports = new int[world];
        final int[] switchPorts = new int[world];
        for (int rank = 0; rank < world; rank++)
        {
            addrs[rank] = addressOfRank.applyAsInt(rank);
            ports[rank] = 40000 + rank;
            switchPorts[rank] = rank + 1;
        }
        return new JobImage(jobId, world, type, lanes, slots, poolBase, group, addrs, ports, switchPorts);
    }
}
