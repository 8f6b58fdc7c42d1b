package io.switchml.offload.xdp;

import io.switchml.appliance.backend.BackendException;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;

/**
 * The xdp backend's health, from its monitor thread: whether the program is still attached, and putting it back when
 * it was taken off. When the program is off the interface (detached, replaced, or lost with an interface that was
 * deleted) the backend fails: its running jobs are aborted naming the reason and new jobs go to the next backend.
 * With {@code reattach=on} the same program, maps and all, goes back on the interface once no job of the backend is
 * installed in it any more, the interface exists (looked up by name: a re-created one has a new ifindex), its MTU
 * still carries the k the backend announced, it has no XDP program (someone else's is never replaced) and a hold-down
 * has passed: {@link #HOLD_DOWN_NS} after a failure, doubled for each failure within {@link #FLAP_WINDOW_NS} of the
 * last re-attach and for each attempt the kernel refused, up to {@link #MAX_HOLD_DOWN_NS}, so that a tool that keeps
 * taking it off is not fought at the monitor's pace. Until then the failure's reason says what it waits for; each
 * re-attach is logged and counted. An MTU lowered under the attached program below what the announced k needs fails
 * the backend too (its jobs' updates would no longer fit a frame), until it is back. A query of the interface that fails is tried again at the next round; only
 * {@link #QUERY_FAILURES} in a row fail the backend, and if the program is then found attached after all, it is up
 * again without a re-attach. A failure to read the maps is not mended this way.
 * <p>
 * {@link #check} and {@link #fail} run on the monitor thread only; {@link #health()} is read by control threads.
 * The kernel is reached through {@link Kernel} and time through a clock, so that the rules are unit-tested with fakes
 * (the backend's own tests run them against a real veth).
 */
final class AttachmentWatch
{
    /**
     * What the watch asks of the kernel about the interface and the XDP program on it.
     */
    interface Kernel
    {
        /**
         * @return whether the interface exists in this network namespace now.
         */
        boolean interfaceExists() throws BpfException;

        /**
         * @return the interface's MTU.
         */
        int mtu() throws BackendException;

        /**
         * @return the XDP program attached to the interface, if any.
         */
        Optional<XdpAttachment.AttachedProgram> attachedProgram() throws BpfException;

        /**
         * Attach our program again, only if the interface has none.
         */
        void reattach() throws BpfException;

        /**
         * @return whether our attachment was let go (closed, or the JVM is shutting down): a missing program is then
         * the shutdown, not a failure, and nothing is attached again.
         */
        boolean released();
    }

    /** Wait after a failure before the program is put back. */
    static final long HOLD_DOWN_NS = 1_000_000_000L;
    /** A failure this soon after a re-attach doubles the hold-down. */
    static final long FLAP_WINDOW_NS = 60_000_000_000L;
    /** The longest hold-down. */
    static final long MAX_HOLD_DOWN_NS = 60_000_000_000L;
    /** Failed queries of the interface in a row that fail the backend. */
    static final int QUERY_FAILURES = 5;

    private final String interfaceName;
    private final int programId;
    private final Kernel kernel;
    private final int maxLanes;
    private final boolean reattach;
    private final IntSupplier installedJobs;
    private final AtomicCounter reattachments;
    private final Consumer<String> log;
    private final LongSupplier clock;
    private volatile String health;
    private String cause;
    private boolean recoverable;
    private String waitingFor;
    private int queryFailures;
    private long failedNs;
    private long nextAttemptNs;
    private long holdDownNs = HOLD_DOWN_NS;
    private long lastReattachNs;
    private boolean reattachedBefore;

    /**
     * @param interfaceName the interface, for messages.
     * @param programId     our program's id: it keeps its id when it is attached again.
     * @param kernel        the interface and the program on it.
     * @param maxLanes      the k the backend announced: an MTU that no longer carries it keeps the program off.
     * @param reattach      whether to put the program back at all.
     * @param installedJobs the backend's jobs installed in the program and not yet released.
     * @param reattachments counts the re-attaches (the backend's counter, in the counters file).
     * @param log           the appliance's log.
     * @param clock         {@link System#nanoTime()} or a test's.
     */
    AttachmentWatch(
        final String interfaceName,
        final int programId,
        final Kernel kernel,
        final int maxLanes,
        final boolean reattach,
        final IntSupplier installedJobs,
        final AtomicCounter reattachments,
        final Consumer<String> log,
        final LongSupplier clock)
    {
        this.interfaceName = interfaceName;
        this.programId = programId;
        this.kernel = kernel;
        this.maxLanes = maxLanes;
        this.reattach = reattach;
        this.installedJobs = installedJobs;
        this.reattachments = reattachments;
        this.log = log;
        this.clock = clock;
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
        final long count = reattachments.get();
        return (count > 0 ? " reattachments=" + count : "") + (failure != null ? "; FAILED: " + failure : "");
    }

    /**
     * The monitor's round, after the counters were copied: while healthy, check that the program is still attached;
     * while failed, put it back when it can be.
     */
    void check()
    {
        if (health == null)
        {
            checkAttached();
        }
        else if (recoverable)
        {
            maybeReattach(clock.getAsLong());
        }
    }

