package io.switchml.appliance.telemetry;

import io.switchml.protocol.DropReason;
import io.switchml.protocol.telemetry.CounterTypes;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The counters of one data-plane shard in the counters file (type {@link CounterTypes#SHARD}, owner id =
 * shard id, labels like "shard 0 packets_in" and "shard 0 drop bad_magic").
 * <p>
 * The shard's thread is the single writer of every counter here, so the {@code on*} methods use plain
 * read-modify-write with a release store ({@code incrementRelease}, {@code getAndAddRelease}): no locked
 * instruction, no allocation, and a concurrent reader sees each value whole. Never call them from
 * another thread. Allocated by {@link CountersFile#newShardCounters(int)}.
 */
public final class ShardCounters implements AutoCloseable
{
    private final CountersFile countersFile;
    private final int shardId;
    private final AtomicCounter packetsIn;
    private final AtomicCounter bytesIn;
    private final AtomicCounter packetsOut;
    private final AtomicCounter bytesOut;
    private final AtomicCounter slotsCompleted;
    private final AtomicCounter duplicates;
    private final AtomicCounter staleUpdates;
    private final AtomicCounter retransmissionsServed;
    private final AtomicCounter probes;
    private final AtomicCounter nacksSent;
    private final AtomicCounter pendingsSent;
    private final AtomicCounter macsInLanes;
    private final AtomicCounter dutyCycleMaxNs;
    private final AtomicCounter[] drops;
    private final List<AtomicCounter> all = new ArrayList<>();
    private boolean closed;

    ShardCounters(final CountersFile countersFile, final int shardId)
    {
        this.countersFile = countersFile;
        this.shardId = shardId;
        try
        {
            packetsIn = counter("packets_in", CounterTypes.KIND_COUNTER, "packets_in");
            bytesIn = counter("bytes_in", CounterTypes.KIND_COUNTER, "bytes_in");
            packetsOut = counter("packets_out", CounterTypes.KIND_COUNTER, "packets_out");
            bytesOut = counter("bytes_out", CounterTypes.KIND_COUNTER, "bytes_out");
            slotsCompleted = counter("slots_completed", CounterTypes.KIND_COUNTER, "slots_completed");
            duplicates = counter("duplicates", CounterTypes.KIND_COUNTER, "duplicates");
            staleUpdates = counter("stale_updates", CounterTypes.KIND_COUNTER, "stale_updates");
            retransmissionsServed = counter(
                "retransmissions_served", CounterTypes.KIND_COUNTER, "retransmissions_served");
            probes = counter("probes", CounterTypes.KIND_COUNTER, "probes");
            nacksSent = counter("nacks_sent", CounterTypes.KIND_COUNTER, "nacks_sent");
            pendingsSent = counter("pendings_sent", CounterTypes.KIND_COUNTER, "pendings_sent");
            macsInLanes = counter("macs_in_lanes", CounterTypes.KIND_COUNTER, "macs_in_lanes");
            final DropReason[] reasons = DropReason.values();
            drops = new AtomicCounter[reasons.length];
            for (final DropReason reason : reasons)
            {
                if (DropReason.NONE != reason)
                {
                    final String reasonName = reason.name().toLowerCase(Locale.ROOT);
                    drops[reason.ordinal()] = counter(
                        metricName("drop_" + reasonName), CounterTypes.KIND_COUNTER, "drop " + reasonName);
                }
            }
            dutyCycleMaxNs = counter("duty_cycle_max_ns", CounterTypes.KIND_GAUGE, "duty_cycle_max_ns");
        }
        catch (final RuntimeException ex)
        {
            freeAll();
            throw ex;
        }
    }

    /**
     * @return id of the shard these counters belong to.
     */
    public int shardId()
    {
        return shardId;
    }

    /**
     * Count one received datagram.
     *
     * @param lengthBytes its length.
     */
    public void onPacketIn(final int lengthBytes)
    {
        packetsIn.incrementRelease();
        bytesIn.getAndAddRelease(lengthBytes);
    }

    /**
     * Count a batch of received datagrams (recvmmsg, GRO).
     */
    public void onPacketsIn(final int packetCount, final long totalBytes)
    {
        packetsIn.getAndAddRelease(packetCount);
        bytesIn.getAndAddRelease(totalBytes);
    }

    /**
     * Count one sent datagram.
     *
     * @param lengthBytes its length.
     */
    public void onPacketOut(final int lengthBytes)
    {
        packetsOut.incrementRelease();
        bytesOut.getAndAddRelease(lengthBytes);
    }

    /**
     * Count a batch of sent datagrams (sendmmsg, GSO).
     */
    public void onPacketsOut(final int packetCount, final long totalBytes)
    {
        packetsOut.getAndAddRelease(packetCount);
        bytesOut.getAndAddRelease(totalBytes);
    }

    /**
     * Count a slot whose aggregation completed (result multicast).
     */
    public void onSlotCompleted()
    {
        slotsCompleted.incrementRelease();
    }

    /**
     * Count a contribution ignored because the slot had already seen that worker.
     */
    public void onDuplicate()
    {
        duplicates.incrementRelease();
    }

    /**
     * Count an update of a round that is already over.
     */
    public void onStaleUpdate()
    {
        staleUpdates.incrementRelease();
    }

    /**
     * Count a retransmission answered from the shadow copy by unicast.
     */
    public void onRetransmissionServed()
    {
        retransmissionsServed.incrementRelease();
    }

    /**
     * Count a probe: a worker asking about an update it suspects lost.
     */
    public void onProbe()
    {
        probes.incrementRelease();
    }

    /**
     * Count a NACK: the answer to a probe for an update this shard has not got.
     */
    public void onNackSent()
    {
        nacksSent.incrementRelease();
    }

    /**
     * Count a PENDING: the answer to a probe for an update this shard holds while the slot waits for other workers.
     */
    public void onPendingSent()
    {
        pendingsSent.incrementRelease();
    }

    /**
     * MACs computed several at once in vector lanes: of received packets checked ({@code MacPrecheck}), valid or
     * not, and of results signed ({@code NativeShardAgent}).
     *
     * @param count packets hashed.
     */
    public void onMacsInLanes(final int count)
    {
        macsInLanes.getAndAddRelease(count);
    }

    /**
     * Count a dropped datagram by reason; {@link DropReason#NONE} is ignored.
     */
    public void onDrop(final DropReason reason)
    {
        final AtomicCounter counter = drops[reason.ordinal()];
        if (null != counter)
        {
            counter.incrementRelease();
        }
    }

    /**
     * Offer the length of one duty cycle; the counter keeps the maximum seen.
     */
    public void onDutyCycleNs(final long durationNs)
    {
        dutyCycleMaxNs.proposeMaxRelease(durationNs);
    }

    /**
     * @return datagrams received.
     */
    public AtomicCounter packetsIn()
    {
        return packetsIn;
    }

    /**
     * @return bytes received.
     */
    public AtomicCounter bytesIn()
    {
        return bytesIn;
    }

    /**
     * @return datagrams sent.
     */
    public AtomicCounter packetsOut()
    {
        return packetsOut;
    }

    /**
     * @return bytes sent.
     */
    public AtomicCounter bytesOut()
    {
        return bytesOut;
    }

    /**
     * @return slots completed.
     */
    public AtomicCounter slotsCompleted()
    {
        return slotsCompleted;
    }

    /**
     * @return duplicate contributions ignored.
     */
    public AtomicCounter duplicates()
    {
        return duplicates;
    }

    /**
     * @return stale updates ignored.
     */
    public AtomicCounter staleUpdates()
    {
        return staleUpdates;
    }

    /**
     * @return retransmissions served from the shadow copy.
     */
    public AtomicCounter retransmissionsServed()
    {
        return retransmissionsServed;
    }

    /**
     * @return maximum duty cycle length in ns.
     */
    public AtomicCounter dutyCycleMaxNs()
    {
        return dutyCycleMaxNs;
    }

    /**
     * @return the drop counter of a reason, or null for {@link DropReason#NONE}.
     */
    public AtomicCounter drops(final DropReason reason)
    {
        return drops[reason.ordinal()];
    }

    /**
     * @return datagrams dropped for any reason.
     */
    public long totalDrops()
    {
        long total = 0;
        for (final AtomicCounter counter : drops)
        {
            if (null != counter)
            {
                total += counter.get();
            }
        }
        return total;
    }

    /**
     * Free the counters, after the shard has stopped; their final values stay in the system totals.
     * Idempotent.
     */
    public void close()
    {
        synchronized (countersFile)
        {
            if (!closed)
            {
                closed = true;
                countersFile.retire(this);
                freeAll();
            }
        }
    }

    private AtomicCounter counter(final String metricName, final int kind, final String labelSuffix)
    {
        final AtomicCounter counter = countersFile.allocate(
            CounterTypes.SHARD, shardId, kind, metricName, null, null, "shard " + shardId + " " + labelSuffix);
        all.add(counter);
        return counter;
    }

    private void freeAll()
    {
        for (final AtomicCounter counter : all)
        {
            countersFile.free(counter);
        }
    }

    private static String metricName(final String name)
    {
        String metricName = name.length() > CounterTypes.MAX_METRIC_NAME_LENGTH ?
            name.substring(0, CounterTypes.MAX_METRIC_NAME_LENGTH) : name;
        while (metricName.endsWith("_"))
        {
            metricName = metricName.substring(0, metricName.length() - 1);
        }
        return metricName;
    }
}
