package io.switchml.offload.xdp;

import io.switchml.appliance.backend.BackendException;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.IntSupplier;

/**
 * The xdp backend's health, from its monitor thread: whether the program is still attached, and putting it back when
 * it was taken off. When the program is off the interface (detached, replaced, or lost with an interface that was
 * deleted) the backend fails: its running jobs are aborted naming the reason and new jobs go to the next backend.
 * With {@code reattach=on} the same program, maps and all, goes back on the interface once no job of the backend is
 * installed in it any more, the interface exists (looked up by name: a re-created one has a new ifindex), its MTU
 * still carries the k the backend announced, it has no XDP program (someone else's is never replaced) and a hold-down
 * has passed: {@link #HOLD_DOWN_NS} after a failure, doubled for each failure within {@link #FLAP_WINDOW_NS} of the
 * last re-attach, up to {@link #MAX_HOLD_DOWN_NS}, so that a tool that keeps taking it off is not fought at the
 * monitor's pace. Until then the failure's reason says what it waits for; each re-attach is logged and counted. A
 * failure to read the maps is not mended this way.
 * <p>
 * {@link #check} and {@link #fail} run on the monitor thread only; {@link #health()} is read by control threads.
 */
final class AttachmentWatch
{
    /** Wait after a failure before the program is put back. */
    static final long HOLD_DOWN_NS = 1_000_000_000L;
    /** A failure this soon after a re-attach doubles the hold-down. */
    static final long FLAP_WINDOW_NS = 60_000_000_000L;
    static final long MAX_HOLD_DOWN_NS = 60_000_000_000L;

    private final String interfaceName;
    private final XdpAttachment attachment;
    private final int programFd;
    private final int maxLanes;
    private final boolean reattach;
    private final IntSupplier installedJobs;
    private final AtomicCounter reattachments;
    private final Consumer<String> log;
    private volatile String health;
    private String cause;
    private boolean recoverable;
    private String waitingFor;
    private long failedNs;
    private long nextAttemptNs;
    private long holdDownNs = HOLD_DOWN_NS;
    private long lastReattachNs;
    private boolean reattachedBefore;

    /**
     * @param programFd     the loaded program, put back as it is.
     * @param maxLanes      the k the backend announced: an MTU that no longer carries it keeps the program off.
     * @param reattach      whether to put the program back at all.
     * @param installedJobs the backend's jobs installed in the program and not yet released.
     * @param reattachments counts each re-attach.
     * @param log           the appliance's log.
     */
    AttachmentWatch(final String interfaceName, final XdpAttachment attachment, final int programFd, final int maxLanes,
        final boolean reattach, final IntSupplier installedJobs, final AtomicCounter reattachments, final Consumer<String> log)
    {
        this.interfaceName = interfaceName;
        this.attachment = attachment;
        this.programFd = programFd;
        this.maxLanes = maxLanes;
        this.reattach = reattach;
        this.installedJobs = installedJobs;
        this.reattachments = reattachments;
        this.log = log;
    }

    /**
     * @return null while healthy, else why not (and, while the program waits to be put back, for what).
     */
    String health()
    {
        return health;
    }

    /**
     * @return what {@link XdpBackend#describe()} adds: the re-attaches so far and the failure, if any.
     */
    String describe()
    {
        final String failure = health;
        return (reattachments.get() > 0 ? " reattachments=" + reattachments.get() : "") + (failure != null ? "; FAILED: " + failure : "");
    }

    /**
     * The monitor's round, after the counters were copied: while healthy, check that the program is still attached;
     * while failed, put it back when it can be.
     */
    void check(final long nowNs)
    {
        if (health == null)
        {
            checkAttached();
        }
        else if (recoverable)
        {
            maybeReattach(nowNs);
        }
    }

    private void checkAttached()
    {
        try
        {
            if (!Libbpf.interfaceExists(interfaceName))
            {
                fail(interfaceName + " is gone (deleted, or moved to another network namespace)", true);
                return;
            }
            final Optional<XdpAttachment.AttachedProgram> attached = XdpAttachment.query(interfaceName);
            if (attached.isEmpty())
            {
                fail("program detached from " + interfaceName, true);
            }
            else if (attached.get().id() != attachment.programId())
            {
                fail("program on " + interfaceName + " replaced by id " + attached.get().id() + " (" +
                    attached.get().describeName() + ")", true);
            }
        }
        catch (final BpfException | RuntimeException ex)
        {
            fail("querying " + interfaceName + "'s XDP program failed: " + ex.getMessage(), true);
        }
    }

