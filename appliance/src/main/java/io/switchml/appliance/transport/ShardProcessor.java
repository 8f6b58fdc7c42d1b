package io.switchml.appliance.transport;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.control.JobRegistry;
import io.switchml.appliance.engine.SlotPool;
import io.switchml.appliance.telemetry.JobCounters;
import io.switchml.appliance.telemetry.ShardCounters;
import io.switchml.appliance.telemetry.SlotLatency;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.security.PacketMac;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.collections.IntObjConsumer;

import java.util.Arrays;
import java.util.concurrent.Executor;

/**
 * One data-plane shard's packet logic, independent of the transport that moves the datagrams: decodes
 * an update, checks it against its job (membership and source address, slot ownership, geometry, MAC),
 * runs the shard's slot pool, and hands results to a {@link ResultSender}: to every member (or the
 * job's multicast group) when a slot completes, to the sender alone for a retransmission into a
 * completed slot. Also scans the shard's slots against their jobs' deadlines.
 * <p>
 * Owned by the shard's single thread, which owns the shard's share of every job's slots. No allocation,
 * no locks, no exceptions on the packet path: every drop is a counter. Aborts (ordering violation, slot
 * deadline) are handed to a control thread.
 */
final class ShardProcessor
{
    private final int shardId;
    private final int shardCount;
    private final JobRegistry registry;
    private final ShardCounters counters;
    private final SlotLatency slotLatency;
    private final LossGenerator rxLoss;
    private final LossGenerator txLoss;
    private final Executor controlExecutor;
    private final ResultSender sender;
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private final DataHeaderFlyweight resultHeader = new DataHeaderFlyweight();
    private final IntObjConsumer<Job> deadlineCheck = this::checkDeadline;
    private final ShardDataPath.PacketSink modelSink = this::sendModelOutput;
    private final int multicastBase;
    private final boolean multicast;
    private final MacPrecheck macPrecheck;
    private int multicastPort;
    private long scanNowNs;
    private volatile long lastScanNs = System.nanoTime();

    /**
     * @param multicastBase first IPv4 address of the result groups (job j uses base + j mod 65536), host order;
     *                      used only when multicast is on.
     * @param multicast     whether completed results go to the job's group instead of to each member.
     */
    ShardProcessor(
        final int shardId,
        final int shardCount,
        final JobRegistry registry,
        final ShardCounters counters,
        final SlotLatency slotLatency,
        final LossGenerator rxLoss,
        final LossGenerator txLoss,
        final Executor controlExecutor,
        final ResultSender sender,
        final int multicastBase,
        final boolean multicast)
    {
        this.shardId = shardId;
        this.shardCount = shardCount;
        this.registry = registry;
        this.counters = counters;
        this.slotLatency = slotLatency;
        this.rxLoss = rxLoss;
        this.txLoss = txLoss;
        this.controlExecutor = controlExecutor;
        this.sender = sender;
        this.multicastBase = multicastBase;
        this.multicast = multicast;
        this.macPrecheck = new MacPrecheck(registry, counters);
    }

    /**
     * Set the UDP port results are multicast to, once the shard's own port is known and before any job
     * is active (a job's activation, a volatile publication, orders it before the shard reads it).
     */
    void multicastPort(final int port)
    {
        multicastPort = port;
    }

    /**
     * @return the multicast group of a job's results from this shard, as an {@link AddressKey}: group
     * base + (job id mod 65536), at the multicast port.
     */
    long groupKey(final int jobId)
    {
        return AddressKey.of(multicastBase + (jobId & 0xFFFF), multicastPort);
    }

    /**
     * Handle one received datagram.
     *
     * @param buffer    holding the datagram; the slot pool reads it, nothing writes it.
     * @param offset    of the datagram in buffer.
     * @param length    of the datagram.
     * @param senderKey the source address as an {@link AddressKey}, or {@link AddressKey#NONE}.
     * @param nowNs     time of arrival (or of the receive batch), for slot latencies.
     */
    void onPacket(final MutableDirectBuffer buffer, final int offset, final int length, final long senderKey, final long nowNs)
    {
        onPacket(buffer, offset, length, senderKey, nowNs, -1);
    }

    /**
     * @return the MAC checks of the next receive batch: fill it, {@link MacPrecheck#run()} it, then hand each datagram
     * to {@link #onPacket(MutableDirectBuffer, int, int, long, long, int)} with its index.
     */
    MacPrecheck macPrecheck()
    {
        return macPrecheck;
    }

