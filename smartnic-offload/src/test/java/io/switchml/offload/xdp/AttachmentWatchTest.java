package io.switchml.offload.xdp;

import io.switchml.appliance.backend.BackendException;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersReader;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The rules of {@link AttachmentWatch} with a fake kernel and a fake clock: when the backend fails, when its program
 * goes back, the hold-down and its doubling, and what the reason says meanwhile. XdpPlacementTest runs the same
 * watch against a real veth.
 */
final class AttachmentWatchTest
{
    private static final int OURS = 41;
    private static final long MS = 1_000_000L;

    /** The interface and its program as the watch sees them; our program's id is {@link #OURS}. */
    private static final class FakeKernel implements AttachmentWatch.Kernel
    {
        boolean exists = true;
        int mtu = 1500;
        Integer attached = OURS;
        boolean released;
        int queryFailuresLeft;
        boolean refuseAttach;
        int reattachCalls;

        public boolean interfaceExists()
        {
            return exists;
        }

        public int mtu() throws BackendException
        {
            if (!exists)
            {
                throw new BackendException("no mtu");
            }
            return mtu;
        }

        public Optional<XdpAttachment.AttachedProgram> attachedProgram() throws BpfException
        {
            if (queryFailuresLeft > 0)
            {
                queryFailuresLeft--;
                throw new BpfException("bpf_xdp_query_id(eth9): Resource temporarily unavailable");
            }
            return attached == null ? Optional.empty() :
                Optional.of(new XdpAttachment.AttachedProgram(attached, attached == OURS ? "switchml_xdp" : "xdp_pass", XdpMode.NATIVE));
        }

        public void reattach() throws BpfException
        {
            reattachCalls++;
            if (refuseAttach || attached != null)
            {
                throw new BpfException("bpf_xdp_attach(eth9, native, only if none): Device or resource busy");
            }
            attached = OURS;
        }

        public boolean released()
        {
            return released;
        }
    }

    private final FakeKernel kernel = new FakeKernel();
    private final List<String> log = new ArrayList<>();
    private long nowNs = 5_000 * MS;
    private int installedJobs;
    private final AtomicCounter reattachments =
        new AtomicCounter(new UnsafeBuffer(ByteBuffer.allocateDirect(CountersReader.COUNTER_LENGTH)), 0);

    private AttachmentWatch watch(final boolean reattach)
    {
        return new AttachmentWatch("eth9", OURS, kernel, 358, reattach, () -> installedJobs, reattachments, log::add, () -> nowNs);
    }

    /** Run the monitor's rounds, 200 ms apart. */
    private void rounds(final AttachmentWatch watch, final int count)
    {
        for (int round = 0; round < count; round++)
        {
            nowNs += 200 * MS;
            watch.check();
        }
    }

    /** Take the program off, let the watch see it, and return when it failed. */
    private long takeOff(final AttachmentWatch watch)
    {
        kernel.attached = null;
        watch.check();
        assertEquals("program detached from eth9", watch.health());
        return nowNs;
    }

    /** Advance the clock in monitor rounds until the program is back; return how long it took. */
    private long untilBack(final AttachmentWatch watch)
    {
        final long fromNs = nowNs;
        for (int round = 0; round < 10_000 && watch.health() != null; round++)
        {
            nowNs += 200 * MS;
            watch.check();
        }
        assertNull(watch.health(), log::toString);
        return nowNs - fromNs;
    }

    @Test
    void aHealthyProgramIsLeftAlone()
    {
        final AttachmentWatch watch = watch(true);
        rounds(watch, 10);
        assertNull(watch.health());
        assertEquals(0, kernel.reattachCalls);
        assertTrue(log.isEmpty(), log::toString);
    }

