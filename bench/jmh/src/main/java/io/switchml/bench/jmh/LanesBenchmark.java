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

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

/**
 * Byte-swapping copies between a packet's network-order payload in a direct buffer (as a socket delivers it) and an
 * int array, for a 1 KiB (k = 256) and a 32 KiB (k = 8192) payload. Bytes per operation are 4 * lanes.
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

    UnsafeBuffer packet;
    int[] values;

    @Setup
    public void setup()
    {
        final int length = DataHeaderFlyweight.packetLength(lanes);
        packet = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
        packet.putBytes(0, Chunks.randomBytes(length, 7));
        values = new int[lanes];
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
