package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.transport.AddressKey;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.JobInstaller.JobImage;
import io.switchml.offload.tofino.model.TestJobImages;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The model as a shard's data path: what it tells the shard of each datagram (whose counters move), and its table of
 * source hosts, which stays within the switch's ports whoever sends.
 */
final class ModelDataPathTest
{
    private static final int APPLIANCE_ADDR = 0x0A00_00FE;
    private static final int DATA_PORT = 7471;

    private final TofinoModel model = new TofinoModel(DATA_PORT);
    private final ModelDataPath dataPath = new ModelDataPath(model, new Object(), APPLIANCE_ADDR, new int[]{DATA_PORT});
    private final List<Long> sentTo = new ArrayList<>();
    private final ShardDataPath.PacketSink sink = (payload, offset, length, destination) -> sentTo.add(destination);

    /** A job of world ranks, rank r at 10.(jobId).0.(r + 1), port 40000 + r. */
    private static JobImage job(final int jobId, final int world, final int poolBase, final int group)
    {
        return TestJobImages.job(jobId, world, ElementType.INT32, 64, 2, poolBase, group, rank -> addr(jobId, rank));
    }

    private static int addr(final int jobId, final int rank)
    {
        return 0x0A00_0000 | jobId << 16 | rank + 1;
    }

    private static UnsafeBuffer update(final int jobId, final int rank, final int slot)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(4)]);
        new DataHeaderFlyweight().wrap(buffer, 0).writeHeader(DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, 0,
            ElementType.INT32, slot, 0, 4, DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
        return buffer;
    }

    private DropReason send(final UnsafeBuffer packet, final int srcAddr, final int srcPort)
    {
        return dataPath.onPacket(packet, 0, packet.capacity(), AddressKey.of(srcAddr, srcPort), sink);
    }

    @Test
    void aFloodFromDistinctSourcesTakesNoHostPortAndEachDatagramIsCountedByItsReason() throws Exception
    {
        JobInstaller.install(model, job(1, 2, 0, 1));
        final int strangers = 100_000;
        for (int i = 0; i < strangers; i++)
        {
            final int srcAddr = 0x0B00_0000 + i;
            assertEquals(DropReason.NOT_MEMBER, send(update(1, i & 1, 0), srcAddr, 1024 + (i & 0x7FFF)));
            // a job the switch does not hold goes past it unchanged, to the appliance's host (no slots of it here)
            assertEquals(DropReason.OFFLOADED_JOB, send(update(2 + i, 0, 0), srcAddr, 1024 + (i & 0x7FFF)));
        }
        assertEquals(0, dataPath.hostsOnOwnPorts(), "strangers get no port of their own");
        assertEquals(strangers, model.drops(DropReason.NOT_MEMBER));
        assertEquals(0, model.drops(DropReason.UNKNOWN_JOB));
        assertEquals(strangers, model.events(TofinoModel.Event.PASSED));
        assertEquals(List.of(), sentTo);

        assertEquals(DropReason.NONE, send(update(1, 0, 0), addr(1, 0), 40000));
        assertEquals(DropReason.JOB_MISMATCH, send(update(1, 0, 2), addr(1, 0), 40000), "a member's, outside the pool");
        assertEquals(DropReason.NONE, send(update(1, 1, 0), addr(1, 1), 40001));
        assertEquals(List.of(AddressKey.of(addr(1, 0), 40000), AddressKey.of(addr(1, 1), 40001)), sentTo,
            "the result to both ranks");
        assertEquals(2, dataPath.hostsOnOwnPorts(), "the members' hosts, once admitted");
    }

    @Test
    void hostsBeyondTheSwitchsPortsShareOneAndTheTableStopsGrowing() throws Exception
    {
        final int jobs = 4;
        for (int jobId = 1; jobId <= jobs; jobId++)
        {
            JobInstaller.install(model, job(jobId, 32, 2 * (jobId - 1), jobId));
        }
        for (int jobId = 1; jobId <= jobs; jobId++)
        {
            for (int rank = 0; rank < 32; rank++)
            {
                assertEquals(DropReason.NONE, send(update(jobId, rank, 0), addr(jobId, rank), 40000 + rank));
            }
        }
        assertEquals(ModelDataPath.HOST_PORTS - 1, dataPath.hostsOnOwnPorts(), "128 hosts, 63 own ports, the rest share one");
        assertEquals(jobs * 32, sentTo.size(), "every job's slot completed, every rank got its result");
    }

    @Test
    void aDatagramThePipelineDoesNotParseGoesPastItToAHostWithoutSlots() throws Exception
    {
        final TofinoModel empty = new TofinoModel(); // the value set not written yet
        JobInstaller.install(empty, job(1, 2, 0, 1));
        final ModelDataPath path = new ModelDataPath(empty, new Object(), APPLIANCE_ADDR, new int[]{DATA_PORT});
        final UnsafeBuffer packet = update(1, 0, 0);
        assertEquals(DropReason.OFFLOADED_JOB, path.onPacket(packet, 0, packet.capacity(), AddressKey.of(addr(1, 0), 40000), sink));
        assertTrue(sentTo.isEmpty());
        assertEquals(0, path.hostsOnOwnPorts());
    }
}
