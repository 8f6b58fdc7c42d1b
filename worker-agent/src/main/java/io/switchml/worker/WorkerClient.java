package io.switchml.worker;

import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.LossGenerator;
import io.switchml.protocol.quant.BlockFloatingPoint;
import io.switchml.protocol.security.PacketMac;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.switchml.protocol.DataHeaderFlyweight.FLAG_EXPONENT_ONLY;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_POOL_VERSION;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_RETRANSMIT;
import static io.switchml.protocol.DataHeaderFlyweight.NO_EXPONENT;

/**
 * A worker's side of the SwitchML protocol (Algorithm 4 with loss recovery): it streams a tensor
 * through the appliance's s slots, keeps one packet in flight per slot, retransmits a slot's packet
 * when its timer expires, flips the slot's pool version on every reuse, and assembles the results.
 * <p>
 * Float tensors use block floating point with look-ahead exponents: each update for chunk j carries
 * this worker's exponent of chunk j+s (the next chunk on the same slot) and the result returns the
 * maximum over workers, which all workers then use to quantize chunk j+s. The first chunk of each
 * slot in a call has no predecessor, so each call opens with one exponent-only round per slot.
 * <p>
 * Calls are blocking and run the protocol on the calling thread; one call at a time per client.
 * Every rank must issue the same sequence of calls with the same tensor lengths.
 */
public final class WorkerClient implements AutoCloseable
{
    private static final long NANOS_PER_MS = 1_000_000L;
    private static final int PHASE_EXPONENT = 1;
    private static final int PHASE_DATA = 2;
    private static final int PHASE_DONE = 3;

    private final WorkerContext context;
    private final int jobId;
    private final int rank;
    private final int worldSize;
    private final int lanesPerSlot;
    private final int slotCount;
    private final byte elementType;
    private final Socket controlSocket;
    private final DatagramChannel[] channels;
    private final int shardCount;
    private final boolean macEnabled;
    private final long macK0;
    private final long macK1;
    private final String jobName;
    private final Selector selector;
    private final Thread controlReader;
    private final WorkerCounters counters = new WorkerCounters();
    private final LossGenerator txLoss;
    private final LossGenerator rxLoss;

    private final ByteBuffer[] slotPackets;
    private final UnsafeBuffer[] slotViews;
    private final IntBuffer[] slotLanes;
    private final DataHeaderFlyweight header = new DataHeaderFlyweight();
    private final ByteBuffer receiveBuffer;
    private final UnsafeBuffer receiveView;
    private final IntBuffer receiveLanes;
    private final int[] lanes;
    private final float[] stage;

    private final int[] slotVersion;
    private final int[] slotChunk;
    private final int[] slotPhase;
    private final int[] slotExponent;
    private final long[] slotDeadlineNs;
    private final long[] slotSentNs;
    private final boolean[] slotRetransmitted;
    private final long minTimeoutNs;
    private final long maxTimeoutNs;
    private long smoothedRttNs;
    private long rttVarianceNs;
    private long retransmitTimeoutNs;
    private short[] chunkExponents = new short[0];

    private long streamSequence;
    private volatile String abortReason;
    private volatile boolean closing;

