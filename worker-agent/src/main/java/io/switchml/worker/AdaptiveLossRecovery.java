package io.switchml.worker;

/**
 * The default {@link LossRecovery}: a retransmission timer per slot over an RFC 6298 estimate and, with fast
 * retransmission on, RACK-like probes of holes behind later results and a tail-loss probe of a silent stream; built so
 * that a busy host (the normal case on a training host: its cores feed the GPUs and run the data loader) does not
 * pass for a lossy network.
 * <p>
 * <b>Timer.</b> RTO = SRTT + 4 RTTVAR over round trips of packets sent once (Karn's rule), clamped to the configured
 * minimum and maximum. A result that comes after the result of a slot sent later gives no sample: results return in
 * the order sent, so it waited for something other than the path, usually a peer's loss recovery. Sampled, those
 * waits took SRTT up to 118 ms on loopback with 3 ranks at 10% loss both ways (above 10 ms on some rank in 13 of 30
 * seeds, at most 6.9 ms without them; 0.2-2.3 ms, median 0.45, at zero loss in the same test), and every window
 * timed from SRTT grew with it: 4 calls of 120,000 ints took 0.80-0.99 s against 0.35-0.37 s without them (medians
 * of two runs of 15 seeds each way); no change at 1% or at zero loss. With fast retransmission on, an expiry resends
 * only the oldest expired slot and backs the timeout off for the others, as TCP resends the first unacknowledged
 * segment: the holes behind it come out through the probes; that slot is probed first if it was not probed since it
 * was last sent (a NACK then resends it at once, a PENDING shows it held for a slow rank), and resent at its next
 * expiry if the probe goes unanswered. With it off (the paper's scheme), every expired slot is resent.
 * <p>
 * <b>Holes.</b> A shard's results return in the order its packets were sent, so a slot sent before the one just
 * answered has lost its update or its result, or waits for another rank that lost its own. After a reorder window of
 * max(floor, SRTT/4) the agent probes it (40 bytes); the appliance answers with the result from the shadow copy, a
 * NACK (then the update is resent at once), or a PENDING: it holds the update and waits for another rank (which
 * probes for itself), or nothing (an appliance older than PENDING).
 * <p>
 * <b>Held slots.</b> A slot answered PENDING lost nothing of its own: its update is in and its result cannot come
 * before the slowest rank's update (on a training host that is usually a rank still in its backward pass, not a
 * loss). It is not resent, its timer does not back off the shard's RTO, and its result gives no round-trip sample
 * (it measures the slow rank, not the path). The newest outstanding slot, held, is asked again at the tail probe's
 * pace (its timeout below, at most one RTO) after the PENDING, then at doubling intervals up to the maximum RTO; each
 * result from the shard (the other ranks are moving) brings its wait back to that pace. An older held slot, whose lost
 * result would show as a hole behind a later result, is asked again by its own timer only at the maximum timeout
 * until the slots after it complete and it becomes the newest; the tail probe may ask it sooner (below). Slots not
 * known to be held keep their own timers:
 * holding them back behind a held slot was tried and deadlocked two ranks in the rack at 1% loss (each one's lost
 * update waited behind a slot that waited for the other's). A later result that overtakes a held slot still makes it
 * suspect (its own result may have been lost after it completed). A PENDING cannot make the agent
 * give up on a lost update: the appliance that holds nothing answers the same probes with NACKs. Resending a held
 * update is exactly the retransmission the appliance drops as a duplicate.
 * <p>
 * <b>Tail.</b> When nothing has come back for the probe timeout, the newest outstanding slot is probed, again at
 * doubling intervals until a result arrives: no later result can reveal its loss, and its answer reveals the holes
 * before it. While the newest slot is held (asked by its own timer), the tail probe asks instead about the newest slot
 * not known to be held, and its timer then counts from that probe, as from the probe a timer sends first; when every
 * outstanding slot is held, about the held slot asked longest ago. A stream behind a held slot is silent, so nothing
 * else would reveal those slots' losses before their timers: with only the newest asked, 7 of 21 loss patterns of three
 * ranks at 5% loss (2 of 40 at 2%) stalled for the whole timer, each rank's lost update or lost result waiting behind a
 * held slot whose peers needed exactly that. The timeout is 2 SRTT plus a floor (1 ms by default), as Linux times TCP's
 * tail-loss probe with more than one segment in flight (it adds 2 ms); it was max(floor, 2 SRTT). SRTT is a mean: the
 * silences the floor absorbs are the tail of the round trip's spread on a busy host, where the appliance's shard or a
 * peer's agent waits for a core (measured on 2 shared cores: silences of 1-7 ms with SRTT 0.5-3 ms while 16 or more
 * slots were outstanding, a third of those probes answered PENDING). While a single slot is outstanding and no result
 * of its stream has come back yet, it also waits the lone-slot allowance, min(10 ms, the minimum RTO), which with the
 * default timeouts puts it at or past the minimum RTO, so that slot is usually asked by its timer's probe (Linux adds
 * its minimum RTO to a lone segment's probe timeout, for the receiver's delayed ACK). That probe backs the RTO off as
 * any timer expiry does (until the next round-trip sample); if it goes unanswered, the tail probe, then below the
 * backed-off RTO, may ask again a few milliseconds later. Such a slot is a small all-reduce started alone (a barrier),
 * whose first ranks wait for the last to arrive: in a traced loopback cell those waits made a quarter of the probes at
 * zero loss (42 of 171), answered PENDING. The last slot of a stream whose results have been coming back is not waiting
 * for late ranks, and keeps 2 SRTT + the floor: with the allowance there too (a first version), the rack's 1 MB
 * all-reduces at 1% loss had a p99 of 41-56 ms against 23-32 without it there (3 alternating cells each). A slot sent
 * while the stream's lone slot still waits for its first result restarts the timeout from that send and clears the tail
 * probe's back-off.
 * <p>
 * <b>Pauses.</b> Timers measure time in which the agent could have seen a result. The agent judges them only once its
 * sockets are drained, and reports through {@link #onPause} any gap between its duty cycles beyond the waits it asked
 * for (the thread was descheduled, or the JVM stopped for a GC): every timer moves by the pause. Measured with
 * {@code ./switchml demo} and one spinning process on 2 cores (agents paused 1.6-3.0 s per rank in a 10 s run), this,
 * the drain and one packet per timer event took a rank's zero-loss resends and probes from 443-820 and 832-1,856 to
 * 10-18 in all (one run), of ~40,100 packets sent.
 * <p>
 * <b>Spurious events</b> are counted, not acted on. The appliance marks a result that answers a probe or a resend
 * (FLAG_RETRANSMIT) and clears the mark on a slot's normal completion. So a probed slot whose result comes unmarked
 * with no NACK in between lost nothing of its own: the probe was not needed (it may still have been the right guess:
 * the slot waited for another rank's loss). A resend by the timer was spurious when its unmarked result arrives
 * sooner than half the smallest round trip seen (it cannot answer the resend), or when a marked duplicate of the
 * completed round follows (the resend reached a slot that had completed without it). A spurious resend that reaches an
 * incomplete slot goes unseen, so that count is a lower bound. Learning a floor for the windows from these events was
 * tried and dropped: at 1% loss most "spurious" probes wait on another rank's recovery, and the floor ratcheted up
 * until the demo's TAT went from 0.19 s to 2.4 s.
 */