    @Test
    void aDetachedProgramGoesBackAfterTheHoldDownAndIsCounted()
    {
        final AttachmentWatch watch = watch(true);
        takeOff(watch);
        nowNs += AttachmentWatch.HOLD_DOWN_NS - 1;
        watch.check();
        assertEquals(0, kernel.reattachCalls, "before the hold-down");
        nowNs += 1;
        watch.check();
        assertNull(watch.health());
        assertEquals(OURS, kernel.attached);
        assertEquals(1, reattachments.get());
        assertEquals("xdp: re-attached switchml_xdp (id 41) to eth9 in native mode 1000 ms after it failed (program detached " +
            "from eth9); new jobs can be placed on xdp again", log.getLast());
        assertEquals(" reattachments=1", watch.describe());
    }

    @Test
    void eachFailureWithinAMinuteOfTheLastReattachDoublesTheHoldDownUpToAMinute()
    {
        final AttachmentWatch watch = watch(true);
        final List<Long> holdDownsMs = new ArrayList<>();
        for (int failure = 0; failure < 9; failure++)
        {
            takeOff(watch);
            holdDownsMs.add(untilBack(watch) / MS);
        }
        // the monitor's rounds are 200 ms: each hold-down is seen at the first round at or after it
        assertEquals(List.of(1000L, 2000L, 4000L, 8000L, 16000L, 32000L, 60000L, 60000L, 60000L), holdDownsMs);
        assertTrue(log.stream().anyMatch(line -> line.endsWith("60000 ms from now at the earliest")), log::toString);
    }

    @Test
    void aFailureAMinuteAfterTheLastReattachStartsAgainAtOneSecond()
    {
        final AttachmentWatch watch = watch(true);
        takeOff(watch);
        untilBack(watch);
        takeOff(watch);
        assertEquals(2000, untilBack(watch) / MS);
        nowNs += AttachmentWatch.FLAP_WINDOW_NS;
        takeOff(watch);
        assertEquals(1000, untilBack(watch) / MS);
    }

    @Test
    void anotherProgramIsNeverReplacedAndTheReasonNamesIt()
    {
        final AttachmentWatch watch = watch(true);
        kernel.attached = 77;
        watch.check();
        assertEquals("program on eth9 replaced by id 77 (xdp_pass)", watch.health());
        rounds(watch, 50);
        assertEquals(0, kernel.reattachCalls);
        assertEquals(77, kernel.attached);
        assertEquals("program on eth9 replaced by id 77 (xdp_pass); not re-attached: eth9 has XDP program id 77 (xdp_pass), " +
            "which is never replaced: waiting for it to go", watch.health());
        assertEquals(1, log.stream().filter(line -> line.startsWith("xdp: not re-attached yet")).count(), "logged once: " + log);

        kernel.attached = null;
        rounds(watch, 1);
        assertNull(watch.health());
        assertEquals(OURS, kernel.attached);
    }

    @Test
    void installedJobsKeepItOffAndTheReasonSaysSo()
    {
        final AttachmentWatch watch = watch(true);
        installedJobs = 2;
        takeOff(watch);
        nowNs += 5 * AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertEquals("program detached from eth9; not re-attached: waiting for 2 jobs installed in the program to be released",
            watch.health());
        assertEquals(0, kernel.reattachCalls);
        installedJobs = 0;
        watch.check();
        assertNull(watch.health());
    }

    @Test
    void aLostInterfaceGoesBackWhenItReturnsWithAnMtuThatCarriesTheAnnouncedK()
    {
        final AttachmentWatch watch = watch(true);
        kernel.exists = false;
        kernel.attached = null;
        watch.check();
        assertEquals("eth9 is gone (deleted, or moved to another network namespace)", watch.health());
        nowNs += AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertTrue(watch.health().endsWith("; not re-attached: waiting for eth9 to exist"), watch.health());

        kernel.exists = true;
        kernel.mtu = 1000;
        watch.check();
        assertTrue(watch.health().endsWith("; not re-attached: eth9's MTU is 1000, which carries k up to 233, below the 358 " +
            "this backend announced (restore the MTU, or restart the appliance to take the new one)"), watch.health());
        assertEquals(0, kernel.reattachCalls);

        kernel.mtu = 1500;
        watch.check();
        assertNull(watch.health());
        assertEquals(1, kernel.reattachCalls);
    }