    /**
     * Handle one received datagram of a batch whose MACs {@link #macPrecheck()} checked.
     *
     * @param precheckIndex the datagram's index in the precheck, or -1 for none.
     */
    void onPacket(
        final MutableDirectBuffer buffer, final int offset, final int length, final long senderKey, final long nowNs,
        final int precheckIndex)
    {
        counters.onPacketIn(length);
        if (rxLoss.shouldDrop())
        {
            counters.onDrop(DropReason.LOSS_INJECTED);
            return;
        }

        final DropReason reason = DataHeaderFlyweight.validate(buffer, offset, length);
        if (reason != DropReason.NONE)
        {
            counters.onDrop(reason);
            return;
        }
        final DataHeaderFlyweight header = this.header.wrap(buffer, offset);
        final Job modelled = registry.activeJob(header.jobId());
        if (modelled != null && modelled.shardDataPath() != null)
        {
            onModelledPacket(modelled, buffer, offset, length, senderKey);
            return;
        }
        final byte type = header.type();
        if (type != DataHeaderFlyweight.TYPE_UPDATE && type != DataHeaderFlyweight.TYPE_PROBE)
        {
            if (type == DataHeaderFlyweight.TYPE_RESULT)
            {
                final Job offloaded = registry.activeJob(header.jobId());
                if (offloaded != null && !offloaded.slotsInShards())
                {
                    relayResult(offloaded, buffer, offset, length, senderKey);
                    return;
                }
            }
            counters.onDrop(DropReason.BAD_TYPE);
            return;
        }
        final Job job = registry.activeJob(header.jobId());
        if (job == null)
        {
            counters.onDrop(DropReason.UNKNOWN_JOB);
            return;
        }
        final int rank = header.workerRank();
        if (rejectedAsNonMember(job, rank, senderKey))
        {
            return;
        }
        final JobCounters jobCounters = job.counters();
        jobCounters.onPacketIn(length);
        if (!job.slotsInShards())
        {
            counters.onDrop(DropReason.OFFLOADED_JOB);
            jobCounters.onDrop();
            return;
        }
        final SlotPool pool = job.pool(shardId);
        final int slot = header.slotIndex();
        if (pool == null || slot % shardCount != shardId || slot / shardCount >= pool.slotCount() ||
            header.elementType() != job.elementType() || header.elementCount() > job.lanes())
        {
            counters.onDrop(DropReason.JOB_MISMATCH);
            jobCounters.onDrop();
            return;
        }
        if (rejectedForMac(job, buffer, offset, length, jobCounters, precheckIndex))
        {
            return;
        }

        // lanes are never wider than 4 bytes: room for any result of this update (a probe's is the slot's)
        final MutableDirectBuffer result = sender.claim(DataHeaderFlyweight.packetLength(
            type == DataHeaderFlyweight.TYPE_PROBE ? job.lanes() : header.elementCount()));
        final int resultOffset = sender.claimOffset();
        try
        {
            final int outcome;
            if (type == DataHeaderFlyweight.TYPE_PROBE)
            {
                counters.onProbe();
                outcome = pool.onProbe(header, result, resultOffset);
            }
            else
            {
                outcome = pool.onUpdate(header, result, resultOffset, nowNs);
            }
            switch (outcome)
            {
                case SlotPool.COMPLETED ->
                {
                    final int resultLength = SlotPool.resultLength(resultHeader.wrap(result, resultOffset));
                    counters.onSlotCompleted();
                    jobCounters.onSlotCompleted();
                    slotLatency.recordNs(pool.lastCompletionLatencyNs());
                    sign(job, resultLength);
                    if (multicast && !job.resultsToMembers())
                    {
                        if (!txLoss.shouldDrop())
                        {
                            countSent(sender.sendToGroup(groupKey(job.jobId()), resultLength), resultLength, jobCounters);
                        }
                        else
                        {
                            counters.onDrop(DropReason.LOSS_INJECTED);
                        }
                    }
                    else
                    {
                        for (int member = 0, n = job.worldSize(); member < n; member++)
                        {
                            if (txLoss.shouldDrop())
                            {
                                counters.onDrop(DropReason.LOSS_INJECTED);
                                continue;
                            }
                            countSent(sender.sendToMember(job, member, resultLength), resultLength, jobCounters);
                        }
                    }
                }
                case SlotPool.SHADOW_RESULT ->
                {
                    final int resultLength = SlotPool.resultLength(resultHeader.wrap(result, resultOffset));
                    counters.onRetransmissionServed();
                    jobCounters.onRetransmissionServed();
                    replyToSender(job, result, resultOffset, resultLength, senderKey, jobCounters);
                }
                case SlotPool.NACK ->
                {
                    counters.onNackSent();
                    replyToSender(job, result, resultOffset, DataHeaderFlyweight.HEADER_LENGTH, senderKey, jobCounters);
                }
                case SlotPool.PROBE_PENDING ->
                {
                    counters.onPendingSent();
                    replyToSender(job, result, resultOffset, DataHeaderFlyweight.HEADER_LENGTH, senderKey, jobCounters);
                }
                case SlotPool.DUPLICATE ->
                {
                    counters.onDuplicate();
                    jobCounters.onDuplicate();
                }
                case SlotPool.STALE -> counters.onStaleUpdate();
                case SlotPool.MISMATCH ->
                {
                    counters.onDrop(DropReason.SLOT_MISMATCH);
                    jobCounters.onDrop();
                    onOrderingViolation(job, rank, slot, header.chunkSequence(), header.elementCount());
                }
                default ->
                {
                    // absorbed: nothing to send yet
                }
            }
        }
        finally
        {
            sender.release();
        }
    }