final class AdaptiveLossRecovery implements LossRecovery
{
    private static final int MAX_TAIL_SHIFT = 10;
    /**
     * Added to the tail probe's timeout while a stream's only slot waits for its first result, at most the minimum RTO
     * (class comment).
     */
    static final long LONE_SLOT_ALLOWANCE_NS = 10_000_000L;

    private final WorkerCounters.Cells counters;
    private final int slots;
    private final boolean fastRetransmit;
    private final long minTimeoutNs;
    private final long maxTimeoutNs;
    private final long reorderWindowFloorNs;
    private final long probeTimeoutFloorNs;
    private final long loneSlotAllowanceNs;

    private final boolean[] active;
    private final long[] sentNs;
    private final long[] txSeq;
    private final long[] deadlineNs;
    private final long[] rtoDeadlineNs;
    private final boolean[] suspect;
    private final long[] probedNs;
    private final int[] probes;
    private final boolean[] nacked;
    private final int[] resentBy;
    private final long[] unconfirmedKey;
    private final boolean[] held;
    private final long[] heldWaitNs;
    private final int[] pendings;
    private int heldCount;
    private int newestSlot = -1;
    /**
     * A result came while a slot was held: {@link #poll} re-paces the held newest slot from then. Not at once: the
     * agent usually sends again on the freed slot first, which then is the newest, and nothing needs to change.
     */
    private boolean newestMayHaveChanged;
    private long newestChangedAtNs;