    @Test
    void anMtuLoweredUnderTheProgramFailsTheBackendUntilItIsBackWithoutAReattach()
    {
        final AttachmentWatch watch = watch(true);
        kernel.mtu = 1400;   // (1400 - 68) / 4 = 333 lanes
        watch.check();
        final String reason = "eth9's MTU is 1400, which carries k up to 333, below the 358 this backend announced (restore " +
            "the MTU, or restart the appliance to take the new one)";
        assertEquals(reason, watch.health());
        nowNs += AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertEquals(reason, watch.health(), "the failure's reason says what it waits for");
        kernel.mtu = 1500;
        rounds(watch, 1);
        assertNull(watch.health());
        assertEquals(0, kernel.reattachCalls, "the program never left");
        assertTrue(log.getLast().startsWith("xdp: found switchml_xdp (id 41) attached to eth9 again"), log::toString);
    }

    @Test
    void anAttachTheKernelRefusesIsTriedAgainAtADoubledInterval()
    {
        final AttachmentWatch watch = watch(true);
        kernel.refuseAttach = true;
        takeOff(watch);
        nowNs += AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertEquals(1, kernel.reattachCalls);
        assertTrue(watch.health().contains("not re-attached: re-attaching failed (next try in 1000 ms or later): " +
            "bpf_xdp_attach(eth9, native, only if none): Device or resource busy"), watch.health());
        nowNs += AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertEquals(2, kernel.reattachCalls);
        assertTrue(watch.health().contains("(next try in 2000 ms or later)"), watch.health());
        kernel.refuseAttach = false;
        nowNs += 2 * AttachmentWatch.HOLD_DOWN_NS - 1;
        watch.check();
        assertEquals(2, kernel.reattachCalls, "before the doubled interval");
        nowNs += 1;
        watch.check();
        assertNull(watch.health());
    }

    @Test
    void queriesThatFailAreToleratedUntilFiveInARowAndAProgramStillAttachedIsUpWithoutAReattach()
    {
        final AttachmentWatch watch = watch(true);
        kernel.queryFailuresLeft = AttachmentWatch.QUERY_FAILURES - 1;
        for (int round = 0; round < AttachmentWatch.QUERY_FAILURES; round++)
        {
            watch.check();
        }
        assertNull(watch.health(), "four failed queries and a good one in a row fail nothing");

        kernel.queryFailuresLeft = AttachmentWatch.QUERY_FAILURES;
        for (int round = 0; round < AttachmentWatch.QUERY_FAILURES; round++)
        {
            watch.check();
        }
        assertEquals("querying eth9's XDP program failed 5 times in a row: bpf_xdp_query_id(eth9): Resource temporarily " +
            "unavailable", watch.health());
        nowNs += AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertNull(watch.health(), log::toString);
        assertEquals(0, kernel.reattachCalls);
        assertEquals(0, reattachments.get());
        assertTrue(log.getLast().startsWith("xdp: found switchml_xdp (id 41) attached to eth9 again 1000 ms after it failed"), log::toString);
    }

    @Test
    void withReattachOffItStaysDown()
    {
        final AttachmentWatch watch = watch(false);
        takeOff(watch);
        kernel.attached = null;
        rounds(watch, 100);
        assertEquals("program detached from eth9", watch.health());
        assertEquals(0, kernel.reattachCalls);
        assertTrue(log.getLast().endsWith("; reattach=off: it stays down until the appliance restarts"), log::toString);
    }

    @Test
    void aReleasedAttachmentIsTheShutdownNotAFailure()
    {
        final AttachmentWatch watch = watch(true);
        kernel.released = true;
        kernel.attached = null;
        watch.check();
        assertNull(watch.health());

        kernel.released = false;
        watch.check();
        assertEquals("program detached from eth9", watch.health());
        kernel.released = true;
        nowNs += 10 * AttachmentWatch.HOLD_DOWN_NS;
        watch.check();
        assertEquals(0, kernel.reattachCalls, "attached again while shutting down");
    }
}
