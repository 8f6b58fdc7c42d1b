package io.switchml.offload.tofino.backend;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.control.Job;
import io.switchml.appliance.telemetry.JobCounters;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A job on the {@code tofino-model} backend in a running appliance: what strangers send with its id (from other
 * addresses, other ports) is dropped by the modelled switch and counted on the shard by reason, and moves none of
 * the job's counters, which its tenant reads; its member's packets do.
 */
final class TofinoModelJobCountersTest
{
    private static final int STRANGER_HOSTS = 20;
    private static final int PACKETS_PER_STRANGER = 5;

    @TempDir
    Path dir;

    private Appliance appliance;

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private static ByteBuffer update(final int jobId, final int slot, final int value)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(DataHeaderFlyweight.packetLength(4));
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(buffer), 0).writeHeader(
            DataHeaderFlyweight.TYPE_UPDATE, jobId, 0, 0, ElementType.INT32, slot, 0, 4,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
        for (int lane = 0; lane < 4; lane++)
        {
            header.lane(lane, value + lane);
        }
        return buffer;
    }

    private void awaitCounter(final String name, final long value) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + 10_000;
        while (appliance.counter(name) < value)
        {
            assertTrue(System.currentTimeMillis() < deadline, name + " stayed at " + appliance.counter(name));
            Thread.sleep(10);
        }
        assertEquals(value, appliance.counter(name), name);
    }

    @Test
    @Timeout(60)
    void strangersPacketsWithTheJobsIdAreTheShardsDropsNotTheJobsPackets() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("tofino-model,software"));
        final InetSocketAddress dataAddress = new InetSocketAddress("127.0.0.1", appliance.dataPort());
        try (Socket control = new Socket("127.0.0.1", appliance.controlPort());
            DatagramChannel member = DatagramChannel.open().bind(new InetSocketAddress("127.0.0.1", 0)))
        {
            control.setSoTimeout(10_000);
            final BufferedReader reader = new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8));
            control.getOutputStream().write("CREATE name=pinned world=1 type=int32 k=64 s=2 mac=off token=token-pinned\n"
                .getBytes(StandardCharsets.UTF_8));
            final Map<String, String> created = ControlProtocol.parse(reader.readLine());
            assertEquals("OK", created.get(""), created.toString());
            assertEquals("tofino-model", created.get("backend"), created.toString());
            final int jobId = Integer.parseInt(created.get("job"));
            final int memberPort = ((InetSocketAddress)member.getLocalAddress()).getPort();
            control.getOutputStream().write(("JOIN job=" + jobId + " rank=0 token=token-pinned ports=" + memberPort + "\n")
                .getBytes(StandardCharsets.UTF_8));
            final Map<String, String> joined = ControlProtocol.parse(reader.readLine());
            assertEquals("OK", joined.get(""), joined.toString());
            final long deadline = System.currentTimeMillis() + 10_000;
            while (appliance.registry().activeJob(jobId) == null)
            {
                assertTrue(System.currentTimeMillis() < deadline, "job active");
                Thread.sleep(10);
            }
            final Job job = appliance.registry().activeJob(jobId);
            assertNotNull(job.shardDataPath(), "the job runs in the modelled switch");
            final JobCounters counters = job.counters();

            // rank 0's packet from other hosts (127.0.0.2..) and from the member's own host on another port
            for (int host = 0; host < STRANGER_HOSTS; host++)
            {
                final String address = host == 0 ? "127.0.0.1" : "127.0.0." + (host + 1);
                try (DatagramChannel stranger = DatagramChannel.open().bind(new InetSocketAddress(address, 0)))
                {
                    for (int i = 0; i < PACKETS_PER_STRANGER; i++)
                    {
                        stranger.send(update(jobId, 0, 9999), dataAddress);
                    }
                }
            }
            awaitCounter("drop_not_member", STRANGER_HOSTS * PACKETS_PER_STRANGER);
            assertEquals(0L, counters.packetsIn().get(), "strangers' packets are not the job's");
            assertEquals(0L, counters.drops().get());

            // the member's own packets: a good one (completes: world 1) and one outside the pool (the job's drop)
            member.send(update(jobId, 0, 5), dataAddress);
            final ByteBuffer result = ByteBuffer.allocate(2048);
            member.socket().setSoTimeout(5_000);
            try
            {
                member.socket().receive(new java.net.DatagramPacket(result.array(), result.capacity()));
            }
            catch (final SocketTimeoutException ex)
            {
                throw new AssertionError("no result for the member", ex);
            }
            final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(result), 0);
            assertEquals(DataHeaderFlyweight.TYPE_RESULT, header.type());
            assertEquals(5, header.lane(0), "the stranger's 9999 never reached the slot");
            member.send(update(jobId, 2, 5), dataAddress);
            awaitCounter("drop_job_mismatch", 1);
            assertEquals(2L, counters.packetsIn().get(), "the member's two packets");
            assertEquals(1L, counters.drops().get());
            assertEquals(STRANGER_HOSTS * PACKETS_PER_STRANGER, appliance.counter("drop_not_member"));
        }
    }
}