    private final RttEstimator rtt;
    private long nextTxSeq;
    private int activeCount;
    private long deliveredSeq;
    private long nextDeadlineNs = Long.MAX_VALUE;
    private long lastProgressNs;
    private boolean probed;
    /** A result (of any slot) has come back since the stream started: the ranks are all in it. */
    private boolean streamAnswered;
    private long lastTailProbeNs;
    private int tailProbeShift;

    AdaptiveLossRecovery(final WorkerContext context, final int slots, final WorkerCounters.Cells counters)
    {
        this.counters = counters;
        this.slots = slots;
        this.fastRetransmit = context.fastRetransmit();
        this.minTimeoutNs = Math.min(context.minRetransmitTimeoutMs(), context.retransmitTimeoutMs()) * 1_000_000L;
        this.maxTimeoutNs = context.maxRetransmitTimeoutMs() * 1_000_000L;
        this.reorderWindowFloorNs = context.reorderWindowUs() * 1_000L;
        this.probeTimeoutFloorNs = context.probeTimeoutUs() * 1_000L;
        this.loneSlotAllowanceNs = Math.min(minTimeoutNs, LONE_SLOT_ALLOWANCE_NS);
        this.rtt = new RttEstimator(context.retransmitTimeoutMs() * 1_000_000L, minTimeoutNs, maxTimeoutNs);
        active = new boolean[slots];
        sentNs = new long[slots];
        txSeq = new long[slots];
        deadlineNs = new long[slots];
        rtoDeadlineNs = new long[slots];
        suspect = new boolean[slots];
        probedNs = new long[slots];
        probes = new int[slots];
        nacked = new boolean[slots];
        resentBy = new int[slots];
        unconfirmedKey = new long[slots];
        java.util.Arrays.fill(unconfirmedKey, -1);
        held = new boolean[slots];
        heldWaitNs = new long[slots];
        pendings = new int[slots];
    }

    public void onStreamStart(final long nowNs)
    {
        lastProgressNs = nowNs;
        streamAnswered = false;
        probed = false;
        tailProbeShift = 0;
    }

    public void onTransmit(final int l, final int why, final long nowNs)
    {
        if (why == FIRST && !active[l] && activeCount == 1 && !streamAnswered)
        {
            // a stream's lone slot gains company before any result: the tail probe's timer starts again from this
            // send, as Linux arms its loss probe from the last new data sent, and forgets the lone slot's checks (a
            // held lone slot's tail check had set probed and its back-off). Timed from the stream's start, a slot
            // sent after the lone one had waited 2 SRTT + the floor was asked at once, its update barely out.
            lastProgressNs = nowNs;
            probed = false;
            tailProbeShift = 0;
        }
        final long deadline = nowNs + rtt.timeoutNs();
        deadlineNs[l] = deadline;
        rtoDeadlineNs[l] = deadline;
        sentNs[l] = nowNs;
        txSeq[l] = ++nextTxSeq;
        newestSlot = l;
        suspect[l] = false;
        if (!active[l])
        {
            active[l] = true;
            activeCount++;
        }
        release(l);
        if (why == FIRST)
        {
            resentBy[l] = FIRST;
            probes[l] = 0;
            pendings[l] = 0;
            heldWaitNs[l] = 0;
            nacked[l] = false;
        }
        else if (resentBy[l] != NACKED)
        {
            resentBy[l] = why;
        }
        lowerNextDeadline(deadline);
    }