    private void checkAttached()
    {
        try
        {
            if (!kernel.interfaceExists())
            {
                fail(interfaceName + " is gone (deleted, or moved to another network namespace)", true);
                return;
            }
            final Optional<XdpAttachment.AttachedProgram> attached = kernel.attachedProgram();
            queryFailures = 0;
            if (attached.isEmpty())
            {
                fail("program detached from " + interfaceName, true);
            }
            else if (attached.get().id() != programId)
            {
                fail("program on " + interfaceName + " replaced by id " + attached.get().id() + " (" +
                    attached.get().describeName() + ")", true);
            }
            else
            {
                final String smaller = mtuShortfall();
                if (smaller != null)
                {
                    fail(smaller, true);   // updates of the announced k no longer fit one frame: jobs would stall
                }
            }
        }
        catch (final BackendException ex)
        {
            fail("cannot read " + interfaceName + "'s MTU: " + ex.getMessage(), true);
        }
        catch (final BpfException | RuntimeException ex)
        {
            if (++queryFailures >= QUERY_FAILURES)
            {
                fail("querying " + interfaceName + "'s XDP program failed " + queryFailures + " times in a row: " +
                    ex.getMessage(), true);
            }
        }
    }

    /**
     * Report the backend failed, once: unless the attachment was let go meanwhile (closed, or the JVM's shutdown hook
     * detaching it), where a missing program or unreadable maps are the shutdown, not a failure.
     *
     * @param canRecover whether putting the program back would mend it (it is off the interface, not broken).
     */
    void fail(final String reason, final boolean canRecover)
    {
        if (health != null || kernel.released())
        {
            return;
        }
        final long nowNs = clock.getAsLong();
        holdDownNs = reattachedBefore && nowNs - lastReattachNs < FLAP_WINDOW_NS ?
            Math.min(MAX_HOLD_DOWN_NS, holdDownNs * 2) : HOLD_DOWN_NS;
        failedNs = nowNs;
        nextAttemptNs = nowNs + holdDownNs;
        cause = reason;
        waitingFor = null;
        queryFailures = 0;
        recoverable = canRecover && reattach;
        health = reason;
        log.accept("xdp: backend failed: " + reason + "; its jobs are aborted and new jobs go to the next backend" +
            (recoverable ? "; the program is put back once no job of this backend is installed in it and " +
                interfaceName + " has no XDP program, " + holdDownNs / 1_000_000 + " ms from now at the earliest" :
                canRecover ? "; reattach=off: it stays down until the appliance restarts" : ""));
    }

    /**
     * Put the program back on the interface if nothing stands in the way and the hold-down has passed; else say
     * what it waits for in the failure's reason (once per change, in the log too).
     */
    private void maybeReattach(final long nowNs)
    {
        if (nowNs - nextAttemptNs < 0 || kernel.released())
        {
            return;
        }
        final int installed = installedJobs.getAsInt();
        if (installed > 0)
        {
            // the failure aborts them and the abort releases them, normally well within the hold-down
            waitFor("waiting for " + installed + " job" + (installed == 1 ? "" : "s") + " installed in the program to be released");
            return;
        }
        final Optional<XdpAttachment.AttachedProgram> attached;
        try
        {
            if (!kernel.interfaceExists())
            {
                waitFor("waiting for " + interfaceName + " to exist");
                return;
            }
            final String smaller = mtuShortfall();
            if (smaller != null)
            {
                waitFor(smaller);
                return;
            }
            attached = kernel.attachedProgram();
        }
        catch (final BpfException | BackendException | RuntimeException ex)
        {
            waitFor("cannot check " + interfaceName + ": " + ex.getMessage());
            return;
        }
        if (attached.isPresent() && attached.get().id() == programId)
        {
            up("found " + XdpLayout.PROGRAM_NAME + " (id " + programId + ") attached to " + interfaceName +
                " again " + (nowNs - failedNs) / 1_000_000 + " ms after it failed (" + cause + ")");
            return;
        }
        if (attached.isPresent())
        {
            waitFor(interfaceName + " has XDP program id " + attached.get().id() + " (" + attached.get().describeName() +
                "), which is never replaced: waiting for it to go");
            return;
        }
        try
        {
            kernel.reattach();
            final Optional<XdpAttachment.AttachedProgram> now = kernel.attachedProgram();
            if (now.isEmpty() || now.get().id() != programId)
            {
                throw new BpfException(interfaceName + " shows " + now.map(p -> "program id " + p.id()).orElse("no program") +
                    " right after attaching id " + programId);
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
        up("re-attached " + XdpLayout.PROGRAM_NAME + " (id " + programId + ") to " + interfaceName + " in native mode " +
            (nowNs - failedNs) / 1_000_000 + " ms after it failed (" + cause + ")");
    }

    /**
     * @return why the interface's MTU no longer carries the k the backend announced, or null when it does.
     */
    private String mtuShortfall() throws BackendException
    {
        final int mtu = kernel.mtu();
        if (XdpLayout.lanesForMtu(mtu) >= maxLanes)
        {
            return null;
        }
        return interfaceName + "'s MTU is " + mtu + ", which carries k up to " + Math.max(0, XdpLayout.lanesForMtu(mtu)) +
            ", below the " + maxLanes + " this backend announced (restore the MTU, or restart the appliance to take the new one)";
    }

    private void up(final String what)
    {
        health = null;
        waitingFor = null;
        log.accept("xdp: " + what + "; new jobs can be placed on xdp again");
    }

    private void waitFor(final String blocker)
    {
        if (blocker.equals(waitingFor) || blocker.equals(cause))
        {
            return;   // said already, or the failure's own reason says it
        }
        waitingFor = blocker;
        health = cause + "; not re-attached: " + blocker;
        log.accept("xdp: not re-attached yet: " + blocker);
    }
}