    /**
     * A datagram of a job whose switch is modelled on the shard: the model checks it as the switch would, and only
     * a packet it took as a member's moves the job's counters (as after {@link #rejectedAsNonMember}); what a
     * stranger sent with the job's id is the shard's drop, by the reason the model gave.
     */
    private void onModelledPacket(
        final Job job, final MutableDirectBuffer buffer, final int offset, final int length, final long senderKey)
    {
        final DropReason reason = job.shardDataPath().onPacket(buffer, offset, length, senderKey, modelSink);
        if (reason == DropReason.NONE)
        {
            job.counters().onPacketIn(length);
            return;
        }
        counters.onDrop(reason);
        if (reason == DropReason.JOB_MISMATCH)
        {
            final JobCounters jobCounters = job.counters();
            jobCounters.onPacketIn(length);
            jobCounters.onDrop();
        }
    }

    /**
     * The member check every packet of a job passes: its rank is in the job and it comes from the address that rank
     * joined from (on this shard's port). A failure is counted on the shard only: what a stranger sends with a job's
     * id must not move that job's counters, which its tenant reads.
     */
    private boolean rejectedAsNonMember(final Job job, final int rank, final long senderKey)
    {
        if (rank < job.worldSize() && senderKey >= 0 && senderKey == job.memberKey(rank, shardId))
        {
            return false;
        }
        counters.onDrop(DropReason.NOT_MEMBER);
        return true;
    }

    /**
     * The MAC check of a job with MAC on: the batch's verdict when {@link MacPrecheck} has one for this job, else the
     * packet hashed alone. Counts the drop when it fails.
     */
    private boolean rejectedForMac(
        final Job job, final MutableDirectBuffer buffer, final int offset, final int length, final JobCounters jobCounters,
        final int precheckIndex)
    {
        if (!job.macEnabled())
        {
            return false;
        }
        final byte verdict = macPrecheck.verdict(precheckIndex, job);
        if (verdict == MacPrecheck.VALID ||
            (verdict == MacPrecheck.UNKNOWN && PacketMac.verify(job.macK0(), job.macK1(), buffer, offset, length)))
        {
            return false;
        }
        counters.onDrop(DropReason.BAD_MAC);
        jobCounters.onDrop();
        return true;
    }

    /**
     * A completed result of a job whose slots live in an offload backend, handed up by it (the XDP program passes
     * the completing update, rewritten in place into the result, up the stack from the completing member's
     * address): fan it out to every member as a completed slot of this shard's own would be. The program drops
     * the results that arrive from the wire as it parses them, but some packets pass it unparsed (IP options,
     * fragments; and everything while the program is detached, before the backend notices), as does a sender that
     * bypasses it (another interface): so what reaches this socket is not proven to be the program's. The member
     * check and, with MAC on, the MAC keep it to what a member may send; with MAC off, one who can send from a
     * member's address and port can have a forged result fanned out to the job's members, which mac=off's threat
     * model already allows (such a sender can send results to the members directly).
     */
    private void relayResult(final Job job, final MutableDirectBuffer buffer, final int offset, final int length, final long senderKey)
    {
        if (rejectedAsNonMember(job, header.workerRank(), senderKey))
        {
            return;
        }
        final JobCounters jobCounters = job.counters();
        jobCounters.onPacketIn(length);
        if (rejectedForMac(job, buffer, offset, length, jobCounters, -1))
        {
            return;
        }
        final MutableDirectBuffer result = sender.claim(length);
        final int resultOffset = sender.claimOffset();
        try
        {
            result.putBytes(resultOffset, buffer, offset, length);
            counters.onSlotCompleted();
            jobCounters.onSlotCompleted();
            if (multicast)
            {
                countSent(sender.sendToGroup(groupKey(job.jobId()), length), length, jobCounters);
            }
            else
            {
                for (int member = 0, n = job.worldSize(); member < n; member++)
                {
                    countSent(sender.sendToMember(job, member, length), length, jobCounters);
                }
            }
        }
        finally
        {
            sender.release();
        }
    }