    public void onResult(final int l, final boolean fromShadow, final long key, final long nowNs)
    {
        unconfirmedKey[l] = -1;
        if (!fromShadow)
        {
            if (probes[l] > pendings[l] && !nacked[l])
            {
                // probed, yet nothing was lost: the result of the normal completion answers (the probes answered
                // PENDING found the slot waiting for another rank, and are counted as such)
                counters.spuriousProbes += probes[l] - pendings[l];
            }
            if (resentBy[l] == TIMEOUT)
            {
                if (rtt.minNs() != Long.MAX_VALUE && nowNs - sentNs[l] < rtt.minNs() / 2)
                {
                    counters.spuriousRetransmissions++;
                }
                else
                {
                    unconfirmedKey[l] = key;
                }
            }
        }
        probed = false;
        streamAnswered = true;
        tailProbeShift = 0;
        if (resentBy[l] == FIRST && txSeq[l] > deliveredSeq)
        {
            // not overtaken by the result of a slot sent after it (results return in the order sent): one overtaken
            // waited for another rank's recovery, and gives no round-trip sample, as a slot answered PENDING, which
            // waited for another rank, gives none; nor does it reveal a hole
            deliveredSeq = txSeq[l];
            if (pendings[l] == 0)
            {
                rtt.onSample(nowNs - sentNs[l]);
            }
            if (fastRetransmit)
            {
                onDelivered(l, nowNs);
            }
        }
        lastProgressNs = nowNs;
        deactivate(l);
        if (heldCount > 0)
        {
            newestMayHaveChanged = true;
            newestChangedAtNs = nowNs;
        }
    }

    private void deactivate(final int l)
    {
        if (active[l])
        {
            release(l);
            active[l] = false;
            activeCount--;
            if (l == newestSlot)
            {
                newestSlot = -1;
            }
        }
    }

    private void release(final int l)
    {
        if (held[l])
        {
            held[l] = false;
            heldCount--;
        }
    }

    /**
     * A result arrived at {@code nowNs}: the other ranks are moving. If the newest outstanding slot is held, its wait
     * goes back to the tail probe's pace, and one left at the long wait of an older slot takes it (nothing else asks
     * about the newest slot: no later result can overtake it, and the tail probe leaves a held newest slot to its own
     * timer). Both of its deadlines move: a suspect slot's probe falls back to the second one when it goes unanswered.
     * Run from {@link #poll}, after the agent has sent again on the slot the result freed.
     */
    private void onNewestMayHaveChanged(final long nowNs)
    {
        if (heldCount == 0)
        {
            return;
        }
        final int newest = newestActive();
        if (newest >= 0 && held[newest])
        {
            heldWaitNs[newest] = heldBaseWaitNs();
            final long deadline = nowNs + heldWaitNs[newest];
            if (deadline - rtoDeadlineNs[newest] < 0)
            {
                rtoDeadlineNs[newest] = deadline;
            }
            if (deadline - deadlineNs[newest] < 0)
            {
                deadlineNs[newest] = deadline;
                lowerNextDeadline(deadline);
            }
        }
    }

    private void lowerNextDeadline(final long deadline)
    {
        if (deadline - nextDeadlineNs < 0)
        {
            nextDeadlineNs = deadline;
        }
    }

    public boolean onNack(final int l, final long nowNs)
    {
        nacked[l] = true;
        // resend once per probe: a second NACK for the same probe, or one after the resend, changes nothing
        return probedSinceSent(l);
    }

