package io.switchml.offload.xdp;

/**
 * What the XDP program needs to know of one job, as it is written into the job table (struct sml_job).
 *
 * @param jobId           the appliance's job id (the table's key).
 * @param worldSize       n, 1 to {@link XdpLayout#MAX_RANKS}.
 * @param lanes           k, 1 to the k the program was loaded for ({@link XdpProgram#maxLanes()}).
 * @param slots           s, the job's global slot count.
 * @param slotBase        index in the slot array of the job's slot 0.
 * @param elementType     the job's element type code (int32 or float32).
 * @param macEnabled      whether packets carry a MAC.
 * @param macK0           key bytes 0..7 read little-endian.
 * @param macK1           key bytes 8..15 read little-endian.
 * @param groupAddress    IPv4 multicast group of the job's results (host order int), 0 for unicast results.
 * @param groupPorts      per shard, the UDP port results are multicast to; empty for unicast results.
 * @param memberAddresses per rank, its IPv4 address (host order int).
 * @param memberPorts     per rank and shard, its UDP source port.
 */
public record XdpJobImage(
    int jobId,
    int worldSize,
    int lanes,
    int slots,
    int slotBase,
    byte elementType,
    boolean macEnabled,
    long macK0,
    long macK1,
    int groupAddress,
    int[] groupPorts,
    int[] memberAddresses,
    int[][] memberPorts)
{
}
