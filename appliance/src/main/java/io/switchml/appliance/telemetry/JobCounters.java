package io.switchml.appliance.telemetry;

import io.switchml.protocol.telemetry.CounterTypes;
import org.agrona.concurrent.status.AtomicCounter;

import java.util.ArrayList;
import java.util.List;

/**
 * The counters of one job in the counters file (type {@link CounterTypes#JOB}, owner id = job id, labels
 * like "job 7 packets_in: tenant=acme name=resnet"), allocated by
 * {@link CountersFile#allocateJobCounters(int, String, String)} when the job is admitted.
 * <p>
 * A job's slots may be spread over several shards, so a counter here can have several writers: the
 * {@code on*} methods use atomic adds ({@code increment()}, {@code getAndAdd()}), which cost a locked
 * instruction but never lose a count. They do not allocate.
 */
public final class JobCounters implements AutoCloseable
{
    private final CountersFile countersFile;
    private final int jobId;
    private final String tenant;
    private final String jobName;
    private final AtomicCounter packetsIn;
    private final AtomicCounter bytesIn;
    private final AtomicCounter packetsOut;
    private final AtomicCounter slotsCompleted;
    private final AtomicCounter retransmissionsServed;
    private final AtomicCounter duplicates;
    private final AtomicCounter drops;
    private final List<AtomicCounter> all = new ArrayList<>();
    private boolean closed;

    JobCounters(final CountersFile countersFile, final int jobId, final String tenant, final String jobName)
    {
        this.countersFile = countersFile;
        this.jobId = jobId;
        this.tenant = tenant;
        this.jobName = jobName;
        try
        {
            packetsIn = counter("packets_in");
            bytesIn = counter("bytes_in");
            packetsOut = counter("packets_out");
            slotsCompleted = counter("slots_completed");
            retransmissionsServed = counter("retransmissions_served");
            duplicates = counter("duplicates");
            drops = counter("drops");
        }
        catch (final RuntimeException ex)
        {
            freeAll();
            throw ex;
        }
    }

    /**
     * @return id of the job.
     */
    public int jobId()
    {
        return jobId;
    }

    /**
     * @return tenant of the job, "" if none.
     */
    public String tenant()
    {
        return tenant;
    }

    /**
     * @return name of the job, "" if none.
     */
    public String jobName()
    {
        return jobName;
    }

    /**
     * Count one datagram received for the job.
     */
    public void onPacketIn(final int lengthBytes)
    {
        packetsIn.increment();
        bytesIn.getAndAdd(lengthBytes);
    }

    /**
     * Count a batch of datagrams received for the job.
     */
    public void onPacketsIn(final int packetCount, final long totalBytes)
    {
        packetsIn.getAndAdd(packetCount);
        bytesIn.getAndAdd(totalBytes);
    }

    /**
     * Count one datagram sent for the job.
     */
    public void onPacketOut()
    {
        packetsOut.increment();
    }

    /**
     * Count a batch of datagrams sent for the job.
     */
    public void onPacketsOut(final int packetCount)
    {
        packetsOut.getAndAdd(packetCount);
    }

    /**
     * Count a completed slot of the job.
     */
    public void onSlotCompleted()
    {
        slotsCompleted.increment();
    }

    /**
     * Count a retransmission of the job served from the shadow copy.
     */
    public void onRetransmissionServed()
    {
        retransmissionsServed.increment();
    }

    /**
     * Count a duplicate contribution of the job.
     */
    public void onDuplicate()
    {
        duplicates.increment();
    }

    /**
     * Count a datagram of the job that was dropped after the job was identified.
     */
    public void onDrop()
    {
        drops.increment();
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
     * @return slots completed.
     */
    public AtomicCounter slotsCompleted()
    {
        return slotsCompleted;
    }

    /**
     * @return retransmissions served.
     */
    public AtomicCounter retransmissionsServed()
    {
        return retransmissionsServed;
    }

    /**
     * @return duplicate contributions.
     */
    public AtomicCounter duplicates()
    {
        return duplicates;
    }

    /**
     * @return dropped datagrams.
     */
    public AtomicCounter drops()
    {
        return drops;
    }

    /**
     * Free the job's counters: readers stop seeing them at once. Call it only after every shard has
     * dropped its reference to this object (the freed ids are not reused for the counters file's
     * free-to-reuse timeout, so a straggling increment lands in a dead record). Idempotent.
     */
    public void close()
    {
        synchronized (countersFile)
        {
            if (!closed)
            {
                closed = true;
                freeAll();
            }
        }
    }

    private AtomicCounter counter(final String metricName)
    {
        final AtomicCounter counter = countersFile.allocate(
            CounterTypes.JOB,
            jobId,
            CounterTypes.KIND_COUNTER,
            metricName,
            tenant,
            jobName,
            "job " + jobId + " " + metricName + ": tenant=" + tenant + " name=" + jobName);
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
}
