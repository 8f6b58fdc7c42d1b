package io.switchml.bench.jmh;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.Lanes;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;

/**
 * Conversions between a packet's network-order payload in a direct buffer (as a socket delivers it) and arrays, for
 * a 1 KiB (k = 256) and a 32 KiB (k = 8192) payload: plain read and write, the appliance's fused read-and-add, the
 * worker's fused quantize-into-the-packet and dequantize-from-it, and, as the baseline they replaced, the JDK's
 * byte-swapping {@code MemorySegment.copy} (HotSpot's scalar {@code Copy::conjoint_swap}). Bytes per operation are
 * 4 * lanes.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsPrepend = {JvmFlags.ADD_EXPORTS, JvmFlags.NATIVE_ACCESS, JvmFlags.UNSAFE_MEMORY_ACCESS})
public class LanesBenchmark
{
    @Param({"256", "8192"})
    public int lanes;

    private static final ValueLayout.OfInt BIG_ENDIAN_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    UnsafeBuffer packet;
    MemorySegment payload;
    int[] values;
    int[] sums;
    float[] floats;

    @Setup
    public void setup()
    {
        final int length = DataHeaderFlyweight.packetLength(lanes);
        packet = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
        packet.putBytes(0, Chunks.randomBytes(length, 7));
        payload = MemorySegment.ofAddress(packet.addressOffset() + DataHeaderFlyweight.PAYLOAD_OFFSET)
            .reinterpret(4L * lanes);
        values = new int[lanes];
        sums = new int[lanes];
        floats = Chunks.gradientLike(lanes, 11);
    }

    /** The replaced implementation of {@code read}: a byte-swapping bulk copy. */
    @Benchmark
    public int[] swappingCopyRead()
    {
        MemorySegment.copy(payload, BIG_ENDIAN_INT, 0, values, 0, lanes);
        return values;
    }

    /** The appliance's aggregation: add the packet's lanes to the slot's sums. */
    @Benchmark
    public int[] add()
    {
        Lanes.add(packet, DataHeaderFlyweight.PAYLOAD_OFFSET, sums, 0, lanes);
        return sums;
    }

    /** The worker's send path: quantize floats straight into the packet (n = 8, exponent 3). */
    @Benchmark
    public UnsafeBuffer quantize()
    {
        Lanes.quantize(floats, 0, lanes, 1.0e8, 268_435_455, packet, DataHeaderFlyweight.PAYLOAD_OFFSET);
        return packet;
    }

    /** The worker's receive path: dequantize summed lanes straight from the packet. */
    @Benchmark
    public float[] dequantize()
    {
        Lanes.dequantize(packet, DataHeaderFlyweight.PAYLOAD_OFFSET, lanes, 1.0e-8, floats, 0);
        return floats;
    }

    @Benchmark
    public int[] read()
    {
        Lanes.read(packet, DataHeaderFlyweight.PAYLOAD_OFFSET, values, 0, lanes);
        return values;
    }

    @Benchmark
    public UnsafeBuffer write()
    {
        Lanes.write(values, 0, lanes, packet, DataHeaderFlyweight.PAYLOAD_OFFSET);
        return packet;
    }
}
