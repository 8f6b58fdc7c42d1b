package io.switchml.offload.tofino.model;

import io.switchml.appliance.engine.SlotPool;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.JobInstaller.JobImage;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The pipeline model against SlotPool, packet by packet, on worker-protocol traces with loss, duplicates,
 * reordering, early retransmissions and probes into both pool versions, exponent-only rounds, and forged, unknown,
 * malformed and unsupported packets, for several jobs at once (k = 64 and 256, int32 and float32, 2 to 32 ranks):
 * every packet the two send is byte-identical, to the same destinations, and every drop has the same reason.
 * Jobs are installed in the model only through PipelineControl writes, as the control plane installs them.
 * <p>
 * The switch forwards a packet of a job it does not hold, unchanged, to the appliance behind it, whose software
 * shards drop it if they do not hold it either: the model is compared with that appliance behind it (a
 * ReferenceAppliance without jobs), which is where an unknown job's drop is counted.
 */
final class TofinoModelDifferentialTest
{
    private static int addr(final int job, final int rank)
    {
        return 0x0A00_0000 | (job << 8) | (rank + 1);
    }

    private static JobImage job(final int jobId, final int world, final int lanes, final int slots, final byte type, final int poolBase,
        final int group)
    {
        return TestJobImages.job(jobId, world, type, lanes, slots, poolBase, group, rank -> addr(jobId, rank));
    }

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3, 20261125})
    void modelMatchesSlotPoolByteForByte(final long seed) throws Exception
    {
        final List<JobImage> jobs = List.of(
            job(1, 4, 64, 8, ElementType.INT32, 0, 1),
            job(2, 3, 256, 6, ElementType.FLOAT32, 8, 2),
            job(3, 32, 64, 4, ElementType.INT32, 14, 3),
            job(4, 2, 256, 3, ElementType.INT32, 18, 4),
            job(5, 1, 64, 2, ElementType.FLOAT32, 21, 5));
        final TofinoModel model = new TofinoModel(WorkerTraces.DATA_PORT);
        final ReferenceAppliance reference = new ReferenceAppliance();
        final ReferenceAppliance behind = new ReferenceAppliance();
        for (final JobImage job : jobs)
        {
            JobInstaller.install(model, job);
            reference.add(job);
        }
        final WorkerTraces traces = new WorkerTraces(seed, jobs, 60, 0.04);
        final int[] compared = new int[2];
        final int fed = traces.run(in ->
        {
            final List<TofinoModel.PacketOut> expected = reference.process(in);
            final List<TofinoModel.PacketOut> actual = throughSwitch(model, behind, in);
            try
            {
                assertSame(expected, actual, in, compared[0]);
            }
            catch (final AssertionError ex)
            {
                throw new AssertionError(ex.getMessage() + " (SlotPool outcome " + reference.lastOutcome + "; model " + model.describeCounters() + ")", ex);
            }
            compared[0]++;
            compared[1] += expected.size();
            return expected;
        }, 2_000_000);
        assertTrue(traces.allFinished(), "seed " + seed + ": every rank got every result");

        for (final DropReason reason : DropReason.values())
        {
            assertEquals(reference.drops(reason), model.drops(reason) + behind.drops(reason), reason.name());
        }
        assertEquals(0, model.drops(DropReason.UNKNOWN_JOB), "the switch drops no packet of a job it does not hold");
        assertEquals(model.events(TofinoModel.Event.PASSED), behind.drops(DropReason.UNKNOWN_JOB),
            "every packet the switch forwarded reached the appliance, which holds none of these jobs either");
        // the traces hit every case of Algorithm 3 and every fault
        assertTrue(reference.outcomes(SlotPool.COMPLETED) > 0 && reference.outcomes(SlotPool.SHADOW_RESULT) > 0 &&
            reference.outcomes(SlotPool.DUPLICATE) > 0 && reference.outcomes(SlotPool.NACK) > 0 &&
            reference.outcomes(SlotPool.PROBE_PENDING) > 0, "outcomes " + Arrays.toString(reference.outcomesArray()));
        assertEquals(reference.outcomes(SlotPool.PROBE_PENDING), model.events(TofinoModel.Event.PROBES_PENDING), "PENDINGs counted");
        assertTrue(traces.pendings() > 0, "the ranks got PENDING answers");
        assertEquals(0, reference.outcomes(SlotPool.MISMATCH) + reference.outcomes(SlotPool.STALE),
            "the traces hold no fault that the switch cannot tell (mismatched or stale contributions)");
        for (final DropReason reason : List.of(DropReason.NOT_MEMBER, DropReason.BAD_TYPE, DropReason.JOB_MISMATCH))
        {
            assertTrue(model.drops(reason) > 0, reason + " exercised");
        }
        assertTrue(behind.drops(DropReason.UNKNOWN_JOB) > 0, "unknown jobs exercised (forwarded, dropped behind the switch)");
        assertTrue(model.events(TofinoModel.Event.RECIRCULATIONS) > 0, "k=256 recirculates");
        System.out.printf("seed %d: %d packets through both, %d output packets byte-identical; outcomes %s; model %s%n", seed, fed,
            compared[1], Arrays.toString(reference.outcomesArray()), model.describeCounters());
    }

    /**
     * The switch, then the appliance behind it for what the switch forwards unchanged (egress port -1).
     */
    private static List<TofinoModel.PacketOut> throughSwitch(final TofinoModel model, final ReferenceAppliance behind,
        final TofinoModel.PacketIn in)
    {
        final List<TofinoModel.PacketOut> out = model.process(in);
        if (out.size() == 1 && out.get(0).egressPort() < 0)
        {
            final TofinoModel.PacketOut forwarded = out.get(0);
            assertTrue(Arrays.equals(forwarded.payload(), Arrays.copyOfRange(in.payload(), in.offset(), in.offset() + in.length())),
                "forwarded unchanged");
            assertEquals(in.dstAddr(), forwarded.dstAddr());
            assertEquals(in.dstPort(), forwarded.dstPort());
            return behind.process(new TofinoModel.PacketIn(in.ingressPort(), in.srcAddr(), in.srcPort(), forwarded.dstAddr(),
                forwarded.dstPort(), forwarded.payload(), 0, forwarded.payload().length));
        }
        return out;
    }

    private static void assertSame(final List<TofinoModel.PacketOut> expected, final List<TofinoModel.PacketOut> actual,
        final TofinoModel.PacketIn in, final int index)
    {
        final Comparator<TofinoModel.PacketOut> order = Comparator.comparingInt(TofinoModel.PacketOut::dstAddr)
            .thenComparingInt(TofinoModel.PacketOut::dstPort);
        final List<TofinoModel.PacketOut> e = new ArrayList<>(expected);
        final List<TofinoModel.PacketOut> a = new ArrayList<>(actual);
        e.sort(order);
        a.sort(order);
        if (e.size() != a.size())
        {
            fail("packet " + index + " " + HexFormat.of().formatHex(in.payload(), in.offset(), Math.min(in.length(), 40)) + ": SlotPool sent " +
                e.size() + " packets, the model " + a.size());
        }
        for (int i = 0; i < e.size(); i++)
        {
            if (e.get(i).dstAddr() != a.get(i).dstAddr() || e.get(i).dstPort() != a.get(i).dstPort() ||
                !Arrays.equals(e.get(i).payload(), a.get(i).payload()))
            {
                fail("packet " + index + " output " + i + " differs:\n SlotPool " + describe(e.get(i)) + "\n model    " + describe(a.get(i)));
            }
        }
    }

    private static String describe(final TofinoModel.PacketOut out)
    {
        return Integer.toHexString(out.dstAddr()) + ":" + out.dstPort() + " " +
            HexFormat.of().formatHex(out.payload(), 0, Math.min(out.payload().length, 56)) + " (" + out.payload().length + " bytes)";
    }
}