    /** @return whether slot {@code l} was probed after its last transmission. */
    private boolean probedSinceSent(final int l)
    {
        return probes[l] > 0 && sentNs[l] - probedNs[l] < 0;
    }

    /** The first wait of a held newest slot, and where a result brings it back: the tail probe's pace. */
    private long heldBaseWaitNs()
    {
        return Math.min(rtt.timeoutNs(), probeTimeoutNs());
    }

    public void onPending(final int l, final long nowNs)
    {
        if (!active[l] || !probedSinceSent(l))
        {
            // nothing outstanding, no probe asked since the last send (a resend decides now), or unasked for
            return;
        }
        // true whenever it arrives (a late answer included): the appliance keeps a round's update until the round
        // completes, and the agent already dropped any PENDING of another round as stale
        pendings[l] = Math.min(pendings[l] + 1, probes[l]);
        if (!held[l])
        {
            held[l] = true;
            heldCount++;
        }
        suspect[l] = false;
        if (heldWaitNs[l] == 0)
        {
            // the newest slot is asked again at the tail probe's pace, then at doubling intervals
            heldWaitNs[l] = heldBaseWaitNs();
        }
        final long deadline = nowNs + (l == newestActive() ? heldWaitNs[l] : maxTimeoutNs);
        deadlineNs[l] = deadline;
        rtoDeadlineNs[l] = deadline;
        lowerNextDeadline(deadline);
    }

    /** @return the outstanding slot sent last (kept as each transmission is made; found again when it goes idle). */
    private int newestActive()
    {
        if (newestSlot < 0 && activeCount > 0)
        {
            for (int l = 0; l < slots; l++)
            {
                if (active[l] && (newestSlot < 0 || txSeq[l] > txSeq[newestSlot]))
                {
                    newestSlot = l;
                }
            }
        }
        return newestSlot;
    }

    public void onStaleResult(final int l, final boolean fromShadow, final long key, final long nowNs)
    {
        if (fromShadow && unconfirmedKey[l] == key)
        {
            // the resend reached a slot that had completed without it
            unconfirmedKey[l] = -1;
            counters.spuriousRetransmissions++;
        }
    }

    public void onIdle(final int l)
    {
        deactivate(l);
        suspect[l] = false;
    }

