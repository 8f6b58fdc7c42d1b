package io.switchml.appliance.transport;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.io.TempDir;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Locale;

/**
 * A rough request/response rate of one member against one shard, per transport and chunk size: a window of
 * s = 32 updates, then their 32 results, repeated; the member sends one datagram per system call (java.nio)
 * or the whole window with one sendmmsg ({@link BatchSocket}), which lets the shard receive whole batches. Not a unit test (it runs only with
 * {@code -Dswitchml.bench=true}) and not a JMH benchmark: on a two-core host the member's own sockets share
 * the machine with the shard, so the figures compare transports rather than measure a ceiling. Also
 * prints the shard thread's CPU time per packet, which is what the transport changes.
 * <pre>
 * ./mvnw -q -B -o -pl appliance test -Dtest=TransportThroughputBench -Dswitchml.bench=true
 * </pre>
 */
@EnabledIfSystemProperty(named = "switchml.bench", matches = "true")
class TransportThroughputBench
{
    @TempDir
    Path tempDir;

    @Test
    void requestResponseRates() throws Exception
    {
        final String[] transports = System.getProperty("switchml.bench.transports", "native,epoll").split(",");
        final int[] laneCounts = {256, 8192};
        final boolean mac = Boolean.parseBoolean(System.getProperty("switchml.bench.mac", "false"));
        final long packets = Long.getLong("switchml.bench.packets", 200_000);
        for (final boolean batched : new boolean[]{false, true})
        {
            for (final int lanes : laneCounts)
            {
                for (final String transport : transports)
                {
                    run(transport, lanes, mac, batched, packets);
                }
            }
        }
    }

    private void run(final String transport, final int lanes, final boolean mac, final boolean batched, final long packets)
        throws Exception
    {
        try (Appliance appliance = Appliance.launch(new ApplianceContext().transport(transport).dataPort(0).controlPort(0)
            .httpPort(-1).dir(tempDir.resolve(transport + lanes + batched).toString()));
            ProtocolPeer peer = new ProtocolPeer(appliance.controlPort(), appliance.dataPort(), lanes, 32, mac, batched))
        {
            peer.createAndJoin("bench");
            final long shard = NativeTransportAllocationTest.threadId("switchml-shard-0");
            final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
            peer.roundTrips(packets / 4);
            final long cpu0 = threads.getThreadCpuTime(shard);
            final long bytes0 = threads.getThreadAllocatedBytes(shard);
            final long start = System.nanoTime();
            final long done = peer.roundTrips(packets);
            final long elapsed = System.nanoTime() - start;
            final long cpu = threads.getThreadCpuTime(shard) - cpu0;
            final long bytes = threads.getThreadAllocatedBytes(shard) - bytes0;
            System.out.printf(Locale.ROOT,
                "%-8s k=%-5d MAC %-3s %-13s %,9.0f request/response packets/s  %,6.2f Gbit/s each way  " +
                    "shard CPU %,5.2f us/packet  %,6.1f bytes allocated/packet%n",
                transport, lanes, mac ? "on" : "off", batched ? "mmsg member" : "nio member", done * 1e9 / elapsed,
                done * 8.0 * (40 + 4L * lanes) / elapsed, cpu / 1e3 / done, (double)bytes / done);
        }
    }
}
