package io.switchml.worker;

import io.switchml.protocol.ElementType;
import io.switchml.worker.transport.DatagramTransport;
import io.switchml.worker.transport.TransportKind;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * A private rehearsal of the whole per-packet path of a worker (submission, the I/O agent's scheduling and result
 * handling, loss-recovery bookkeeping, the transport's batched send and receive) while the real join waits for the
 * other ranks, so that the JIT has compiled it before the job's first all-reduce instead of during it.
 * <p>
 * A real {@link WorkerClient} on the job's element type, world size and transport all-reduces small tensors through
 * real UDP sockets on the loopback interface to a reflector thread that turns each update into a result and sends it
 * back; the control connection is a local socket pair. The reflector plays the other ranks' part without their
 * values (a result holds this rank's lanes alone, so the sums are not the job's and nobody reads them): the client
 * quantizes with the job's world size, so that its profile, which the JIT compiles from, is the job's.
 * Nothing reaches the appliance, and the rehearsal's state goes away with it. Small packets (k = {@link #LANES}) give
 * the per-packet code its tens of thousands of invocations within a few tens of megabytes; the per-element kernels
 * at the job's own k are {@link DataPathWarmUp}'s. Tensors go through both a Java array (the bench's and an embedding
 * program's) and, in place, a {@code FloatBuffer} or {@code IntBuffer} view of memory that a shared arena owns (the
 * PyTorch bridge's: it reduces views of a shared-memory mapping, whose session is not null, so every access takes the
 * session check that a buffer from {@code allocateDirect} skips), one call at a time and several in flight; a tensor of
 * zeros and one-element calls (barriers, also through a view, which copies element by element) take the paths of a
 * block with no exponent. The client's socket reads {@link #RECEIVE_BATCH} datagrams per recvmmsg call, so that its
 * receive loop runs after full batches as well as partial ones. The reflector ({@link RehearsalReflector}) drops,
 * duplicates and reorders a few results and answers probes, so that loss recovery's paths run too. Each path a
 * rehearsal leaves out costs a job its compiled code the first time the job takes it: a host agent warmed up for 8 s
 * without the bridge's views and full batches recompiled its packet path through a job's first dozen all-reduces
 * (C2 456-674 ms per agent; docs/bench/worker-transport-2026-11-25.md, session 37).
 * <p>
 * It is bounded by a deadline and a fixed number of rounds; anything that goes wrong ends it quietly (it is only a
 * warm-up), reported through the return value.
 */
final class DataPathRehearsal
{
    /** Elements per packet in the rehearsal. */
    static final int LANES = 256;
    /** Slots of the rehearsal's pool. */
    static final int SLOTS = 32;
    /** Elements per rehearsed tensor: 128 packets. */
    static final int ELEMENTS = LANES * 128;
    /** All-reduces at most: about 20,000 packets each way. */
    static final int ROUNDS = 160;
    /** Datagrams per recvmmsg call of the client's socket: few, so that batches fill as well as end partial. */
    static final int RECEIVE_BATCH = 2;
    /** Calls kept in flight by the asynchronous rounds. */
    private static final int IN_FLIGHT = 4;
    private static final int JOB_ID = 0x5EED;

    private final WorkerContext job;
    private WorkerCounters counters;

    DataPathRehearsal(final WorkerContext job)
    {
        this.job = job;
    }

    /**
     * Rehearse until the rounds are done or the deadline, which may move earlier meanwhile, passes.
     *
     * @param deadline {@link System#nanoTime()} by which to stop, read between all-reduces.
     * @return the all-reduces completed; -1 when the rehearsal could not be set up or failed.
     */
    int run(final LongSupplier deadline)
    {
        final Inet4Address loopback;
        try
        {
            loopback = (Inet4Address)InetAddress.getByAddress(new byte[] {127, 0, 0, 1});
        }
        catch (final IOException ex)
        {
            return -1;
        }
        final WorkerContext context = new WorkerContext()
            .applianceHost(loopback.getHostAddress())
            .jobName("rehearsal")
            .token("local-rehearsal")
            .worldSize(job.worldSize())
            .rank(0)
            .elementType(job.elementType())
            .lanes(LANES)
            .slots(SLOTS)
            .macEnabled(job.macEnabled())
            .transport(job.transport())
            .gso(job.gso())
            .gro(job.gro())
            .fastRetransmit(job.fastRetransmit())
            .progressTimeoutMs(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline.getAsLong() - System.nanoTime())) + 1_000)
            .conclude();
        final TransportKind kind = context.transport().resolve();
        DatagramTransport worker = null;
        WorkerClient client = null;
        RehearsalReflector reflector = null;
        // closed last: after the client, whose agent may still touch a tensor of a call that failed
        final Arena arena = Arena.ofShared();
        try (ServerSocket server = new ServerSocket(0, 1, loopback);
            Socket control = new Socket(loopback, server.getLocalPort());
            Socket controlPeer = server.accept())
        {
            worker = JobJoin.openTransport(kind, context, loopback, RECEIVE_BATCH);
            // the job's MAC setting, under a key of the rehearsal's own: the signing and checking the job will do is rehearsed
            final JobJoin.JoinTerms terms = new JobJoin.JoinTerms("rehearsal", job.macEnabled(),
                java.util.concurrent.ThreadLocalRandom.current().nextLong(), java.util.concurrent.ThreadLocalRandom.current().nextLong());
            reflector = new RehearsalReflector(JobJoin.openTransport(kind, context, loopback), LANES, SLOTS, terms);
            client = reflector.connectClient(context, worker, loopback, control, JOB_ID);
            counters = client.counters();
            return ElementType.isFloat(job.elementType()) ? floatRounds(client, deadline, arena) :
                intRounds(client, deadline, arena);
        }
        catch (final IOException | RuntimeException ex)
        {
            return -1;
        }
        finally
        {
            if (client != null)
            {
                client.close();
            }
            else if (worker != null)
            {
                worker.close();
            }
            if (reflector != null)
            {
                reflector.close();
            }
            try
            {
                arena.close();
            }
            catch (final IllegalStateException ex)
            {
                // still in use by a thread of a client that did not stop: the memory goes with the process
            }
        }
    }

    /**
     * @return the rehearsal client's counters (probes, NACKs, PENDINGs, stale results), or null before it connected.
     */
    WorkerCounters counters()
    {
        return counters;
    }

    private static int floatRounds(final WorkerClient client, final LongSupplier deadline, final Arena arena)
    {
        final float[] values = new float[ELEMENTS];
        for (int i = 0; i < ELEMENTS; i++)
        {
            values[i] = (i % 1000 - 500) * 0.001f;
        }
        // a tensor whose last chunk is partial, as most are
        final float[] partial = java.util.Arrays.copyOf(values, ELEMENTS - LANES / 3);
        final float[] partialResult = new float[partial.length];
        // the bridge's view: a FloatBuffer over shared memory that a shared arena owns (its session is not null, so
        // every access goes through the session check that a buffer from allocateDirect skips), reduced in place
        final FloatBuffer direct = arena.allocate((long)ELEMENTS * Float.BYTES, 64).asByteBuffer()
            .order(ByteOrder.nativeOrder()).asFloatBuffer().put(values).flip();
        // a barrier through the bridge: one element, which the buffer copies element by element
        final FloatBuffer directOne = arena.allocate(Float.BYTES, 64).asByteBuffer().order(ByteOrder.nativeOrder())
            .asFloatBuffer();
        final float[][] pipelined = new float[IN_FLIGHT][ELEMENTS];
        @SuppressWarnings("unchecked")
        final CompletableFuture<Void>[] futures = new CompletableFuture[IN_FLIGHT];
        // all zeros (a block with no exponent, as a gradient's unused rows give) and one element (a barrier)
        final float[] zeros = new float[ELEMENTS];
        final float[] zerosResult = new float[ELEMENTS];
        final float[] one = new float[1];
        int done = 0;
        while (done < ROUNDS && System.nanoTime() - deadline.getAsLong() < 0)
        {
            switch (done % 4)
            {
                case 0 -> client.allReduce(partial, partialResult, ReduceOp.SUM);
                case 1 ->
                {
                    client.allReduce(zeros, zerosResult, ReduceOp.SUM);
                    client.allReduce(one, one, ReduceOp.SUM);
                    client.allReduceAsync(directOne, directOne, ReduceOp.SUM).join();
                    // a NaN and an infinity in the last chunks, as a loss scaler's overflowed step gives, on the heap
                    // and through the bridge's kind of buffer: the not-finite chunk's branches, compiled before the
                    // job's first overflow would throw the compiled packet path away
                    zeros[ELEMENTS - 1] = Float.NaN;
                    client.allReduce(zeros, zerosResult, ReduceOp.SUM);
                    zeros[ELEMENTS - 1] = 0.0f;
                    direct.clear().put(values).flip();
                    direct.put(ELEMENTS - 2, Float.NEGATIVE_INFINITY);
                    client.allReduceAsync(direct, direct, ReduceOp.SUM).join();
                }
                case 2 ->
                {
                    // sum and average in turn (the bridge serves both), each time from the same values
                    direct.clear().put(values).flip();
                    client.allReduceAsync(direct, direct, done % 8 == 2 ? ReduceOp.SUM : ReduceOp.AVERAGE).join();
                }
                default ->
                {
                    for (int i = 0; i < IN_FLIGHT; i++)
                    {
                        futures[i] = client.allReduceAsync(values, pipelined[i], ReduceOp.SUM);
                    }
                    CompletableFuture.allOf(futures).join();
                }
            }
            done++;
        }
        return done;
    }

    private static int intRounds(final WorkerClient client, final LongSupplier deadline, final Arena arena)
    {
        final int[] values = new int[ELEMENTS];
        for (int i = 0; i < ELEMENTS; i++)
        {
            values[i] = i % 1000 - 500;
        }
        final int[] result = new int[ELEMENTS];
        final int[] partial = java.util.Arrays.copyOf(values, ELEMENTS - LANES / 3);
        final int[] partialResult = new int[partial.length];
        final int[] zeros = new int[ELEMENTS];
        final int[] one = new int[1];
        // the bridge's int32 view, as for floats
        final IntBuffer direct = arena.allocate((long)ELEMENTS * Integer.BYTES, 64).asByteBuffer()
            .order(ByteOrder.nativeOrder()).asIntBuffer().put(values).flip();
        final IntBuffer directOne = arena.allocate(Integer.BYTES, 64).asByteBuffer().order(ByteOrder.nativeOrder())
            .asIntBuffer();
        int done = 0;
        while (done < ROUNDS && System.nanoTime() - deadline.getAsLong() < 0)
        {
            switch (done % 4)
            {
                case 0 -> client.allReduce(values, result);
                case 1 ->
                {
                    client.allReduce(zeros, result);
                    client.allReduce(one, one);
                    client.allReduceAsync(directOne, directOne).join();
                }
                case 2 -> client.allReduceAsync(direct, direct).join();
                default -> client.allReduce(partial, partialResult);
            }
            done++;
        }
        return done;
    }
}
