package io.switchml.appliance.telemetry;

import io.switchml.protocol.telemetry.CounterTypes;
import io.switchml.protocol.telemetry.SystemCounter;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersReader;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The appliance's telemetry in one place: the memory-mapped counters file (system, shard and job
 * counters), the distinct-error log, and each shard's slot-completion latency recorder.
 */
public final class Telemetry implements AutoCloseable
{
    private final CountersFile countersFile;
    private final ShardCounters[] shardCounters;
    private final SlotLatency[] slotLatencies;

    public Telemetry(final Path directory, final int shardCount)
    {
        countersFile = new CountersFile(directory);
        shardCounters = new ShardCounters[shardCount];
        slotLatencies = new SlotLatency[shardCount];
        for (int shard = 0; shard < shardCount; shard++)
        {
            shardCounters[shard] = countersFile.newShardCounters(shard);
            slotLatencies[shard] = new SlotLatency(shard);
        }
    }

    public CountersFile countersFile()
    {
        return countersFile;
    }

    public ShardCounters shardCounters(final int shard)
    {
        return shardCounters[shard];
    }

    public SlotLatency slotLatency(final int shard)
    {
        return slotLatencies[shard];
    }

    public AtomicCounter system(final SystemCounter counter)
    {
        return countersFile.systemCounter(counter);
    }

    public ErrorLog errorLog()
    {
        return countersFile.errorLog();
    }

    /**
     * Allocate a job's counters; freed by {@link JobCounters#close()} when the job ends.
     */
    public JobCounters allocateJobCounters(final int jobId, final String tenant, final String name)
    {
        return countersFile.allocateJobCounters(jobId, tenant, name);
    }

    /**
     * Fold the shards' counters into the system totals; call periodically from one thread.
     */
    public void aggregate()
    {
        countersFile.aggregateShardTotals();
    }

    /**
     * @return total slot-completion latency histograms by shard since start.
     */
    public Map<Integer, Histogram> slotLatencyTotals()
    {
        final Map<Integer, Histogram> totals = new TreeMap<>();
        for (final SlotLatency latency : slotLatencies)
        {
            totals.put(latency.shardId(), latency.totalSnapshot());
        }
        return totals;
    }

    /**
     * A snapshot by name: system counters as they are, shard counters summed over the shards (maxima
     * take the maximum).
     *
     * @return counter values by metric name.
     */
    public Map<String, Long> snapshot()
    {
        aggregate();
        final Map<String, Long> values = new LinkedHashMap<>();
        final CountersReader reader = countersFile.countersReader();
        reader.forEach((counterId, typeId, keyBuffer, label) ->
        {
            final String name = CounterTypes.metricName(keyBuffer);
            final long value = reader.getCounterValue(counterId);
            if (typeId == CounterTypes.SYSTEM)
            {
                values.put(name, value);
            }
            else if (typeId == CounterTypes.SHARD)
            {
                values.merge("shard_" + name, value, name.endsWith("_max_ns") ? Math::max : Long::sum);
            }
        });
        return values;
    }

    public void close()
    {
        for (final ShardCounters counters : shardCounters)
        {
            counters.close();
        }
        countersFile.close();
    }
}
