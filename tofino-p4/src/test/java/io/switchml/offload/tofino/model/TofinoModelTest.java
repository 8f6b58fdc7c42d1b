package io.switchml.offload.tofino.model;

import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.JobInstaller.JobImage;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What strangers can do to the pipeline model: packets from sources no rank is pinned to, for jobs that do not exist,
 * of types a worker does not send, are dropped before the registers and counted by reason, and say so
 * ({@link TofinoModel#lastDrop()}), so that the appliance moves a job's counters only for a member's packet.
 */
final class TofinoModelTest
{
    private static final int JOB_ID = 7;
    private static final int WORLD = 2;
    private static final int SLOTS = 4;
    private static final int POOL_BASE = 16;
    private static final int GROUP = 3;
    private static final int[] ADDRS = {0x0A00_0001, 0x0A00_0002};
    private static final int[] PORTS = {40000, 40001};

    private final TofinoModel model = new TofinoModel(WorkerTraces.DATA_PORT);

    private static JobImage job()
    {
        return new JobImage(JOB_ID, WORLD, ElementType.INT32, 64, SLOTS, POOL_BASE, GROUP, ADDRS, PORTS, new int[]{1, 2});
    }

    private static byte[] update(final int jobId, final int rank, final int slot, final int value)
    {
        final byte[] bytes = new byte[DataHeaderFlyweight.packetLength(4)];
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(bytes), 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, 0, ElementType.INT32, slot, 0, 4,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
        for (int lane = 0; lane < 4; lane++)
        {
            header.lane(lane, value + lane);
        }
        return bytes;
    }

    private List<TofinoModel.PacketOut> send(final int srcAddr, final int srcPort, final byte[] bytes)
    {
        return model.process(new TofinoModel.PacketIn(1, srcAddr, srcPort, WorkerTraces.APPLIANCE_ADDR, WorkerTraces.DATA_PORT,
            bytes, 0, bytes.length));
    }

    private void assertJobRegistersZero() throws Exception
    {
        for (int slot = 0; slot < SLOTS; slot++)
        {
            assertArrayEquals(new byte[8], model.readRegister(P4Names.SEEN, POOL_BASE + slot), "seen of slot " + slot);
            for (int version = 0; version < 2; version++)
            {
                assertArrayEquals(new byte[4], model.readRegister(P4Names.COUNT, (POOL_BASE + slot) << 1 | version),
                    "count of slot " + slot + " version " + version);
            }
        }
    }

    @Test
    void aFloodOfStrangersIsDroppedByReasonBeforeTheRegistersAndLeavesTheJobAsItWas() throws Exception
    {
        JobInstaller.install(model, job());
        final long seed = System.nanoTime();
        final SplittableRandom random = new SplittableRandom(seed);
        final Map<DropReason, Long> sent = new EnumMap<>(DropReason.class);
        final int packets = 20_000;
        int forwarded = 0;
        for (int i = 0; i < packets; i++)
        {
            final int srcAddr = 0x0B00_0000 + i;
            final int srcPort = 1024 + random.nextInt(60_000);
            final int rank = random.nextInt(WORLD);
            final byte[] bytes;
            final DropReason expected;
            switch (i % 5)
            {
                case 0 ->
                {
                    // the job's id and a rank of it, from an address no rank is pinned to
                    bytes = update(JOB_ID, rank, random.nextInt(SLOTS), 1000);
                    expected = DropReason.NOT_MEMBER;
                }
                case 1 ->
                {
                    // a member's address with another port: rank_source pins both
                    bytes = update(JOB_ID, rank, random.nextInt(SLOTS), 1000);
                    final List<TofinoModel.PacketOut> out = send(ADDRS[rank], PORTS[rank] + 1 + random.nextInt(100), bytes);
                    assertEquals(List.of(), out);
                    assertEquals(DropReason.NOT_MEMBER, model.lastDrop(), "seed " + seed);
                    sent.merge(DropReason.NOT_MEMBER, 1L, Long::sum);
                    continue;
                }
                case 2 ->
                {
                    // a job the switch does not hold: not the program's, forwarded unchanged to the appliance (whose
                    // software shards hold such jobs), touching nothing
                    bytes = update(JOB_ID + 1 + random.nextInt(1 << 20), rank, 0, 1000);
                    final List<TofinoModel.PacketOut> out = send(srcAddr, srcPort, bytes);
                    assertEquals(1, out.size(), "seed " + seed);
                    assertTrue(out.get(0).egressPort() < 0 && Arrays.equals(bytes, out.get(0).payload()), "seed " + seed);
                    assertEquals(DropReason.NONE, model.lastDrop(), "seed " + seed);
                    forwarded++;
                    continue;
                }
                case 3 ->
                {
                    bytes = update(JOB_ID, rank, 0, 1000);
                    bytes[DataHeaderFlyweight.TYPE_OFFSET] = DataHeaderFlyweight.TYPE_RESULT;
                    expected = DropReason.BAD_TYPE;
                }
                default ->
                {
                    bytes = update(JOB_ID, rank, 0, 1000);
                    bytes[DataHeaderFlyweight.MAGIC_OFFSET] ^= 0x5A;
                    expected = DropReason.BAD_MAGIC;
                }
            }
            assertEquals(List.of(), send(srcAddr, srcPort, bytes), "seed " + seed);
            assertEquals(expected, model.lastDrop(), "seed " + seed);
            sent.merge(expected, 1L, Long::sum);
        }

        for (final DropReason reason : DropReason.values())
        {
            assertEquals(sent.getOrDefault(reason, 0L), model.drops(reason), reason + ", seed " + seed);
        }
        assertEquals(packets, model.events(TofinoModel.Event.PACKETS), "every packet reached the pipeline");
        for (final TofinoModel.Event event : TofinoModel.Event.values())
        {
            if (event == TofinoModel.Event.PASSED)
            {
                assertEquals(forwarded, model.events(event), "unknown jobs' packets forwarded, seed " + seed);
            }
            else if (event != TofinoModel.Event.PACKETS)
            {
                assertEquals(0, model.events(event), event + ": no stranger's packet got past the checks");
            }
        }
        assertJobRegistersZero();
        assertEquals(WORLD, model.tableEntries(P4Names.RANK_SOURCE), "the tables hold what the control plane wrote");
        assertEquals(1, model.tableEntries(P4Names.JOB_TABLE));

        // the members' own round completes with exactly their values
        assertEquals(List.of(), send(ADDRS[0], PORTS[0], update(JOB_ID, 0, 1, 10)));
        assertEquals(DropReason.NONE, model.lastDrop());
        final List<TofinoModel.PacketOut> results = send(ADDRS[1], PORTS[1], update(JOB_ID, 1, 1, 100));
        assertEquals(DropReason.NONE, model.lastDrop());
        assertEquals(WORLD, results.size());
        for (final TofinoModel.PacketOut result : results)
        {
            final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(result.payload()), 0);
            assertEquals(DataHeaderFlyweight.TYPE_RESULT, header.type());
            for (int lane = 0; lane < 4; lane++)
            {
                assertEquals(110 + 2 * lane, header.lane(lane));
            }
        }
    }

    @Test
    void aMembersPacketIsTheJobsEvenWhenDroppedAfterItsSourceCheck() throws Exception
    {
        JobInstaller.install(model, job());

        assertEquals(List.of(), send(ADDRS[0], PORTS[0], update(JOB_ID, 0, SLOTS, 1)), "a slot outside the job's pool");
        assertEquals(DropReason.JOB_MISMATCH, model.lastDrop());
        assertEquals(1, model.drops(DropReason.JOB_MISMATCH));

        assertEquals(List.of(), send(ADDRS[0], PORTS[0], update(JOB_ID, 0, 0, 1)));
        assertEquals(DropReason.NONE, model.lastDrop(), "absorbed: the job's, not a drop");
        assertEquals(1, model.events(TofinoModel.Event.ABSORBED));

        // a job whose group is gone: the completing packet passed its checks, the result has nowhere to go
        model.writeMulticastGroup(PipelineControl.UpdateType.DELETE, GROUP, List.of());
        assertEquals(List.of(), send(ADDRS[1], PORTS[1], update(JOB_ID, 1, 0, 2)));
        assertEquals(DropReason.NONE, model.lastDrop());
        assertEquals(1, model.drops(DropReason.UNKNOWN_JOB), "counted as the pipeline's drop");

        // the next packet starts afresh
        assertEquals(List.of(), send(0x0B00_0001, 1, update(JOB_ID, 0, 0, 1)));
        assertEquals(DropReason.NOT_MEMBER, model.lastDrop());
        final byte[] notOurs = update(JOB_ID, 0, 0, 1);
        final List<TofinoModel.PacketOut> passed = model.process(new TofinoModel.PacketIn(1, 0x0B00_0001, 1,
            WorkerTraces.APPLIANCE_ADDR, WorkerTraces.DATA_PORT + 1, notOurs, 0, notOurs.length));
        assertEquals(DropReason.NONE, model.lastDrop(), "not a SwitchML packet: passed through, not dropped");
        assertTrue(passed.size() == 1 && passed.get(0).egressPort() < 0);
    }
}
