package io.switchml.worker;

/**
 * Loss recovery of one shard's slots: when to probe the appliance about a slot, when to resend its update, and what
 * the round trip is. A {@link ShardAgent} tells it what it sent and what came back, and lets it fire its timers;
 * the policy never touches a socket. It runs on the agent's thread only and takes the time as an argument, so that
 * a unit test can drive it with a fake clock.
 * <p>
 * {@link AdaptiveLossRecovery} is the default; another policy (congestion control, a different probe scheme) plugs
 * in through {@link WorkerContext#lossRecovery}.
 */
public interface LossRecovery
{
    /** Why a slot's packet is (re)sent. */
    int FIRST = 0;
    int TIMEOUT = 1;
    int NACKED = 2;

    /**
     * What the policy asks its agent to do when a timer fires.
     */
    interface Actions
    {
        /**
         * Send a header-only probe about slot {@code l}'s outstanding update.
         *
         * @param tail true for a tail-loss probe (nothing came back for a while), false for a hole behind a later
         *             result.
         */
        void probe(int l, boolean tail, long nowNs);

        /**
         * Resend slot {@code l}'s update: its retransmission timer expired. The agent reports the send through
         * {@link #onTransmit} with {@link #TIMEOUT}.
         */
        void retransmit(int l, long nowNs);
    }

    /**
     * Creates a policy for one shard's slots.
     */
    @FunctionalInterface
    interface Factory
    {
        LossRecovery create(WorkerContext context, int localSlots, WorkerCounters.Cells counters);
    }

    /**
     * Slots went from none outstanding to some: the stream (re)starts.
     */
    void onStreamStart(long nowNs);

    /**
     * Slot {@code l}'s packet was handed to the transport.
     *
     * @param why {@link #FIRST} for a new packet (a new chunk, or the data round after an exponent round),
     *            {@link #TIMEOUT} or {@link #NACKED} for a resend of the same packet.
     */
    void onTransmit(int l, int why, long nowNs);

    /**
     * The result of slot {@code l}'s outstanding packet arrived.
     *
     * @param fromShadow the appliance marked it as an answer to a probe or a resend (FLAG_RETRANSMIT), not the
     *                   slot's normal completion.
     * @param key        identifies the round (chunk and round kind), to match a late duplicate later.
     */
    void onResult(int l, boolean fromShadow, long key, long nowNs);

    /**
     * The appliance answered a probe for slot {@code l} with a NACK: it lacks this rank's update.
     *
     * @return true when the agent should resend the update now.
     */
    boolean onNack(int l, long nowNs);

    /**
     * The appliance answered a probe for slot {@code l} with a PENDING: it holds this rank's update and waits for
     * other ranks' updates to the slot, so nothing was lost yet and resending the update would not help. A policy
     * that ignores it treats the probe as unanswered.
     */
    default void onPending(int l, long nowNs)
    {
    }

    /**
     * A result for slot {@code l} arrived after the slot had moved on.
     *
     * @param fromShadow it was an answer to a probe or resend (FLAG_RETRANSMIT).
     * @param key        the round it answers.
     */
    void onStaleResult(int l, boolean fromShadow, long key, long nowNs);

    /**
     * Slot {@code l} has nothing outstanding.
     */
    void onIdle(int l);

    /**
     * The agent's thread did not run for this long beyond what it asked to wait (descheduled, a GC pause): shift
     * every timer by it, as if the clock had stopped.
     */
    void onPause(long pauseNs);

    /**
     * Fire the timers that are due.
     *
     * @return probes and resends asked for.
     */
    int poll(long nowNs, Actions actions);

    /**
     * @return when {@link #poll} next has something to do, or {@link Long#MAX_VALUE}.
     */
    long nextWakeNs();

    long smoothedRttNs();

    long retransmitTimeoutNs();
}