    private WorkerClient(
        final WorkerContext context, final Socket controlSocket, final DatagramChannel[] channels, final int jobId,
        final Map<String, String> joinReply) throws IOException
    {
        this.context = context;
        this.jobId = jobId;
        this.jobName = context.jobName();
        this.channels = channels;
        this.shardCount = channels.length;
        this.macEnabled = "on".equals(joinReply.get("mac"));
        final String key = ControlProtocol.requiredField(joinReply, "key");
        if (key.length() != 32)
        {
            throw new IOException("appliance sent a malformed MAC key");
        }
        this.macK0 = Long.parseUnsignedLong(key.substring(0, 16), 16);
        this.macK1 = Long.parseUnsignedLong(key.substring(16), 16);
        this.rank = context.rank();
        this.worldSize = context.worldSize();
        this.lanesPerSlot = context.lanes();
        this.slotCount = context.slots();
        this.elementType = context.elementType();
        this.controlSocket = controlSocket;
        this.txLoss = LossGenerator.of(context.lossRate(), context.lossSeed() * 1_000_003L + rank);
        this.rxLoss = LossGenerator.of(context.lossRate(), context.lossSeed() * 1_000_033L + rank + 17);

        final int packetCapacity = DataHeaderFlyweight.packetLength(lanesPerSlot);
        final ByteBuffer all = ByteBuffer.allocateDirect(packetCapacity * slotCount);
        slotPackets = new ByteBuffer[slotCount];
        slotViews = new UnsafeBuffer[slotCount];
        slotLanes = new IntBuffer[slotCount];
        for (int i = 0; i < slotCount; i++)
        {
            final ByteBuffer packet = all.slice(i * packetCapacity, packetCapacity);
            slotPackets[i] = packet;
            slotViews[i] = new UnsafeBuffer(packet);
            slotLanes[i] = packet.slice(DataHeaderFlyweight.PAYLOAD_OFFSET, packetCapacity - DataHeaderFlyweight.PAYLOAD_OFFSET)
                .order(ByteOrder.BIG_ENDIAN).asIntBuffer();
        }
        receiveBuffer = ByteBuffer.allocateDirect(DataHeaderFlyweight.MAX_UDP_PAYLOAD + 1);
        receiveView = new UnsafeBuffer(receiveBuffer);
        receiveLanes = receiveBuffer.slice(DataHeaderFlyweight.PAYLOAD_OFFSET,
            receiveBuffer.capacity() - DataHeaderFlyweight.PAYLOAD_OFFSET).order(ByteOrder.BIG_ENDIAN).asIntBuffer();
        lanes = new int[lanesPerSlot];
        stage = new float[lanesPerSlot];

        slotVersion = new int[slotCount];
        slotChunk = new int[slotCount];
        slotPhase = new int[slotCount];
        slotExponent = new int[slotCount];
        slotDeadlineNs = new long[slotCount];
        slotSentNs = new long[slotCount];
        slotRetransmitted = new boolean[slotCount];
        minTimeoutNs = Math.min(context.minRetransmitTimeoutMs(), context.retransmitTimeoutMs()) * NANOS_PER_MS;
        maxTimeoutNs = context.maxRetransmitTimeoutMs() * NANOS_PER_MS;
        retransmitTimeoutNs = context.retransmitTimeoutMs() * NANOS_PER_MS;

        selector = Selector.open();
        for (final DatagramChannel channel : channels)
        {
            channel.register(selector, SelectionKey.OP_READ);
        }
        controlReader = Thread.ofPlatform().daemon().name("switchml-worker-control-" + rank).start(this::readControl);
    }

