package io.switchml.appliance.transport;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Locale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Proves that the native transport's shard thread allocates nothing per packet in steady state: after a
 * warm-up (40,000 packets, then until a burst of 4,000 allocates nothing, which Netty never reaches), the
 * shard thread's allocated bytes (ThreadMXBean) grow by no more than a small constant over a burst of
 * 10,000 request/response round trips and over one of 50,000: the same bound for both, so whatever it
 * allocates does not depend on the packet count (in practice both are 0). A member speaking the protocol by hand drives a world-1 job with MACs on,
 * so every update is verified, aggregated, completes its slot and is answered with a signed result. The
 * same measurement of Netty's epoll transport is printed for comparison; Netty allocates per packet.
 */
@Timeout(120)
class NativeTransportAllocationTest
{
    private static final int WARM_UP_PACKETS = 40_000;
    private static final int SETTLE_BURST = 4_000;
    private static final int MAX_SETTLE_BURSTS = 25;
    private static final int SHORT_BURST = 10_000;
    private static final int LONG_BURST = 50_000;
    /**
     * What a burst may allocate whatever its length: usually 0, but on a loaded two-core host a late
     * recompilation can leave a method in C1 or the interpreter for a moment, where the engine's lane copies
     * (MemorySegment views) allocate. One byte per packet would be 50,000 over the long burst; Netty
     * allocates about 290 per packet.
     */
    private static final long TOLERANCE_BYTES = 8_192;

    @TempDir
    Path tempDir;

    record Measurement(String transport, long shortBurstBytes, long longBurstBytes, double packetsPerSec)
    {
        double bytesPerPacket()
        {
            return (double)longBurstBytes / LONG_BURST;
        }
    }

    @Test
    void nativeShardDoesNotAllocatePerPacket() throws Exception
    {
        final Measurement measurement = measure("native");
        final String figures = "native shard thread allocated " + measurement.shortBurstBytes() + " bytes over " + SHORT_BURST +
            " packets and " + measurement.longBurstBytes() + " bytes over " + LONG_BURST;
        assertTrue(measurement.shortBurstBytes() <= TOLERANCE_BYTES && measurement.longBurstBytes() <= TOLERANCE_BYTES, figures);
    }

    @Test
    void nettyEpollAllocationIsMeasuredForComparison() throws Exception
    {
        final Measurement measurement = measure("epoll");
        assertTrue(measurement.longBurstBytes() >= 0);
    }

    private Measurement measure(final String transport) throws Exception
    {
        try (Appliance appliance = Appliance.launch(new ApplianceContext().transport(transport).dataPort(0).controlPort(0)
            .httpPort(-1).dir(tempDir.resolve(transport).toString()));
            ProtocolPeer peer = new ProtocolPeer(appliance.controlPort(), appliance.dataPort(), 256, 32, true))
        {
            assertEquals(transport, appliance.transportName());
            peer.createAndJoin("alloc-" + transport);
            final long shardThreadId = threadId("switchml-shard-0");
            final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();

            peer.roundTrips(WARM_UP_PACKETS);
            // steady state: the JIT has compiled the packet path once a whole burst allocates nothing (Netty never does)
            for (int i = 0, settleBursts = "native".equals(transport) ? MAX_SETTLE_BURSTS : 0; i < settleBursts; i++)
            {
                final long before = threads.getThreadAllocatedBytes(shardThreadId);
                peer.roundTrips(SETTLE_BURST);
                if (threads.getThreadAllocatedBytes(shardThreadId) == before)
                {
                    break;
                }
            }

            final long beforeShort = threads.getThreadAllocatedBytes(shardThreadId);
            peer.roundTrips(SHORT_BURST);
            final long afterShort = threads.getThreadAllocatedBytes(shardThreadId);

            final long startNs = System.nanoTime();
            peer.roundTrips(LONG_BURST);
            final long elapsedNs = System.nanoTime() - startNs;
            final long afterLong = threads.getThreadAllocatedBytes(shardThreadId);

            final Measurement measurement = new Measurement(transport, afterShort - beforeShort, afterLong - afterShort,
                LONG_BURST * 1e9 / elapsedNs);
            System.out.printf(Locale.ROOT,
                "%s shard thread: %d bytes over %d packets, %d bytes over %d packets (%.1f bytes/packet); " +
                    "%.0f request/response packets/s (k=256, s=32, MAC on, java.nio client)%n",
                transport, measurement.shortBurstBytes(), SHORT_BURST, measurement.longBurstBytes(), LONG_BURST,
                measurement.bytesPerPacket(), measurement.packetsPerSec());
            assertEquals(0L, appliance.counter("drops"), "no drops: " + appliance.counterSnapshot());
            return measurement;
        }
    }

    static long threadId(final String name)
    {
        for (final Thread thread : Thread.getAllStackTraces().keySet())
        {
            if (name.equals(thread.getName()))
            {
                return thread.threadId();
            }
        }
        throw new AssertionError("no thread named " + name);
    }
}
