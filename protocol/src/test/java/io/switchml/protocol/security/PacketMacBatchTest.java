package io.switchml.protocol.security;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.TestSeed;
import jdk.incubator.vector.LongVector;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.BeforeAll;
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

    @BeforeAll
    static void warmUp()
    {
        // the lanes are used once their code is compiled: the cases below then compare them with one at a time
        PacketMacBatch.warmUp(1064, PacketMacBatch.WARM_UP_CALLS);
    }

    @Test
    void theTestJvmHashesInVectorLanesWhereTheCpuHasThem()
    {
        // the launchers and the tests pass --add-modules=jdk.incubator.vector: without it every MAC is scalar
        assertTrue(ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent(), PacketMacBatch.description());
        final boolean hardware = LongVector.SPECIES_PREFERRED.vectorBitSize() >= 512;
        assertEquals(hardware, PacketMacBatch.vectorized(), PacketMacBatch.description());
        assertEquals(hardware, PacketMacBatch.warm(), "the warm-up saw the lanes compiled: " + PacketMacBatch.description());
    }

    @Test
    void everyCountAndLengthGivesEachPacketsOwnMacOffHeapAndOnHeap()
    {
        final long seed = TestSeed.seed();
        final SplittableRandom random = new SplittableRandom(seed);
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
                    batch.compute(k0, k1, length);
                    for (int j = 0; j < count; j++)
                    {
                        assertEquals(PacketMac.compute(k0, k1, packets[j], offsets[j], length), batch.mac(j),
                            "length " + length + ", packet " + j + " of " + count + (heap ? " on the heap" : " off heap") +
                            ", " + TestSeed.describe(seed));
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
                            "length " + length + ", bit " + bit + " of packet " + victim + (macField ? " (MAC field)" : ""));
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
