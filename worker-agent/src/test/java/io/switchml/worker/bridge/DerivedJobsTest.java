package io.switchml.worker.bridge;

import io.switchml.protocol.ElementType;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The jobs a bridge derives from a rank's (the node's job of a host that sums its ranks, the int32 companion job)
 * keep everything of the rank's job that is not about the node or the element type: the process group's timeouts
 * above all, without which a late rank of a summed node aborted the job after the appliance's default 2 s.
 */
final class DerivedJobsTest
{
    private static WorkerContext rankJob()
    {
        return new WorkerContext().applianceHost("10.0.0.9").controlPort(7000).jobName("train").worldSize(8).rank(5)
            .lanes(2048).slots(16).macEnabled(false).joinTimeoutMs(45_000).slotTimeoutMs(1_800_000)
            .progressTimeoutMs(1_810_000).token("t0k");
    }

    @Test
    void theNodesJobKeepsTheRanksTimeoutsAndGeometry()
    {
        final WorkerContext node = BridgeContext.nodeJobOf(rankJob(), new WorkerContext(), 4);

        assertEquals("train", node.jobName());
        assertEquals(2, node.worldSize());
        assertEquals(1, node.rank());
        assertEquals(1_800_000, node.slotTimeoutMs());
        assertEquals(1_810_000, node.progressTimeoutMs());
        assertEquals(45_000, node.joinTimeoutMs());
        assertEquals(2048, node.lanes());
        assertEquals(16, node.slots());
        assertEquals("10.0.0.9", node.applianceHost());
        assertEquals("t0k", node.token());
    }

    @Test
    void theInt32JobKeepsTheRanksTimeouts()
    {
        final WorkerContext int32 = BridgeContext.int32JobOf(rankJob(), new WorkerContext());

        assertEquals("train-int32", int32.jobName());
        assertEquals(ElementType.INT32, int32.elementType());
        assertEquals(8, int32.worldSize());
        assertEquals(5, int32.rank());
        assertEquals(1_800_000, int32.slotTimeoutMs());
        assertEquals(1_810_000, int32.progressTimeoutMs());
    }
}