    public int poll(final long nowNs, final Actions actions)
    {
        int work = 0;
        if (newestMayHaveChanged)
        {
            newestMayHaveChanged = false;
            onNewestMayHaveChanged(newestChangedAtNs);
        }
        if (fastRetransmit && anyActive() && nowNs - tailProbeDueNs() >= 0)
        {
            work += probeTail(nowNs, actions);
        }
        if (nowNs - nextDeadlineNs < 0)
        {
            return work;
        }
        long next = Long.MAX_VALUE;
        int oldestExpired = -1;
        boolean backedOff = false;
        for (int l = 0; l < slots; l++)
        {
            if (!active[l])
            {
                continue;
            }
            if (nowNs - deadlineNs[l] >= 0)
            {
                if (suspect[l])
                {
                    suspect[l] = false;
                    deadlineNs[l] = rtoDeadlineNs[l];
                    recordProbe(l, false, nowNs);
                    actions.probe(l, false, nowNs);
                    work++;
                }
                else if (held[l])
                {
                    // its update is in, the slot waits for another rank: only its result can still be lost. The
                    // newest slot asks again at doubling intervals (the shadow copy answers a lost result, and
                    // its answer reveals the holes before it); an older one, whose lost result shows as a hole
                    // behind a later result, only at the maximum timeout, as a safety net. No back-off of the
                    // shard's timeout: nothing was lost.
                    final int newest = newestActive();
                    if (l == newest)
                    {
                        heldWaitNs[l] = Math.min(2 * heldWaitNs[l], maxTimeoutNs);
                    }
                    deadlineNs[l] = nowNs + (l == newest ? heldWaitNs[l] : maxTimeoutNs);
                    rtoDeadlineNs[l] = deadlineNs[l];
                    recordProbe(l, false, nowNs);
                    actions.probe(l, false, nowNs);
                    work++;
                }
                else if (!fastRetransmit)
                {
                    // the paper's scheme: every slot's own timer resends it
                    if (!backedOff)
                    {
                        backedOff = true;
                        rtt.backOff();
                    }
                    actions.retransmit(l, nowNs);
                    work++;
                }
                else if (oldestExpired < 0 || txSeq[l] < txSeq[oldestExpired])
                {
                    oldestExpired = l;
                }
            }
            if (active[l])
            {
                next = Math.min(next, deadlineNs[l]);
            }
        }
        if (oldestExpired >= 0)
        {
            // as TCP on a timeout: resend the oldest outstanding packet and back off; the holes behind it come out
            // through its result and the probes, and each other expired slot waits a backed-off timeout more. A
            // slot not probed since it was last sent is probed first: the appliance answers a lost update with a
            // NACK (resent at once, one round trip later than a resend now), and an update held for a slow rank
            // with a PENDING, which no resend could have helped. The timeout backs off either way, so that a
            // long wait for a slow rank costs a number of probes logarithmic in its length; the next round trip
            // sampled sets it again
            final boolean probeFirst = !probedSinceSent(oldestExpired);
            rtt.backOff();
            final long deadline = nowNs + rtt.timeoutNs();
            for (int l = 0; l < slots; l++)
            {
                if (active[l] && l != oldestExpired && nowNs - deadlineNs[l] >= 0)
                {
                    deadlineNs[l] = deadline;
                    rtoDeadlineNs[l] = deadline;
                }
            }
            if (probeFirst)
            {
                deadlineNs[oldestExpired] = deadline;
                rtoDeadlineNs[oldestExpired] = deadline;
                recordProbe(oldestExpired, false, nowNs);
                actions.probe(oldestExpired, false, nowNs);
            }
            else
            {
                actions.retransmit(oldestExpired, nowNs);
            }
            work++;
            next = Math.min(next, deadline);
            for (int l = 0; l < slots; l++)
            {
                if (active[l])
                {
                    next = Math.min(next, deadlineNs[l]);
                }
            }
        }
        nextDeadlineNs = next;
        return work;
    }

    public void onPause(final long pauseNs)
    {
        // this thread did not run for pauseNs: nothing it could have seen happened then, so no timer counts it
        for (int l = 0; l < slots; l++)
        {
            if (active[l])
            {
                deadlineNs[l] += pauseNs;
                rtoDeadlineNs[l] += pauseNs;
            }
        }
        if (nextDeadlineNs != Long.MAX_VALUE)
        {
            nextDeadlineNs += pauseNs;
        }
        lastProgressNs += pauseNs;
        lastTailProbeNs += pauseNs;
        counters.pausesNs += pauseNs;
    }

    public long nextWakeNs()
    {
        final long wake = newestMayHaveChanged ? Math.min(nextDeadlineNs, newestChangedAtNs) : nextDeadlineNs;
        return fastRetransmit && anyActive() ? Math.min(wake, tailProbeDueNs()) : wake;
    }

    public long smoothedRttNs()
    {
        return rtt.smoothedNs();
    }

    public long retransmitTimeoutNs()
    {
        return rtt.publishedTimeoutNs();
    }

    private boolean anyActive()
    {
        return activeCount > 0;
    }

    private void recordProbe(final int l, final boolean tail, final long nowNs)
    {
        probedNs[l] = nowNs;
        probes[l]++;
    }