    /**
     * Bind a data socket, join the job through the appliance's control endpoint, and wait until
     * every rank has joined.
     *
     * @param context worker configuration; {@link WorkerContext#conclude()} is called here.
     * @return a connected client.
     * @throws AllReduceException when the appliance refuses the join (the message says why) or
     *                            cannot be reached.
     */
    public static WorkerClient connect(final WorkerContext context)
    {
        context.conclude();
        Socket socket = null;
        DatagramChannel[] channels = new DatagramChannel[0];
        final String where = "appliance " + context.applianceHost() + ":" + context.controlPort();
        try
        {
            socket = new Socket();
            socket.setTcpNoDelay(true);
            socket.setKeepAlive(true);
            socket.connect(new InetSocketAddress(context.applianceHost(), context.controlPort()), 5_000);
            final OutputStream out = socket.getOutputStream();

            send(out, ControlProtocol.CREATE + " name=" + context.jobName() + " tenant=" + context.tenant() +
                " world=" + context.worldSize() + " type=" + ElementType.name(context.elementType()) + " k=" + context.lanes() +
                " s=" + context.slots() + " mac=" + (context.macEnabled() ? "on" : "off") + " token=" + context.token() +
                " ifAbsent=true" + (context.slotTimeoutMs() > 0 ? " slotTimeoutMs=" + context.slotTimeoutMs() : ""));
            socket.setSoTimeout(10_000);
            final Map<String, String> created = expectOk(readLine(socket), context, where, "create");
            final int jobId = ControlProtocol.intField(created, "job");
            final String[] dataPorts = ControlProtocol.requiredField(created, "dataPorts").split(",");

            channels = new DatagramChannel[dataPorts.length];
            final StringBuilder ports = new StringBuilder();
            for (int shard = 0; shard < channels.length; shard++)
            {
                final DatagramChannel channel = DatagramChannel.open();
                channels[shard] = channel;
                channel.setOption(StandardSocketOptions.SO_RCVBUF, context.socketBufferBytes());
                channel.setOption(StandardSocketOptions.SO_SNDBUF, context.socketBufferBytes());
                channel.bind(new InetSocketAddress(socket.getLocalAddress(), 0));
                ports.append(shard == 0 ? "" : ",").append(((InetSocketAddress)channel.getLocalAddress()).getPort());
            }

            send(out, ControlProtocol.JOIN + " job=" + jobId + " rank=" + context.rank() + " token=" + context.token() +
                " ports=" + ports);
            socket.setSoTimeout((int)Math.min(Integer.MAX_VALUE, context.joinTimeoutMs()));
            final Map<String, String> joined = expectOk(readLine(socket), context, where, "join");
            socket.setSoTimeout(0);
            for (int shard = 0; shard < channels.length; shard++)
            {
                channels[shard].connect(new InetSocketAddress(socket.getInetAddress(), Integer.parseInt(dataPorts[shard])));
                channels[shard].configureBlocking(false);
            }
            return new WorkerClient(context, socket, channels, jobId, joined);
        }
        catch (final IOException | NumberFormatException ex)
        {
            closeQuietly(socket, channels);
            throw new AllReduceException("cannot join job '" + context.jobName() + "' as rank " + context.rank() + " at " +
                where + ": " + ex, ex);
        }
        catch (final RuntimeException ex)
        {
            closeQuietly(socket, channels);
            throw ex;
        }
    }

