package io.switchml.bench.jmh;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.security.PacketMac;
import io.switchml.protocol.security.PacketMacBatch;
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
 * SipHash-2-4 MAC of a whole data packet in a direct buffer: 1064 bytes is a k = 256 packet (40-byte header and
 * 1 KiB of lanes), 32768 bytes a 32 KiB datagram. {@link #compute} hashes one packet (bytes per operation: the packet
 * length); {@link #batchOfEight} and {@link #batchOfSixteen} sign eight or sixteen packets of that length together
 * through {@link PacketMacBatch}, in vector lanes (bytes per operation: eight or sixteen packet lengths; they fail when
 * the lanes are not in use): the native library's (sixteen: two sets of eight AVX-512 lanes interleaved) by
 * default, the Java lanes ({@code SipHash24x8}, after their warm-up) with {@code -jvmArgsAppend
 * -Dswitchml.mac.native=false}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsPrepend = {JvmFlags.ADD_EXPORTS, JvmFlags.NATIVE_ACCESS, JvmFlags.UNSAFE_MEMORY_ACCESS,
    JvmFlags.VECTOR_MODULE})
public class PacketMacBenchmark
{
    @Param({"1064", "32768"})
    public int packetBytes;

    UnsafeBuffer packet;
    final UnsafeBuffer[] packets = new UnsafeBuffer[PacketMacBatch.LANES];
    final PacketMacBatch batch = new PacketMacBatch();
    long k0;
    long k1;

    @Setup
    public void setup()
    {
        if (packetBytes < DataHeaderFlyweight.HEADER_LENGTH)
        {
            throw new IllegalArgumentException("packetBytes must hold a header: " + packetBytes);
        }
        packet = new UnsafeBuffer(ByteBuffer.allocateDirect(packetBytes));
        packet.putBytes(0, Chunks.randomBytes(packetBytes, 11));
        k0 = 0x0706050403020100L;
        k1 = 0x0F0E0D0C0B0A0908L;
        for (int i = 0; i < packets.length; i++)
        {
            packets[i] = new UnsafeBuffer(ByteBuffer.allocateDirect(packetBytes));
            packets[i].putBytes(0, Chunks.randomBytes(packetBytes, 20 + i));
        }
        if (!PacketMacBatch.warmUp(packetBytes, PacketMacBatch.WARM_UP_CALLS))
        {
            throw new IllegalStateException("no vector lanes: " + PacketMacBatch.description());
        }
    }

    @Benchmark
    public long compute()
    {
        return PacketMac.compute(k0, k1, packet, 0, packetBytes);
    }

    @Benchmark
    public boolean batchOfEight()
    {
        return sign(8);
    }

    @Benchmark
    public boolean batchOfSixteen()
    {
        return sign(16);
    }

    private boolean sign(final int count)
    {
        for (int i = 0; i < count; i++)
        {
            batch.add(packets[i], 0);
        }
        final boolean lanes = batch.sign(k0, k1, packetBytes);
        batch.clear();
        return lanes;
    }
}