    /**
     * A result of a packet sent once and sent after every result seen before: every outstanding slot sent before it is
     * suspect after the reorder window (probed already: its answer gets a round trip first).
     */
    private void onDelivered(final int l, final long nowNs)
    {
        final long seq = txSeq[l];
        final long windowNs = Math.min(rtt.timeoutNs(),
            Math.max(reorderWindowFloorNs, rtt.smoothedNs() >> 2));
        final long suspectNs = nowNs + windowNs;
        for (int m = 0; m < slots; m++)
        {
            if (m != l && active[m] && !suspect[m] && txSeq[m] < seq)
            {
                suspect[m] = true;
                long deadline = suspectNs;
                if (probes[m] > 0)
                {
                    deadline = Math.max(deadline, probedNs[m] + rtt.smoothedNs() + windowNs);
                }
                if (deadline - deadlineNs[m] < 0)
                {
                    deadlineNs[m] = deadline;
                    lowerNextDeadline(deadline);
                }
            }
        }
    }

    private long probeTimeoutNs()
    {
        final long srtt = rtt.smoothedNs();
        if (srtt == 0)
        {
            return rtt.timeoutNs();
        }
        final long timeoutNs = 2 * srtt + probeTimeoutFloorNs;
        return activeCount == 1 && !streamAnswered ? timeoutNs + loneSlotAllowanceNs : timeoutNs;
    }

    private long tailProbeDueNs()
    {
        return probed ? lastTailProbeNs + (probeTimeoutNs() << tailProbeShift) : lastProgressNs + probeTimeoutNs();
    }

    private int probeTail(final long nowNs, final Actions actions)
    {
        if (probed)
        {
            tailProbeShift = Math.min(tailProbeShift + 1, MAX_TAIL_SHIFT);
        }
        probed = true;
        lastTailProbeNs = nowNs;
        if (probeTimeoutNs() >= rtt.timeoutNs())
        {
            return 0;
        }
        final int newest = newestActive();
        int target = newest;
        final boolean behindHeld = newest >= 0 && held[newest];
        if (behindHeld)
        {
            // a held newest slot is asked again by its own timer (the stream may wait for a slow rank), but it must
            // not hide an older slot not known to be held: no later result is coming to reveal that one's loss while
            // the stream stands still behind the held slot
            target = newestNotHeld();
            if (target < 0)
            {
                // every outstanding slot is held. An older one asked a while ago may have completed since and lost
                // its result: no later result is coming to show it as a hole if the other ranks' next updates on its
                // slot wait for this rank's (a cycle seen at 5% loss: each rank held a slot whose result it had lost,
                // while its peers waited on that slot's next round). The one asked longest ago, one per tail probe
                target = heldAskedLongestAgo(newest);
            }
        }
        if (target < 0)
        {
            return 0;
        }
        recordProbe(target, true, nowNs);
        actions.probe(target, true, nowNs);
        if (behindHeld && !held[target])
        {
            // this probe stands for the one its timer would send first: its answer gets a full timeout before the
            // timer resends the slot (a PENDING for a slot that waits on a slow rank may come late on a busy host,
            // and a resent held update is a duplicate)
            final long deadline = nowNs + rtt.timeoutNs();
            if (deadline - rtoDeadlineNs[target] > 0)
            {
                rtoDeadlineNs[target] = deadline;
                if (!suspect[target])
                {
                    deadlineNs[target] = deadline;
                }
            }
        }
        return 1;
    }

    /** @return the held slot other than {@code newest} probed longest ago, or -1 if there is none. */
    private int heldAskedLongestAgo(final int newest)
    {
        int oldest = -1;
        for (int l = 0; l < slots; l++)
        {
            if (active[l] && held[l] && l != newest && (oldest < 0 || probedNs[l] - probedNs[oldest] < 0))
            {
                oldest = l;
            }
        }
        return oldest;
    }

    /** @return the outstanding slot sent last among those not answered PENDING, or -1 if every one is held. */
    private int newestNotHeld()
    {
        int newest = -1;
        for (int l = 0; l < slots; l++)
        {
            if (active[l] && !held[l] && (newest < 0 || txSeq[l] > txSeq[newest]))
            {
                newest = l;
            }
        }
        return newest;
    }
}
