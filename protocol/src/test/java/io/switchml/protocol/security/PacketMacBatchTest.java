package io.switchml.protocol.security;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.TestSeed;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class PacketMacBatchTest
{
    /** Header only, partial words, exactly one and two blocks of eight words, the k = 256 packet, a jumbo one. */
    private static final int[] LENGTHS = { 40, 41, 44, 47, 48, 63, 64, 65, 71, 72, 128, 129, 135, 1064, 1067, 8972 };

    /** The width the library found is the widest this CPU's kernel enables: 8 with AVX-512F, 4 with AVX2, else 1. */
    @Test
    void theLanesAreTheWidestTheCpusFlagsAllow() throws Exception
    {
        final java.util.Set<String> flags = io.switchml.protocol.CpuFlags.read();
        final int expected = flags.contains("avx512f") ? 8 : flags.contains("avx2") ? 4 : 1;
        assertEquals(expected, NativePacketMac.lanes(), NativePacketMac.description() + "; cpuinfo flags " + flags);
    }

    @Test
    void theTestJvmHashesInTheNativeLibrarysLanesWhereTheCpuHasThem()
    {
        // the library is built by the protocol module and carried in its classes: without it every MAC is scalar
        assertTrue(NativePacketMac.lanes() >= 1, "native library not loaded: " + NativePacketMac.description());
        final boolean lanes = NativePacketMac.lanes() > 1;
        assertEquals(lanes, PacketMacBatch.vectorized(), PacketMacBatch.description());
        assertEquals(lanes, PacketMacBatch.warm(), "no warm-up needed: " + PacketMacBatch.description());
        assertTrue(PacketMacBatch.description().contains("native library"), PacketMacBatch.description());
        // loaded from a temporary file that is gone once mapped: a JVM killed later leaves nothing behind
        assertTrue(io.switchml.protocol.NativeLibrary.LOADED_FROM != null, "no temporary file recorded");
        assertFalse(java.nio.file.Files.exists(io.switchml.protocol.NativeLibrary.LOADED_FROM), io.switchml.protocol.NativeLibrary.LOADED_FROM + " left behind");
    }

    @Test
    void everyCountAndLengthGivesEachPacketsOwnMacOffHeapAndOnHeapAtEveryNativeWidth()
    {
        final long seed = TestSeed.seed();
        final int cpuLanes = NativePacketMac.lanes();
        assertTrue(cpuLanes >= 1, "native library not loaded: " + NativePacketMac.description());
        int widths = 0;
        try
        {
            for (final int width : new int[]{ 8, 4, 1 })
            {
                if (width > cpuLanes)
                {
                    continue;
                }
                assertEquals(width, NativePacketMac.limitLanes(width));
                checkEveryCountAndLength(new SplittableRandom(seed + width), "native, " + width + " lanes, " +
                    TestSeed.describe(seed));
                widths++;
            }
        }
        finally
        {
            NativePacketMac.limitLanes(PacketMacBatch.LANES);
        }
        // one at a time always, and every vector width below the CPU's
        assertEquals(cpuLanes == 8 ? 3 : cpuLanes == 4 ? 2 : 1, widths);
    }

    @Test
    void aBatchInTheJavaLanesTakesEveryCountEightAtATime()
    {
        // PacketMacBatch's own path through SipHash24x8 (where the native library does not load): up to 16 packets
        // in runs of eight lanes, a last one or two alone
        assertTrue(SipHash24x8.hardwareSupported(), "the test machines have 512-bit vectors");
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final PacketMacBatch batch = new PacketMacBatch();
        for (final int length : new int[]{ 40, 65, 1064, 8972 })
        {
            for (int count = 1; count <= PacketMacBatch.LANES; count++)
            {
                final long k0 = random.nextLong();
                final long k1 = random.nextLong();
                final UnsafeBuffer[] packets = new UnsafeBuffer[count];
                batch.clear();
                for (int j = 0; j < count; j++)
                {
                    packets[j] = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
                    for (int b = 0; b < length; b++)
                    {
                        packets[j].putByte(b, (byte)random.nextInt());
                    }
                    batch.add(packets[j], 0);
                }
                batch.javaLanes(k0, k1, length);
                for (int j = 0; j < count; j++)
                {
                    assertEquals(PacketMac.compute(k0, k1, packets[j], 0, length), batch.mac(j),
                        "length " + length + ", packet " + j + " of " + count + ", " + TestSeed.describe(seed));
                }
            }
        }
    }

    @Test
    void theJavaLanesGiveEachPacketsOwnMac()
    {
        // SipHash24x8 (the JDK's vector module; used where the native library does not load) called directly: the
        // test JVM's PacketMacBatch uses the native library
        assertTrue(ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent(), "the tests pass the module");
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
        final long[] addresses = new long[SipHash24x8.LANES];
        final long[] macs = new long[SipHash24x8.LANES];
        final long[] scratch = new long[SipHash24x8.SCRATCH];
        for (final int length : LENGTHS)
        {
            final UnsafeBuffer[] packets = new UnsafeBuffer[SipHash24x8.LANES];
            final int[] offsets = new int[SipHash24x8.LANES];
            for (int j = 0; j < packets.length; j++)
            {
                offsets[j] = random.nextInt(16);
                packets[j] = new UnsafeBuffer(ByteBuffer.allocateDirect(offsets[j] + length + 7));
                for (int b = 0; b < packets[j].capacity(); b++)
                {
                    packets[j].putByte(b, (byte)random.nextInt());
                }
                addresses[j] = packets[j].addressOffset() + offsets[j];
            }
            final long k0 = random.nextLong();
            final long k1 = random.nextLong();
            SipHash24x8.hash(k0, k1, addresses, length, macs, scratch);
            for (int j = 0; j < packets.length; j++)
            {
                assertEquals(PacketMac.compute(k0, k1, packets[j], offsets[j], length), macs[j],
                    "length " + length + ", lane " + j + ", " + TestSeed.describe(seed));
            }
        }
    }

    private static void checkEveryCountAndLength(final SplittableRandom random, final String what)
    {
        final PacketMacBatch batch = new PacketMacBatch();
        for (final int length : LENGTHS)
        {
            for (int count = 1; count <= PacketMacBatch.LANES; count++)
            {
                for (final boolean heap : new boolean[]{ false, true })
                {
                    final long k0 = random.nextLong();
                    final long k1 = random.nextLong();
                    final UnsafeBuffer[] packets = new UnsafeBuffer[count];
                    final int[] offsets = new int[count];
                    batch.clear();
                    for (int j = 0; j < count; j++)
                    {
                        // packets at unrelated places and alignments, as a recvmmsg batch or slots' buffers lie
                        offsets[j] = random.nextInt(16);
                        packets[j] = heap ? new UnsafeBuffer(new byte[offsets[j] + length + 7]) :
                            new UnsafeBuffer(ByteBuffer.allocateDirect(offsets[j] + length + 7));
                        for (int b = 0; b < packets[j].capacity(); b++)
                        {
                            packets[j].putByte(b, (byte)random.nextInt());
                        }
                        assertEquals(j, batch.add(packets[j], offsets[j]));
                    }
                    final boolean lanes = batch.compute(k0, k1, length);
                    assertEquals(!heap && count >= PacketMacBatch.MIN_VECTOR_PACKETS && PacketMacBatch.vectorized(),
                        lanes, what + ": lanes for " + count + (heap ? " packets on the heap" : " packets off heap"));
                    for (int j = 0; j < count; j++)
                    {
                        assertEquals(PacketMac.compute(k0, k1, packets[j], offsets[j], length), batch.mac(j),
                            "length " + length + ", packet " + j + " of " + count + (heap ? " on the heap" : " off heap") +
                            ", " + what);
                    }

                    batch.sign(k0, k1, length);
                    for (int j = 0; j < count; j++)
                    {
                        assertTrue(PacketMac.verify(k0, k1, packets[j], offsets[j], length));
                        assertTrue(batch.verified(j));
                    }
                    // one flipped bit in one packet fails that packet only
                    final int victim = random.nextInt(count);
                    final int bit = random.nextInt(length * 8);
                    final int at = offsets[victim] + bit / 8;
                    packets[victim].putByte(at, (byte)(packets[victim].getByte(at) ^ (1 << (bit % 8))));
                    batch.compute(k0, k1, length);
                    for (int j = 0; j < count; j++)
                    {
                        final boolean macField = bit / 8 >= DataHeaderFlyweight.MAC_OFFSET &&
                            bit / 8 < DataHeaderFlyweight.MAC_OFFSET + 8;
                        assertEquals(j != victim, batch.verified(j),
                            "length " + length + ", bit " + bit + " of packet " + victim +
                            (macField ? " (MAC field)" : "") + ", " + what);
                    }
                }
            }
        }
    }

    @Test
    void hashingABatchAllocatesNothing()
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)java.lang.management.ManagementFactory.getThreadMXBean();
        final PacketMacBatch batch = new PacketMacBatch();
        final UnsafeBuffer[] packets = new UnsafeBuffer[PacketMacBatch.LANES];
        for (int j = 0; j < packets.length; j++)
        {
            packets[j] = new UnsafeBuffer(ByteBuffer.allocateDirect(1064));
        }
        long allocated = -1;
        // the first rounds may run code that C2 has not finished: the steady state is what must allocate nothing
        for (int round = 0; round < 20 && allocated != 0; round++)
        {
            final long before = threads.getCurrentThreadAllocatedBytes();
            for (int call = 0; call < 2_000; call++)
            {
                for (final UnsafeBuffer packet : packets)
                {
                    batch.add(packet, 0);
                }
                batch.sign(call, round, 1064);
                batch.clear();
            }
            allocated = threads.getCurrentThreadAllocatedBytes() - before;
        }
        assertEquals(0, allocated, "bytes allocated by 2,000 batches of " + PacketMacBatch.LANES + " packets, " +
            PacketMacBatch.description() + (PacketMacBatch.warm() ? ", lanes in use" : ", one at a time"));
    }

    @Test
    void aBatchHoldsEightPacketsOfAtLeastAHeader()
    {
        final PacketMacBatch batch = new PacketMacBatch();
        final UnsafeBuffer packet = new UnsafeBuffer(ByteBuffer.allocateDirect(64));
        for (int j = 0; j < PacketMacBatch.LANES; j++)
        {
            assertFalse(batch.isFull());
            batch.add(packet, 0);
        }
        assertTrue(batch.isFull());
        assertThrows(IllegalStateException.class, () -> batch.add(packet, 0));
        assertThrows(IllegalArgumentException.class, () -> batch.compute(1, 2, DataHeaderFlyweight.HEADER_LENGTH - 1));
        assertThrows(IndexOutOfBoundsException.class, () -> batch.compute(1, 2, 65));
        batch.clear();
        assertEquals(0, batch.size());
    }
}