    /**
     * Report the backend failed, once: unless the attachment was let go meanwhile (close(), or the JVM's shutdown hook
     * detaching it), where a missing program or unreadable maps are the shutdown, not a failure.
     *
     * @param canRecover whether putting the program back would mend it (it is off the interface, not broken).
     */
    void fail(final String reason, final boolean canRecover)
    {
        if (health != null || attachment.isDetached())
        {
            return;
        }
        final long nowNs = System.nanoTime();
        holdDownNs = reattachedBefore && nowNs - lastReattachNs < FLAP_WINDOW_NS ?
            Math.min(MAX_HOLD_DOWN_NS, holdDownNs * 2) : HOLD_DOWN_NS;
        failedNs = nowNs;
        nextAttemptNs = nowNs + holdDownNs;
        cause = reason;
        waitingFor = null;
        recoverable = canRecover && reattach;
        health = reason;
        log.accept("xdp: backend failed: " + reason + "; its jobs are aborted and new jobs go to the next backend" +
            (recoverable ? "; the program is put back once no job of this backend runs and " + interfaceName +
                " has no XDP program, " + holdDownNs / 1_000_000 + " ms from now at the earliest" :
                canRecover ? "; reattach=off: it stays down until the appliance restarts" : ""));
    }

    /**
     * Put the program back on the interface if nothing stands in the way and the hold-down has passed; else say
     * what it waits for in the failure's reason (once per change, in the log too).
     */
    private void maybeReattach(final long nowNs)
    {
        if (nowNs - nextAttemptNs < 0 || installedJobs.getAsInt() > 0)
        {
            return;   // the jobs that ran on it are being aborted: the next poll of the registry does it
        }
        final String blocker;
        try
        {
            blocker = reattachBlocker();
        }
        catch (final BpfException | RuntimeException ex)
        {
            waitFor("cannot check " + interfaceName + ": " + ex.getMessage());
            return;
        }
        if (blocker != null)
        {
            waitFor(blocker);
            return;
        }
        try
        {
            attachment.reattach(programFd);
            final Optional<XdpAttachment.AttachedProgram> attached = XdpAttachment.query(interfaceName);
            if (attached.isEmpty() || attached.get().id() != attachment.programId())
            {
                throw new BpfException(interfaceName + " shows " + attached.map(p -> "program id " + p.id()).orElse("no program") +
                    " right after attaching id " + attachment.programId());
            }
        }
        catch (final BpfException | RuntimeException ex)
        {
            nextAttemptNs = nowNs + holdDownNs;
            holdDownNs = Math.min(MAX_HOLD_DOWN_NS, holdDownNs * 2);
            waitFor("re-attaching failed (next try in " + (nextAttemptNs - nowNs) / 1_000_000 + " ms or later): " + ex.getMessage());
            return;
        }
        reattachedBefore = true;
        lastReattachNs = nowNs;
        reattachments.increment();
        health = null;
        log.accept("xdp: re-attached " + XdpLayout.PROGRAM_NAME + " (id " + attachment.programId() + ") to " +
            interfaceName + " in native mode " + (nowNs - failedNs) / 1_000_000 + " ms after it failed (" + cause +
            "); new jobs can be placed on xdp again");
    }

    /**
     * @return what keeps the program from being put back now, or null when nothing does.
     */
    private String reattachBlocker() throws BpfException
    {
        if (!Libbpf.interfaceExists(interfaceName))
        {
            return "waiting for " + interfaceName + " to exist";
        }
        final int mtu;
        try
        {
            mtu = XdpBackend.readMtu(interfaceName);
        }
        catch (final BackendException ex)
        {
            return ex.getMessage();
        }
        if (XdpLayout.lanesForMtu(mtu) < maxLanes)
        {
            return interfaceName + "'s MTU is " + mtu + ", which carries k up to " + Math.max(0, XdpLayout.lanesForMtu(mtu)) +
                ", below the " + maxLanes + " this backend announced (restore the MTU, or restart the appliance to take the new one)";
        }
        final Optional<XdpAttachment.AttachedProgram> other = XdpAttachment.query(interfaceName);
        if (other.isPresent())
        {
            return interfaceName + " has XDP program id " + other.get().id() + " (" + other.get().describeName() +
                "), which is never replaced: waiting for it to go";
        }
        return null;
    }

    private void waitFor(final String blocker)
    {
        if (blocker.equals(waitingFor))
        {
            return;
        }
        waitingFor = blocker;
        health = cause + "; not re-attached: " + blocker;
        log.accept("xdp: not re-attached yet: " + blocker);
    }
}
