package io.switchml.offload.xdp;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.backend.Backend;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * On the real xdp backend (program attached to a veth in driver mode, the update put through it with
 * BPF_PROG_TEST_RUN): a rank that leaves while a slot of the program still waits for it aborts the job at once,
 * naming it, as the software shards do, instead of at the slot timeout.
 */
@Timeout(60)
final class XdpLeftRankTest
{
    @TempDir
    Path dir;

    private Veth veth;
    private Appliance appliance;

    @BeforeEach
    void start() throws Exception
    {
        veth = new Veth("l");
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("xdp,software").backendOption("xdp", "interface", veth.name).backendOption("xdp", "slots", "32"));
    }

    @AfterEach
    void stop() throws Exception
    {
        if (appliance != null)
        {
            appliance.close();
        }
        veth.close();
    }

    @Test
    void aRankThatLeavesWhileTheProgramsSlotWaitsForItAbortsTheJobNamingIt() throws Exception
    {
        final String created = ControlLine.send(appliance.controlPort(),
            "CREATE name=leaver world=2 type=int32 k=64 s=4 mac=off slotTimeoutMs=60000");
        assertTrue(created.contains(" backend=xdp") && !created.contains("fallback"), created);
        final int jobId = Integer.parseInt(created.split(" ")[1].substring("job=".length()));
        final String token = created.split(" ")[2].substring("token=".length());
        try (Socket rank0 = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort());
            Socket rank1 = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort()))
        {
            final PrintWriter out0 = new PrintWriter(rank0.getOutputStream(), true, StandardCharsets.UTF_8);
            final PrintWriter out1 = new PrintWriter(rank1.getOutputStream(), true, StandardCharsets.UTF_8);
            final BufferedReader in0 = new BufferedReader(new InputStreamReader(rank0.getInputStream(), StandardCharsets.UTF_8));
            final BufferedReader in1 = new BufferedReader(new InputStreamReader(rank1.getInputStream(), StandardCharsets.UTF_8));
            rank0.setSoTimeout(10_000);
            rank1.setSoTimeout(10_000);
            out0.println("JOIN job=" + jobId + " rank=0 token=" + token + " ports=40000");
            out1.println("JOIN job=" + jobId + " rank=1 token=" + token + " ports=40001");
            assertTrue(in0.readLine().endsWith(" backend=xdp"));
            assertTrue(in1.readLine().endsWith(" backend=xdp"));

            // rank 1's update of chunk 0 goes into the program's slot 0, which now waits for rank 0
            final XdpProgram program = xdp().program();
            assertEquals(BpfTestRun.XDP_DROP, program.testRun(update(jobId, 1, 40001)).retval(), "absorbed by the program");

            final long startNs = System.nanoTime();
            out0.println("LEAVE");
            final String abort = in1.readLine();
            final long waitedMs = (System.nanoTime() - startNs) / 1_000_000L;
            assertTrue(abort.startsWith("ABORT job=" + jobId + " reason=xdp: rank 0 left the job (LEAVE: its process ended or " +
                "closed its client) while slot 0 version 0 (chunk 0) still waits for it; missing ranks [0]"), abort);
            assertTrue(waitedMs < 5_000, waitedMs + " ms");
        }
    }

    private XdpBackend xdp()
    {
        for (final Backend backend : appliance.registry().backends())
        {
            if (backend instanceof XdpBackend xdp)
            {
                return xdp;
            }
        }
        throw new AssertionError("no xdp backend: " + appliance.registry().backends());
    }

    private byte[] update(final int jobId, final int rank, final int port)
    {
        final int lanes = 64;
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(lanes)]);
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
        header.writeHeader(DataHeaderFlyweight.TYPE_UPDATE, jobId, rank, 0, ElementType.INT32, 0, 0, lanes,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.tensorCheckOf(0));
        for (int i = 0; i < lanes; i++)
        {
            header.lane(i, i);
        }
        return Frames.udp(0x7F000001, port, 0x7F000001, appliance.dataPort(), buffer.byteArray(), buffer.capacity());
    }
}
