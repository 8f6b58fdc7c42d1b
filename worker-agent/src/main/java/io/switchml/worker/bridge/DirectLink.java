package io.switchml.worker.bridge;

import io.switchml.worker.AllReduceException;
import io.switchml.worker.ReduceOp;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import io.switchml.worker.WorkerCounters;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.ToLongFunction;

/**
 * A job reached through this process's own {@link WorkerClient}: the float job joined by {@link #join}, the int32
 * job beside it (JOB-int32) joined on its first request, as every rank makes it at the same point of its sequence.
 */
final class DirectLink implements JobLink
{
    /** The worker counters {@code STATS} reports, by the name it gives them. */
    private static final Map<String, ToLongFunction<WorkerCounters>> COUNTERS = counters();

    private final WorkerContext floatJob;
    private final WorkerContext int32Job;
    private volatile WorkerClient client;
    private volatile WorkerClient int32Client;
    private boolean closed;

    /**
     * @param floatJob the job to join.
     * @param int32Job the int32 job beside it, or null when int32 is not served.
     */
    DirectLink(final WorkerContext floatJob, final WorkerContext int32Job)
    {
        this.floatJob = floatJob;
        this.int32Job = int32Job;
    }

    @Override
    public void join()
    {
        if (client != null)
        {
            return;
        }
        final WorkerClient joined = WorkerClient.connect(floatJob);
        synchronized (this)
        {
            if (closed)
            {
                joined.close();
                throw new AllReduceException("bridge closed while joining job '" + floatJob.jobName() + "'");
            }
            client = joined;
        }
    }

    /**
     * @throws IllegalArgumentException when no int32 job is served beside the float job.
     */
    void requireInt32()
    {
        if (int32Job == null)
        {
            throw new IllegalArgumentException("this bridge serves no int32 job (started without one)");
        }
    }

    @Override
    public CompletableFuture<Void> allReduceFloats(final MemorySegment range, final ReduceOp op)
    {
        final FloatBuffer floats = range.asByteBuffer().order(ByteOrder.nativeOrder()).asFloatBuffer();
        return client.allReduceAsync(floats, floats, op);
    }

    @Override
    public CompletableFuture<Void> allReduceInts(final MemorySegment range)
    {
        final IntBuffer ints = range.asByteBuffer().order(ByteOrder.nativeOrder()).asIntBuffer();
        return int32Client().allReduceAsync(ints, ints);
    }

    /**
     * @return the int32 job's client, joining it on first use.
     * @throws IllegalArgumentException when there is no int32 job.
     * @throws AllReduceException       when the join is refused or times out.
     */
    private WorkerClient int32Client()
    {
        WorkerClient joined = int32Client;
        if (joined != null)
        {
            return joined;
        }
        requireInt32();
        joined = WorkerClient.connect(int32Job);
        synchronized (this)
        {
            if (closed)
            {
                joined.close();
                throw new AllReduceException("bridge closed while joining job '" + int32Job.jobName() + "'");
            }
            int32Client = joined;
        }
        return joined;
    }

    @Override
    public void abort(final String reason)
    {
        final WorkerClient joined = client;
        if (joined != null)
        {
            joined.abort(reason);
        }
        final WorkerClient joinedInt32 = int32Client;
        if (joinedInt32 != null)
        {
            joinedInt32.abort(reason);
        }
    }

    @Override
    public void appendStats(final StringBuilder reply)
    {
        appendCounters(reply, "", client);
        appendCounters(reply, "int32.", int32Client);
    }

    @Override
    public String transportDescription()
    {
        final WorkerClient joined = client;
        return joined == null ? "" : joined.transportDescription();
    }

    @Override
    public String placementDescription()
    {
        final WorkerClient joined = client;
        return joined == null ? "" : joined.placementDescription();
    }

    @Override
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        final WorkerClient joined = client;
        if (joined != null)
        {
            joined.close();
        }
        final WorkerClient joinedInt32 = int32Client;
        if (joinedInt32 != null)
        {
            joinedInt32.close();
        }
    }

    private static Map<String, ToLongFunction<WorkerCounters>> counters()
    {
        final Map<String, ToLongFunction<WorkerCounters>> counters = new LinkedHashMap<>();
        counters.put("allReduces", WorkerCounters::allReduces);
        counters.put("packetsSent", WorkerCounters::packetsSent);
        counters.put("packetsReceived", WorkerCounters::packetsReceived);
        counters.put("retransmissions", WorkerCounters::retransmissions);
        counters.put("fastRetransmissions", WorkerCounters::fastRetransmissions);
        counters.put("spuriousRetransmissions", WorkerCounters::spuriousRetransmissions);
        counters.put("probes", WorkerCounters::probesSent);
        counters.put("spuriousProbes", WorkerCounters::spuriousProbes);
        counters.put("selectorWaits", WorkerCounters::selectorWaits);
        counters.put("coalescedSleeps", WorkerCounters::coalescedSleeps);
        counters.put("nacks", WorkerCounters::nacksReceived);
        counters.put("pendings", WorkerCounters::pendingsReceived);
        counters.put("staleResults", WorkerCounters::staleResults);
        counters.put("pausesNs", WorkerCounters::pausesNs);
        counters.put("exponentOnlyPackets", WorkerCounters::exponentOnlyPackets);
        counters.put("lookaheadMisses", WorkerCounters::lookaheadMisses);
        counters.put("nonFiniteChunks", WorkerCounters::nonFiniteChunks);
        counters.put("macsInLanes", WorkerCounters::macsInLanes);
        counters.put("sendFailures", WorkerCounters::sendFailures);
        return java.util.Collections.unmodifiableMap(counters);
    }

    private static void appendCounters(final StringBuilder reply, final String prefix, final WorkerClient worker)
    {
        if (worker == null)
        {
            return;
        }
        final WorkerCounters counters = worker.counters();
        COUNTERS.forEach((name, counter) -> reply.append(' ').append(prefix).append(name).append('=')
            .append(counter.applyAsLong(counters)));
        reply.append(' ').append(prefix).append("smoothedRttNs=").append(worker.smoothedRttNs());
        reply.append(' ').append(prefix).append("backend=").append(worker.backend());
        // the reasons hold spaces, which end a value on this protocol: form-encoded (space as '+', the rest %XX); not
        // named "fallback", which ControlProtocol#parse reads to the end of the line
        reply.append(' ').append(prefix).append("passedOver=")
            .append(java.net.URLEncoder.encode(worker.fallback(), java.nio.charset.StandardCharsets.UTF_8));
    }
}
