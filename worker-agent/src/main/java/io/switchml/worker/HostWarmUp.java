package io.switchml.worker;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.security.PacketMacBatch;

/**
 * The warm-up of a long-lived agent ({@code switchml worker host}) at its start, before it takes any job: the
 * per-packet rehearsal ({@link DataPathRehearsal}) and the per-element kernels ({@link DataPathWarmUp}), float32 and
 * int32 in turn, over and over for a budget of seconds instead of the fraction of a second a per-rank agent can spare
 * while its join waits. Every job the process serves afterwards shares the compiled code, so none of them warms up
 * again (the process is marked warm).
 */
public final class HostWarmUp
{
    /** World size the rehearsal quantizes for: the profile does not depend on it. */
    private static final int WORLD = 4;

    /**
     * What a warm-up did.
     *
     * @param rehearsals   rehearsals run (each a client, a reflector and their sockets).
     * @param allReduces   all-reduces the rehearsals completed.
     * @param kernelRounds chunks through the kernels at the host's k.
     * @param elapsedMs    wall time.
     */
    public record Result(int rehearsals, long allReduces, long kernelRounds, long elapsedMs)
    {
    }

    private HostWarmUp()
    {
    }

    /**
     * Warm the data path up for {@code budgetMs} (0: not at all, but still mark the process warm so that no join
     * pays a warm-up).
     *
     * @param hostOptions the agent's options: packet I/O (transport, GSO, GRO) and k.
     * @param budgetMs    how long to go on.
     * @return what it did; a rehearsal that could not run (no loopback) is counted with no all-reduces.
     */
    public static Result run(final WorkerContext hostOptions, final long budgetMs)
    {
        DataPathWarmUp.markStarted();
        if (hostOptions.macEnabled())
        {
            PacketMacBatch.warmUpInBackground(DataHeaderFlyweight.packetLength(ElementType.FLOAT32, hostOptions.lanes()));
        }
        final long startNs = System.nanoTime();
        final long endNs = startNs + budgetMs * 1_000_000L;
        int rehearsals = 0;
        long allReduces = 0;
        long kernelRounds = 0;
        for (int turn = 0; System.nanoTime() - endNs < 0; turn++)
        {
            final byte type = turn % 2 == 0 ? ElementType.FLOAT32 : ElementType.INT32;
            final WorkerContext job = new WorkerContext().transport(hostOptions.transport()).gso(hostOptions.gso())
                .gro(hostOptions.gro()).fastRetransmit(hostOptions.fastRetransmit()).lanes(hostOptions.lanes())
                .worldSize(WORLD).elementType(type);
            final int done = new DataPathRehearsal(job).run(() -> endNs);
            rehearsals++;
            if (done < 0)
            {
                break;
            }
            allReduces += done;
            final long leftNs = endNs - System.nanoTime();
            if (leftNs > 0)
            {
                kernelRounds += new DataPathWarmUp(job).run(Math.min(leftNs, DataPathWarmUp.KERNEL_SHARE_NS));
            }
        }
        return new Result(rehearsals, allReduces, kernelRounds, (System.nanoTime() - startNs) / 1_000_000);
    }
}