    /**
     * Sign and send the packet the pool wrote to the update's or probe's sender only (a result from the
     * shadow copy, a NACK or a PENDING).
     */
    private void replyToSender(
        final Job job,
        final MutableDirectBuffer result,
        final int offset,
        final int length,
        final long senderKey,
        final JobCounters jobCounters)
    {
        sign(job, length);
        if (txLoss.shouldDrop())
        {
            counters.onDrop(DropReason.LOSS_INJECTED);
        }
        else
        {
            countSent(sender.sendToSender(senderKey, length), length, jobCounters);
        }
    }

    /**
     * A packet that a job's {@link ShardDataPath} (a modelled switch) emits: sent from this shard's socket.
     */
    private void sendModelOutput(final DirectBuffer payload, final int offset, final int length, final long destination)
    {
        final MutableDirectBuffer out = sender.claim(length);
        final int outOffset = sender.claimOffset();
        try
        {
            out.putBytes(outOffset, payload, offset, length);
            if (sender.sendToSender(destination, length))
            {
                counters.onPacketOut(length);
            }
        }
        finally
        {
            sender.release();
        }
    }

    private void countSent(final boolean queued, final int length, final JobCounters jobCounters)
    {
        if (queued)
        {
            counters.onPacketOut(length);
            jobCounters.onPacketOut();
        }
    }

    private void sign(final Job job, final int length)
    {
        if (job.macEnabled())
        {
            sender.sign(job, length);
        }
    }

    /**
     * A contribution that disagrees with its slot's chunk, element count or exponent never happens in
     * a correct run (the randomized engine tests show it), so it means the ranks did not submit the
     * same sequence of tensors, or a member is misbehaving: end the job with a reason naming the rank
     * rather than leave the others waiting for a slot that can never complete correctly.
     */
    private void onOrderingViolation(final Job job, final int rank, final int slot, final long sequence, final int count)
    {
        if (job.markAborting())
        {
            final String reason = "ordering violation: rank " + rank + " sent chunk " + sequence + " (" + count +
                " elements) to slot " + slot + " that the other ranks use for a different chunk, element count or " +
                "exponent; all ranks must submit the same sequence of tensors";
            controlExecutor.execute(() -> registry.abort(job, reason));
        }
    }

    /**
     * Abort jobs with a slot of this shard that has been partly filled for longer than the job's slot
     * timeout, naming the ranks that did not contribute. Runs periodically on the shard's thread; the
     * abort itself (locks, TCP writes) is handed to a control thread.
     *
     * @param nowNs the time of the scan.
     */
    void scanSlotDeadlines(final long nowNs)
    {
        lastScanNs = nowNs;
        scanNowNs = nowNs;
        // forEachInt walks the snapshot's arrays: no iterator, which the map would share between shards
        registry.activeJobs().forEachInt(deadlineCheck);
    }

    private void checkDeadline(final int jobId, final Job job)
    {
        final SlotPool pool = job.pool(shardId);
        if (pool == null)
        {
            return;
        }
        final int leftRank = job.firstLeftRank();
        final int waiting = leftRank >= 0 ? pool.findWaitingFor(leftRank) : -1;
        final int cell = waiting >= 0 ? waiting : pool.findExpired(scanNowNs - job.slotTimeoutMs() * 1_000_000L);
        if (cell >= 0 && job.markAborting())
        {
            final int localSlot = cell % pool.slotCount();
            final int version = cell / pool.slotCount();
            final String reason = job.stuckSlotReason(localSlot * shardCount + shardId, version, pool.chunkSequence(cell),
                Arrays.toString(pool.missingRanks(cell)), waiting >= 0);
            controlExecutor.execute(() -> registry.abort(job, reason));
        }
    }

    /**
     * @return when this shard's thread last ran its periodic deadline scan: a liveness signal.
     */
    long lastScanNs()
    {
        return lastScanNs;
    }

    int shardId()
    {
        return shardId;
    }
}