    private static void send(final OutputStream out, final String line) throws IOException
    {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static Map<String, String> expectOk(
        final String line, final WorkerContext context, final String where, final String step)
    {
        if (line == null)
        {
            throw new AllReduceException(where + " closed the control connection during the " + step + " of job '" +
                context.jobName() + "'");
        }
        final Map<String, String> reply = ControlProtocol.parse(line);
        if (!ControlProtocol.OK.equals(reply.get("")))
        {
            throw new AllReduceException(step + " of job '" + context.jobName() + "' as rank " + context.rank() + " refused: " +
                reply.getOrDefault("message", line));
        }
        return reply;
    }

    private static String readLine(final Socket socket) throws IOException
    {
        final StringBuilder builder = new StringBuilder();
        final var in = socket.getInputStream();
        int b;
        while ((b = in.read()) != -1)
        {
            if (b == '\n')
            {
                return builder.toString();
            }
            builder.append((char)b);
        }
        return builder.isEmpty() ? null : builder.toString();
    }

    private void readControl()
    {
        try
        {
            final BufferedReader reader = new BufferedReader(
                new InputStreamReader(controlSocket.getInputStream(), StandardCharsets.UTF_8));
            String line;
            while ((line = reader.readLine()) != null)
            {
                final Map<String, String> message = ControlProtocol.parse(line);
                if (ControlProtocol.ABORT.equals(message.get("")))
                {
                    abortReason = "job '" + jobName + "' (" + jobId + ") aborted by the appliance: " + message.getOrDefault("reason", "no reason given");
                    selector.wakeup();
                    return;
                }
            }
            if (!closing)
            {
                abortReason = "the appliance closed the control connection of job " + jobId + " (appliance stopped or restarted)";
                selector.wakeup();
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            if (!closing)
            {
                abortReason = "lost the control connection to the appliance for job " + jobId + ": " + ex.getMessage();
                selector.wakeup();
            }
        }
    }

    public WorkerCounters counters()
    {
        return counters;
    }

    public int rank()
    {
        return rank;
    }

    public int worldSize()
    {
        return worldSize;
    }

    /**
     * All-reduce a float tensor.
     *
     * @param src the local tensor; every rank passes the same length.
     * @param dst where the result goes; may be src for an in-place reduction.
     * @param op  sum or average.
     * @throws IllegalArgumentException for a NaN or infinity, naming the offset, before anything is sent.
     * @throws AllReduceException       when the job is aborted or makes no progress.
     */
    public synchronized void allReduce(final float[] src, final float[] dst, final ReduceOp op)
    {
        requireType(ElementType.FLOAT32);
        requireLength(src.length, dst.length);
        run(new TensorView.FloatArray(src, dst), op, "float[" + src.length + "]");
    }

    /**
     * All-reduce an int tensor exactly (sums wrap around like Java int arithmetic).
     */
    public synchronized void allReduce(final int[] src, final int[] dst)
    {
        requireType(ElementType.INT32);
        requireLength(src.length, dst.length);
        run(new TensorView.IntArray(src, dst), ReduceOp.SUM, "int[" + src.length + "]");
    }

    /**
     * All-reduce the remaining elements of a float buffer (heap or direct) into another buffer.
     * Positions are not changed.
     */
    public synchronized void allReduce(final FloatBuffer src, final FloatBuffer dst, final ReduceOp op)
    {
        requireType(ElementType.FLOAT32);
        requireLength(src.remaining(), dst.remaining());
        run(new TensorView.FloatBufferView(src, dst, stage), op, "FloatBuffer[" + src.remaining() + "]");
    }

    /**
     * All-reduce the remaining elements of an int buffer (heap or direct) into another buffer.
     */
    public synchronized void allReduce(final IntBuffer src, final IntBuffer dst)
    {
        requireType(ElementType.INT32);
        requireLength(src.remaining(), dst.remaining());
        run(new TensorView.IntBufferView(src, dst), ReduceOp.SUM, "IntBuffer[" + src.remaining() + "]");
    }

    private void requireType(final byte type)
    {
        if (type != elementType)
        {
            throw new IllegalArgumentException("job " + jobId + " aggregates " + ElementType.name(elementType) +
                ", not " + ElementType.name(type));
        }
    }

    private static void requireLength(final int srcLength, final int dstLength)
    {
        if (dstLength < srcLength)
        {
            throw new IllegalArgumentException("destination holds " + dstLength + " elements, source " + srcLength);
        }
    }

    private void run(final TensorView tensor, final ReduceOp op, final String tensorName)
    {
        final String reason = abortReason;
        if (reason != null)
        {
            throw new AllReduceException(reason);
        }
        final int length = tensor.length();
        if (length == 0)
        {
            return;
        }
        final int chunks = (length + lanesPerSlot - 1) / lanesPerSlot;
        final boolean isFloat = tensor.isFloat();
        if (isFloat)
        {
            computeExponents(tensor, chunks, length, tensorName);
        }
        final long base = streamSequence;
        streamSequence += chunks;
        final int active = Math.min(slotCount, chunks);
        final long nowNs = System.nanoTime();
        for (int slot = 0; slot < active; slot++)
        {
            slotChunk[slot] = slot;
            if (isFloat)
            {
                slotPhase[slot] = PHASE_EXPONENT;
                sendExponentOnly(slot, base, nowNs);
            }
            else
            {
                slotPhase[slot] = PHASE_DATA;
                sendData(tensor, slot, base, chunks, length, nowNs);
            }
        }

        final double averageDivisor = op == ReduceOp.AVERAGE ? worldSize : 1.0;
        int completed = 0;
        long lastProgressNs = System.nanoTime();
        final long progressTimeoutNs = context.progressTimeoutMs() * NANOS_PER_MS;
        try
        {
            while (completed < chunks)
            {
                int received = 0;
                for (final DatagramChannel channel : channels)
                {
                    int bytes;
                    while ((bytes = channel.read(receiveBuffer.clear())) > 0)
                    {
                        received++;
                        final int progress = onResult(tensor, bytes, base, chunks, length, averageDivisor);
                        if (progress >= 0)
                        {
                            completed += progress;
                            lastProgressNs = System.nanoTime();
                        }
                    }
                }

                final long now = System.nanoTime();
                long nextDeadlineNs = now + progressTimeoutNs;
                boolean expired = false;
                for (int slot = 0; slot < active; slot++)
                {
                    if (slotPhase[slot] == PHASE_DONE)
                    {
                        continue;
                    }
                    if (now - slotDeadlineNs[slot] >= 0)
                    {
                        if (!expired)
                        {
                            expired = true;
                            backOff();
                        }
                        retransmit(slot, now);
                    }
                    nextDeadlineNs = Math.min(nextDeadlineNs, slotDeadlineNs[slot]);
                }

                final String abort = abortReason;
                if (abort != null)
                {
                    throw new AllReduceException(abort);
                }
                if (now - lastProgressNs > progressTimeoutNs)
                {
                    throw new AllReduceException("job " + jobId + " rank " + rank + ": no result for " +
                        context.progressTimeoutMs() + " ms on " + tensorName + " (" + (chunks - completed) + " of " + chunks +
                        " chunks pending, pending slots " + pendingSlots(active) + "); the appliance or another rank is not responding");
                }
                if (received == 0 && completed < chunks)
                {
                    final long waitMs = Math.max(1, (nextDeadlineNs - now + NANOS_PER_MS - 1) / NANOS_PER_MS);
                    selector.select(waitMs);
                    selector.selectedKeys().clear();
                }
            }
            counters.allReduces++;
        }
        catch (final IOException ex)
        {
            throw new AllReduceException("job " + jobId + " rank " + rank + ": data socket failed: " + ex, ex);
        }
    }

    private List<Integer> pendingSlots(final int active)
    {
        final List<Integer> pending = new ArrayList<>();
        for (int slot = 0; slot < active && pending.size() < 16; slot++)
        {
            if (slotPhase[slot] != PHASE_DONE)
            {
                pending.add(slot);
            }
        }
        return pending;
    }

    private void computeExponents(final TensorView tensor, final int chunks, final int length, final String tensorName)
    {
        if (chunkExponents.length < chunks)
        {
            chunkExponents = new short[chunks];
        }
        for (int chunk = 0; chunk < chunks; chunk++)
        {
            final int from = chunk * lanesPerSlot;
            final int count = Math.min(lanesPerSlot, length - from);
            final int exponent = tensor.maxExponent(from, count);
            if (exponent == BlockFloatingPoint.NON_FINITE)
            {
                final int index = tensor.firstNonFinite(from, count);
                throw new IllegalArgumentException("cannot all-reduce " + tensorName + " on job " + jobId + " rank " + rank +
                    ": element at offset " + index + " is NaN or infinite; nothing was sent");
            }
            chunkExponents[chunk] = (short)exponent;
        }
    }

    private void sendExponentOnly(final int slot, final long base, final long nowNs)
    {
        final int chunk = slotChunk[slot];
        header.wrap(slotViews[slot], 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, slotVersion[slot] | FLAG_EXPONENT_ONLY, elementType, slot,
            base + chunk, 0, NO_EXPONENT, chunkExponents[chunk]);
        transmit(slot, DataHeaderFlyweight.HEADER_LENGTH, nowNs);
    }

    private void sendData(
        final TensorView tensor, final int slot, final long base, final int chunks, final int length, final long nowNs)
    {
        final int chunk = slotChunk[slot];
        final int from = chunk * lanesPerSlot;
        final int count = Math.min(lanesPerSlot, length - from);
        int scaleExponent = NO_EXPONENT;
        int lookahead = NO_EXPONENT;
        double scale = 1.0;
        int limit = Integer.MAX_VALUE;
        if (tensor.isFloat())
        {
            scaleExponent = slotExponent[slot];
            final int local = chunkExponents[chunk];
            if (local > scaleExponent)
            {
                throw new AllReduceException("job " + jobId + " rank " + rank + ": agreed exponent " + scaleExponent +
                    " for chunk " + (base + chunk) + " is below this rank's " + local +
                    "; ranks are not submitting the same sequence of tensors");
            }
            scale = BlockFloatingPoint.scale(scaleExponent, worldSize);
            limit = BlockFloatingPoint.laneLimit(worldSize);
            final int next = chunk + slotCount;
            lookahead = next < chunks ? chunkExponents[next] : NO_EXPONENT;
        }
        tensor.toLanes(from, count, scale, limit, lanes);
        slotLanes[slot].clear();
        slotLanes[slot].put(lanes, 0, count);
        header.wrap(slotViews[slot], 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, slotVersion[slot], elementType, slot,
            base + chunk, count, scaleExponent, lookahead);
        transmit(slot, DataHeaderFlyweight.packetLength(count), nowNs);
    }

    private void transmit(final int slot, final int packetLength, final long nowNs)
    {
        final ByteBuffer packet = slotPackets[slot];
        packet.limit(packetLength).position(0);
        slotDeadlineNs[slot] = nowNs + retransmitTimeoutNs;
        slotSentNs[slot] = nowNs;
        if (txLoss.shouldDrop())
        {
            counters.lossInjected++;
            return;
        }
        try
        {
            if (macEnabled)
            {
                PacketMac.sign(macK0, macK1, slotViews[slot], 0, packetLength);
            }
            if (channels[slot % shardCount].write(packet) == 0)
            {
                counters.sendFailures++;
                return;
            }
            counters.packetsSent++;
        }
        catch (final IOException ex)
        {
            // ICMP port unreachable surfaces here when the appliance is gone; the timer retries and
            // the control connection or the progress timeout ends the call with a clear error
            counters.sendFailures++;
        }
    }

    private void retransmit(final int slot, final long nowNs)
    {
        slotRetransmitted[slot] = true;
        final UnsafeBuffer view = slotViews[slot];
        view.putByte(DataHeaderFlyweight.FLAGS_OFFSET, (byte)(view.getByte(DataHeaderFlyweight.FLAGS_OFFSET) | FLAG_RETRANSMIT));
        counters.retransmissions++;
        transmit(slot, slotPackets[slot].limit(), nowNs);
    }

    /**
     * Every slot shares one path to the appliance, so an expiry doubles the timeout of all of them,
     * as TCP does for a connection, until a round trip that was not retransmitted is measured.
     */
    private void backOff()
    {
        retransmitTimeoutNs = Math.min(retransmitTimeoutNs * 2, maxTimeoutNs);
    }

    /**
     * RFC 6298 estimator over round trips of packets that were not retransmitted (Karn's rule):
     * RTO = SRTT + 4 RTTVAR, clamped to the configured minimum and maximum. A slot's round trip
     * includes waiting for the slowest worker, so the estimate adapts to load, not just the network.
     */
    private void onRttSample(final long rttNs)
    {
        if (smoothedRttNs == 0)
        {
            smoothedRttNs = rttNs;
            rttVarianceNs = rttNs / 2;
        }
        else
        {
            rttVarianceNs += (Math.abs(smoothedRttNs - rttNs) - rttVarianceNs) >> 2;
            smoothedRttNs += (rttNs - smoothedRttNs) >> 3;
        }
        retransmitTimeoutNs = Math.max(minTimeoutNs, Math.min(maxTimeoutNs, smoothedRttNs + 4 * rttVarianceNs));
    }

    /**
     * @return the smoothed round-trip time of a slot, in nanoseconds (0 before the first sample).
     */
    public long smoothedRttNs()
    {
        return smoothedRttNs;
    }

    /**
     * @return the current retransmission timeout before backoff, in nanoseconds.
     */
    public long retransmitTimeoutNs()
    {
        return retransmitTimeoutNs;
    }

    /**
     * @return chunks completed by this packet (0 or 1), or -1 when it was stale or malformed.
     */
    private int onResult(
        final TensorView tensor, final int bytes, final long base, final int chunks, final int length,
        final double averageDivisor)
    {
        counters.packetsReceived++;
        if (rxLoss.shouldDrop())
        {
            counters.lossInjected++;
            return -1;
        }
        if (DataHeaderFlyweight.validate(receiveView, 0, bytes) != DropReason.NONE ||
            (macEnabled && !PacketMac.verify(macK0, macK1, receiveView, 0, bytes)))
        {
            counters.malformedResults++;
            return -1;
        }
        header.wrap(receiveView, 0);
        final int slot = header.slotIndex();
        if (header.type() != DataHeaderFlyweight.TYPE_RESULT || header.jobId() != jobId || slot >= slotCount)
        {
            counters.malformedResults++;
            return -1;
        }
        final int phase = slotPhase[slot];
        final boolean exponentOnly = header.isExponentOnly();
        if (phase == PHASE_DONE || header.chunkSequence() != base + slotChunk[slot] ||
            header.poolVersion() != slotVersion[slot] || exponentOnly != (phase == PHASE_EXPONENT))
        {
            counters.staleResults++;
            return -1;
        }

        final long nowNs = System.nanoTime();
        if (!slotRetransmitted[slot])
        {
            onRttSample(nowNs - slotSentNs[slot]);
        }
        slotRetransmitted[slot] = false;
        slotVersion[slot] ^= 1;
        if (phase == PHASE_EXPONENT)
        {
            slotExponent[slot] = header.lookaheadExponent();
            slotPhase[slot] = PHASE_DATA;
            sendData(tensor, slot, base, chunks, length, nowNs);
            return 0;
        }

        final int chunk = slotChunk[slot];
        final int count = header.elementCount();
        final int expected = Math.min(lanesPerSlot, length - chunk * lanesPerSlot);
        if (count != expected)
        {
            throw new AllReduceException("job " + jobId + " rank " + rank + ": result for chunk " + (base + chunk) + " has " +
                count + " elements, expected " + expected + "; ranks are not submitting tensors of the same length");
        }
        receiveLanes.clear();
        receiveLanes.get(lanes, 0, count);
        final double multiplier = tensor.isFloat() ?
            1.0 / (BlockFloatingPoint.scale(header.scaleExponent(), worldSize) * averageDivisor) : 1.0;
        tensor.fromLanes(lanes, count, multiplier, chunk * lanesPerSlot);

        final int next = chunk + slotCount;
        if (next < chunks)
        {
            slotChunk[slot] = next;
            slotExponent[slot] = header.lookaheadExponent();
            sendData(tensor, slot, base, chunks, length, nowNs);
        }
        else
        {
            slotPhase[slot] = PHASE_DONE;
        }
        return 1;
    }

    /**
     * Leave the job in an orderly way and release the sockets.
     */
    public void close()
    {
        closing = true;
        try
        {
            controlSocket.getOutputStream().write((ControlProtocol.LEAVE + "\n").getBytes(StandardCharsets.UTF_8));
            controlSocket.getOutputStream().flush();
        }
        catch (final IOException ignore)
        {
            // appliance already gone
        }
        closeQuietly(controlSocket, channels);
        try
        {
            selector.close();
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
    }

    private static void closeQuietly(final Socket socket, final DatagramChannel[] channels)
    {
        try
        {
            if (socket != null)
            {
                socket.close();
            }
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        for (final DatagramChannel channel : channels)
        {
            try
            {
                if (channel != null)
                {
                    channel.close();
                }
            }
            catch (final IOException ignore)
            {
                // closing anyway
            }
        }
    }
}
