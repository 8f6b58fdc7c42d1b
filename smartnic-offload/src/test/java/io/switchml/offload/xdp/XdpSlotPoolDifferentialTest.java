package io.switchml.offload.xdp;

import io.switchml.appliance.engine.SlotPool;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The XDP program against the reference engine, packet by packet, on the real kernel with BPF_PROG_TEST_RUN: the
 * same seeded traces (several jobs on two shards, int32 and float32, k from 17 to 256, world sizes up to 64, MAC
 * on and off, unicast and multicast results; loss, duplicates, reordering, retransmissions into both pool versions,
 * exponent-only rounds, probes, mismatched chunks, forged and malformed packets, packets of other jobs and other
 * protocols) go through {@link ReferenceShards} ({@code SlotPool} behind the shard's checks) and through the loaded
 * program. Every output packet must be byte-identical, every verdict the one the software's outcome implies, and
 * the program's drop counters must equal the software's by reason.
 * <p>
 * The jumbo traces do the same with the program loaded for k up to 2233 (MTU 9000) and jobs at k = 1024 and 2233:
 * their frames (up to 9014 bytes) reach the program in several buffers, since for an xdp.frags program
 * BPF_PROG_TEST_RUN puts what exceeds {@link BpfTestRun#LINEAR_BYTES} into page-sized fragments. One thing the
 * program cannot do there: grow a packet past its last buffer (bpf_xdp_adjust_tail adds no fragment), so a probe
 * (82 bytes) that SlotPool answers from a shadow copy longer than {@link BpfTestRun#LINEAR_BYTES} gets a NACK
 * instead (counted as tail_grow_failed), which makes the worker resend its update at once, whose answer fits in
 * place; an update of another count that would need to grow is dropped. The test expects exactly that for exactly
 * those packets (the NACK byte for byte), and the SlotPool outcome for all others.
 */
final class XdpSlotPoolDifferentialTest
{
    private static final int[] PORTS = {7471, 7472};
    private static final int GROUP = 0xEFC0000C; // 239.192.0.12

    private XdpProgram program;

    @AfterEach
    void close()
    {
        if (program != null)
        {
            program.close();
        }
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3, 20261124})
    void traceThroughXdpMatchesSlotPool(final long seed) throws BpfException
    {
        loadConfigured(256);
        final List<XdpJobImage> jobs = List.of(
            Traces.job(11, 4, 64, 8, 0, ElementType.INT32, false, 0, PORTS.length),
            Traces.job(12, 3, 256, 6, 8, ElementType.FLOAT32, true, GROUP, PORTS.length),
            Traces.job(13, 64, 17, 5, 14, ElementType.INT32, true, 0, PORTS.length),
            Traces.job(14, 2, 64, 3, 19, ElementType.FLOAT32, false, GROUP + 1, PORTS.length),
            Traces.job(15, 5, 255, 4, 22, ElementType.FLOAT32, true, 0, PORTS.length));
        final long[] delta = runTrace(seed, jobs, 12_000, 20);
        assertEquals(0, delta[XdpLayout.STAT_MULTI_BUFFER], "no frame of k <= 256 needs a second buffer");
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {4, 5})
    void standardMtuTraceThroughXdpMatchesSlotPool(final long seed) throws BpfException
    {
        // the default at MTU 1500: k up to 358, lane loops of up to 6 blocks in the bounded (non-iterator) form
        loadConfigured(XdpLayout.lanesForMtu(1500));
        assertEquals(358, program.maxLanes());
        final List<XdpJobImage> jobs = List.of(
            Traces.job(41, 4, 358, 6, 0, ElementType.INT32, true, 0, PORTS.length),
            Traces.job(42, 3, 358, 5, 6, ElementType.FLOAT32, false, GROUP, PORTS.length),
            Traces.job(43, 5, 300, 5, 11, ElementType.FLOAT32, true, GROUP + 1, PORTS.length),
            Traces.job(44, 2, 64, 4, 16, ElementType.INT32, false, 0, PORTS.length));
        final long[] delta = runTrace(seed, jobs, 12_000, 5);
        assertEquals(0, delta[XdpLayout.STAT_MULTI_BUFFER], "no frame of k <= 358 needs a second buffer");
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {7, 8, 20261126})
    void jumboTraceThroughXdpMatchesSlotPool(final long seed) throws BpfException
    {
        loadConfigured(XdpLayout.lanesForMtu(9000));
        assertEquals(2233, program.maxLanes());
        final List<XdpJobImage> jobs = List.of(
            Traces.job(31, 4, 2233, 6, 0, ElementType.INT32, true, 0, PORTS.length),
            Traces.job(32, 3, 2233, 5, 6, ElementType.FLOAT32, false, GROUP, PORTS.length),
            Traces.job(33, 5, 1024, 5, 11, ElementType.FLOAT32, true, GROUP + 1, PORTS.length),
            Traces.job(34, 2, 1024, 4, 16, ElementType.INT32, false, 0, PORTS.length),
            Traces.job(35, 6, 2233, 4, 20, ElementType.FLOAT32, true, 0, PORTS.length),
            Traces.job(36, 3, 64, 4, 24, ElementType.INT32, true, GROUP + 2, PORTS.length));
        // fewer NACKs: a probe that finds its rank missing is rarer with these world sizes
        final long[] delta = runTrace(seed, jobs, 12_000, 5);
        assertTrue(delta[XdpLayout.STAT_MULTI_BUFFER] > 1000, "frames in several buffers: " + delta[XdpLayout.STAT_MULTI_BUFFER]);
    }

    /** Load the program for k up to maxLanes with 512 slot entries, serving {@link #PORTS}. */
    private void loadConfigured(final int maxLanes) throws BpfException
    {
        program = XdpProgram.load(512, maxLanes);
        program.configure(PORTS, 1);
    }

    /**
     * Run a seeded trace of the jobs (and of one job the program does not know) through the reference and the
     * loaded program, checking each packet, then the counters.
     *
     * @param minNacks NACKs the trace must have produced, to show it exercised them.
     * @return the program's counters accumulated over the trace.
     */
    private long[] runTrace(final long seed, final List<XdpJobImage> jobs, final int steps, final int minNacks) throws BpfException
    {
        final List<XdpJobImage> others = List.of(Traces.job(16, 2, 64, 4, 0, ElementType.INT32, false, 0, PORTS.length));
        final ReferenceShards reference = new ReferenceShards(PORTS);
        for (final XdpJobImage job : jobs)
        {
            program.installJob(job);
            reference.install(job);
        }

        final List<byte[]> trace = new Traces(seed, PORTS).generate(jobs, others, steps);
        final long[] before = program.stats();
        int index = 0;
        long tailFailures = 0;
        long nacksInstead = 0;
        long fragmented = 0;
        for (final byte[] frame : trace)
        {
            final ReferenceShards.Expected expected = reference.onFrame(frame);
            final BpfTestRun.Result actual = program.testRun(frame);
            fragmented += frame.length > BpfTestRun.LINEAR_BYTES ? 1 : 0;
            if (expected.kind() == ReferenceShards.Kind.REPLY && Frames.PAYLOAD + expected.payload().length > growableTo(frame.length))
            {
                tailFailures++;
                if (frame[Frames.PAYLOAD + DataHeaderFlyweight.TYPE_OFFSET] == DataHeaderFlyweight.TYPE_PROBE)
                {
                    nacksInstead++;
                    check(seed, index++, frame, reference.nackInstead(frame), actual);
                    continue;
                }
                assertEquals(BpfTestRun.XDP_DROP, actual.retval(), "seed " + seed + " packet " + index + ": a reply of " +
                    expected.payload().length + " bytes to an update frame of " + frame.length + " cannot grow; expected a drop");
                index++;
                continue;
            }
            check(seed, index++, frame, expected, actual);
        }
        final long[] after = program.stats();
        final long[] delta = new long[after.length];
        for (int i = 0; i < after.length; i++)
        {
            delta[i] = after[i] - before[i];
        }

        for (final DropReason reason : DropReason.values())
        {
            if (reason == DropReason.NONE || reason.ordinal() >= 32)
            {
                continue;
            }
            assertEquals(reference.drops(reason), after[reason.ordinal()] - before[reason.ordinal()],
                "seed " + seed + ": drops counted for " + reason);
        }
        assertEquals(reference.outcomes(SlotPool.COMPLETED), delta(before, after, XdpLayout.STAT_COMPLETED), "completed");
        assertEquals(reference.outcomes(SlotPool.ABSORBED), delta(before, after, XdpLayout.STAT_ABSORBED), "absorbed");
        assertEquals(reference.outcomes(SlotPool.DUPLICATE), delta(before, after, XdpLayout.STAT_DUPLICATES), "duplicates");
        assertEquals(reference.outcomes(SlotPool.STALE), delta(before, after, XdpLayout.STAT_STALE), "stale");
        assertEquals(reference.outcomes(SlotPool.SHADOW_RESULT) - tailFailures, delta(before, after, XdpLayout.STAT_SHADOW_RESULTS), "shadow");
        assertEquals(reference.outcomes(SlotPool.NACK) + nacksInstead, delta(before, after, XdpLayout.STAT_NACKS), "nacks");
        assertEquals(reference.outcomes(SlotPool.PROBE_PENDING), delta(before, after, XdpLayout.STAT_PENDINGS), "pendings");
        assertEquals(tailFailures, delta(before, after, XdpLayout.STAT_TAIL_FAILED), "tail adjustments refused");

        System.out.println("seed " + seed + ": " + trace.size() + " packets (" + fragmented + " longer than the linear buffer, " +
            delta[XdpLayout.STAT_MULTI_BUFFER] + " seen in several buffers by the program) byte-identical through XDP and " +
            "SlotPool but " + tailFailures + " shadow replies too long to grow into (" + nacksInstead + " probes NACKed instead, " +
            (tailFailures - nacksInstead) + " updates dropped); outcomes " +
            "completed=" + reference.outcomes(SlotPool.COMPLETED) + " absorbed=" + reference.outcomes(SlotPool.ABSORBED) +
            " shadow=" + reference.outcomes(SlotPool.SHADOW_RESULT) + " nack=" + reference.outcomes(SlotPool.NACK) +
            " pending=" + reference.outcomes(SlotPool.PROBE_PENDING) + " duplicate=" + reference.outcomes(SlotPool.DUPLICATE) +
            " stale=" + reference.outcomes(SlotPool.STALE) + " mismatch=" + reference.outcomes(SlotPool.MISMATCH));
        // the trace must have exercised what it claims to
        assertTrue(reference.outcomes(SlotPool.COMPLETED) > 150, "completed " + reference.outcomes(SlotPool.COMPLETED));
        assertTrue(reference.outcomes(SlotPool.SHADOW_RESULT) > 20, "shadow results " + reference.outcomes(SlotPool.SHADOW_RESULT));
        assertTrue(reference.outcomes(SlotPool.NACK) > minNacks, "nacks " + reference.outcomes(SlotPool.NACK));
        assertTrue(reference.outcomes(SlotPool.DUPLICATE) > 20, "duplicates " + reference.outcomes(SlotPool.DUPLICATE));
        assertTrue(reference.outcomes(SlotPool.STALE) > 20, "stale " + reference.outcomes(SlotPool.STALE));
        assertTrue(reference.outcomes(SlotPool.MISMATCH) > 5, "mismatches " + reference.outcomes(SlotPool.MISMATCH));
        assertTrue(reference.outcomes(SlotPool.PROBE_PENDING) > 5, "pending probes " + reference.outcomes(SlotPool.PROBE_PENDING));
        for (final DropReason reason : List.of(DropReason.TRUNCATED, DropReason.BAD_TYPE, DropReason.NOT_MEMBER,
            DropReason.JOB_MISMATCH, DropReason.BAD_MAC, DropReason.SLOT_MISMATCH))
        {
            assertTrue(reference.drops(reason) > 0, "trace has no " + reason);
        }
        return delta;
    }

    /**
     * @return the longest frame bpf_xdp_adjust_tail can grow a BPF_PROG_TEST_RUN frame of this length to: the linear
     *     buffer's end, or, for a frame with fragments, the end of its last fragment's page.
     */
    private static int growableTo(final int frameLength)
    {
        if (frameLength <= BpfTestRun.LINEAR_BYTES)
        {
            return BpfTestRun.LINEAR_BYTES;
        }
        final int fragments = (frameLength - BpfTestRun.LINEAR_BYTES + BpfTestRun.FRAGMENT_BYTES - 1) / BpfTestRun.FRAGMENT_BYTES;
        return BpfTestRun.LINEAR_BYTES + fragments * BpfTestRun.FRAGMENT_BYTES;
    }

    @Test
    void violationIsRecordedForTheJavaSide() throws BpfException
    {
        program = XdpProgram.load(64, 256);
        program.configure(new int[] {7471}, 1);
        final XdpJobImage job = Traces.job(21, 2, 64, 4, 0, ElementType.INT32, false, 0, 1);
        program.installJob(job);
        final Traces traces = new Traces(5, new int[] {7471});
        final Traces.Stream stream = traces.new Stream(job);
        assertEquals(BpfTestRun.XDP_DROP, program.testRun(stream.update(0, 0, 0)).retval());
        final byte[] other = stream.update(1, 0, 0);
        // rank 1 sends chunk 0 with one element fewer: a different tensor at the same place of the stream
        final byte[] datagram = Frames.payload(other);
        final int count = Frames.getShort(datagram, DataHeaderFlyweight.ELEMENT_COUNT_OFFSET) - 1;
        Frames.putShort(datagram, DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, count);
        final byte[] frame = Frames.udp(Frames.srcAddress(other), Frames.srcPort(other), Traces.APPLIANCE, 7471, datagram,
            DataHeaderFlyweight.packetLength(count));
        assertEquals(BpfTestRun.XDP_DROP, program.testRun(frame).retval());
        final XdpProgram.Violation violation = program.violation(21);
        assertEquals(1, violation.rank());
        assertEquals(0, violation.slot());
        assertEquals(0, violation.chunkSequence());
        assertEquals(count, violation.elementCount());
    }

    private static long delta(final long[] before, final long[] after, final int index)
    {
        return after[index] - before[index];
    }

    private static void check(
        final long seed, final int index, final byte[] frame, final ReferenceShards.Expected expected, final BpfTestRun.Result actual)
    {
        final String where = "seed " + seed + " packet " + index + " (" + HexFormat.of().formatHex(Frames.payload(frame), 0,
            Math.min(40, Frames.payload(frame).length)) + "): expected " + expected.kind() + " outcome " + expected.outcome() +
            " drop " + expected.dropReason();
        final byte[] out = actual.data();
        switch (expected.kind())
        {
            case PASS_UNCHANGED ->
            {
                assertEquals(BpfTestRun.XDP_PASS, actual.retval(), where);
                assertArrayEquals(frame, out, where);
            }
            case DROP -> assertEquals(BpfTestRun.XDP_DROP, actual.retval(), where);
            case RESULT_UP ->
            {
                assertEquals(BpfTestRun.XDP_PASS, actual.retval(), where);
                assertArrayEquals(expected.payload(), Frames.payload(out), where);
                assertEquals(Frames.srcAddress(frame), Frames.srcAddress(out), where);
                assertEquals(Frames.srcPort(frame), Frames.srcPort(out), where);
                assertEquals(Frames.dstPort(frame), Frames.dstPort(out), where);
                assertEquals(0, Frames.udpChecksum(out), where);
            }
            case RESULT_MULTICAST ->
            {
                assertEquals(BpfTestRun.XDP_TX, actual.retval(), where);
                assertArrayEquals(expected.payload(), Frames.payload(out), where);
                final int group = Frames.dstAddress(out);
                assertEquals(0xEF, group >>> 24, where);
                assertEquals(Traces.APPLIANCE, Frames.srcAddress(out), where);
                assertEquals(Frames.dstPort(frame), Frames.srcPort(out), where);
                assertEquals(8471 + (Frames.dstPort(frame) - PORTS[0]), Frames.dstPort(out), where);
                assertArrayEquals(new byte[] {0x01, 0x00, 0x5e, (byte)((group >>> 16) & 0x7F), (byte)(group >>> 8), (byte)group},
                    Frames.dstMac(out), where);
                assertEquals(1, Frames.ttl(out), where);
                assertEquals(Frames.ipChecksum(out), Frames.getShort(out, Frames.ETH + 10), where);
            }
            case REPLY ->
            {
                assertEquals(BpfTestRun.XDP_TX, actual.retval(), where);
                assertArrayEquals(expected.payload(), Frames.payload(out), where);
                assertEquals(Frames.srcAddress(frame), Frames.dstAddress(out), where);
                assertEquals(Frames.srcPort(frame), Frames.dstPort(out), where);
                assertEquals(Frames.dstAddress(frame), Frames.srcAddress(out), where);
                assertEquals(Frames.dstPort(frame), Frames.srcPort(out), where);
                assertArrayEquals(Frames.srcMac(frame), Frames.dstMac(out), where);
                assertEquals(Frames.PAYLOAD - Frames.ETH + expected.payload().length, Frames.ipTotalLength(out), where);
                assertEquals(Frames.ipChecksum(out), Frames.getShort(out, Frames.ETH + 10), where);
                assertEquals(Frames.PAYLOAD + expected.payload().length, out.length, where);
            }
        }
    }
}
