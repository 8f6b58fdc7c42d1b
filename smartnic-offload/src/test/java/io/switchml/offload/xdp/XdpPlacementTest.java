package io.switchml.offload.xdp;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlProtocol;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Placement on the real xdp backend (attached to a veth in driver mode) with software behind it: a job goes to xdp
 * when the program can take it and to software otherwise, with the reason in the CREATE reply, in JOBS and in the
 * fallbacks counter on /metrics; one test per capability limit; a job that asks for xdp explicitly is refused, not
 * moved; a backend that fails mid-job aborts the job naming it, and the next job lands on software.
 */
final class XdpPlacementTest
{
    @TempDir
    Path dir;

    private Veth veth;
    private Appliance appliance;

    @BeforeEach
    void start() throws Exception
    {
        veth = new Veth("p");
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("xdp,software").backendOption("xdp", "interface", veth.name).backendOption("xdp", "slots", "96"));
    }

    @AfterEach
    void stop() throws Exception
    {
        if (appliance != null)
        {
            appliance.close();
            assertTrue(XdpAttachment.query(veth.name).isEmpty(), "the program stays attached after the appliance closed");
        }
        veth.close();
    }

    private String send(final String line) throws Exception
    {
        return ControlLine.send(appliance.controlPort(), line);
    }

    private String create(final String name, final String fields) throws Exception
    {
        return send("CREATE name=" + name + " world=4 " + fields);
    }

    @Test
    void fittingJobGoesToXdp() throws Exception
    {
        final String reply = create("fits", "type=float32 k=256 s=32 mac=on");
        assertTrue(reply.startsWith("OK ") && reply.contains(" backend=xdp") && !reply.contains("fallback"), reply);
        assertTrue(jobs().stream().anyMatch(line -> line.contains("name=fits") && line.contains("backend=xdp")), jobs().toString());
    }

    @Test
    void eachCapabilityLimitFallsBackWithItsReason() throws Exception
    {
        // the largest k the veth's MTU (1500) carries: (1500 - 68) / 4
        assertFallback(create("bigk", "type=float32 k=8192 s=32"), "xdp: k=8192 exceeds 358");
        assertFallback(create("small", "type=int32 k=64 s=8"), null);
        assertFallback(send("CREATE name=wide world=65 type=int32 k=64 s=8"), "xdp: world size 65 exceeds 64");
        assertFallback(create("half", "type=float16 k=64 s=8"), "xdp: element type float16 not supported (int32, float32)");
        assertFallback(create("bf", "type=bfloat16 k=64 s=8"), "xdp: element type bfloat16 not supported (int32, float32)");
        assertFallback(create("huge", "type=int32 k=64 s=100"), "xdp: s=100 needs 200 slot versions, capacity is 192");
        // capacity: 96 slot entries; "small" took 8, this one takes 80, leaving 8
        assertTrue(create("most", "type=int32 k=64 s=80").contains(" backend=xdp"));
        assertFallback(create("full", "type=int32 k=64 s=16"), "xdp: only 8 contiguous of 96 slots free, s=16");

        final String metrics = metrics();
        assertTrue(metrics.contains("switchml_backend_up{backend=\"xdp\"} 1.0"), metrics);
        assertTrue(metrics.contains("switchml_backend_fallbacks_total{backend=\"xdp\",reason=\"k=N exceeds N\"} 1.0"), metrics);
        assertTrue(metrics.contains("switchml_backend_absorbed_in_kernel_total{backend=\"xdp\"}"), metrics);
        assertTrue(jobs().stream().anyMatch(line -> line.contains("name=bigk") && line.contains("backend=software") &&
            line.endsWith("fallback=xdp: k=8192 exceeds 358")), jobs().toString());
    }

    private static void assertFallback(final String reply, final String reason)
    {
        if (reason == null)
        {
            assertTrue(reply.contains(" backend=xdp") && !reply.contains("fallback="), reply);
            return;
        }
        assertTrue(reply.startsWith("OK ") && reply.contains(" backend=software fallback=" + reason), reply);
    }

    @Test
    void explicitBackendIsRefusedNotMoved() throws Exception
    {
        final String reply = create("explicit", "type=float32 k=8192 s=32 backend=xdp");
        assertEquals("ERR message=backend xdp cannot take job 'explicit': k=8192 exceeds 358", reply);
        assertTrue(create("named", "type=float32 k=64 s=8 backend=software").contains(" backend=software"));
        assertTrue(create("unknown", "type=float32 k=64 s=8 backend=tofino").startsWith("ERR message=unknown backend 'tofino'"));

        // the other ranks create-if-absent with the same options: one that names another backend is refused
        final String onXdp = "type=float32 k=256 s=8 token=rank-token-1 ifAbsent=true";
        final String created = create("shared", onXdp);
        assertTrue(created.startsWith("OK job=") && created.contains(" backend=xdp"), created);
        assertEquals(created, create("shared", onXdp + " backend=xdp"));
        assertEquals("ERR message=job 'shared' (" + ControlProtocol.intField(ControlProtocol.parse(created), "job") +
            ") runs on backend xdp, not on the software this rank asked for", create("shared", onXdp + " backend=software"));
    }

    @Test
    void detachedProgramAbortsItsJobAndTheNextJobFallsBack() throws Exception
    {
        final String created = send("CREATE name=solo world=1 type=int32 k=64 s=4 mac=off");
        assertTrue(created.contains(" backend=xdp"), created);
        final String jobId = created.split(" ")[1].substring("job=".length());
        final String token = created.split(" ")[2].substring("token=".length());
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort());
            PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8);
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)))
        {
            socket.setSoTimeout(10_000);
            out.println("JOIN job=" + jobId + " rank=0 token=" + token + " ports=40000");
            final String joined = in.readLine();
            assertTrue(joined.startsWith("OK ") && joined.endsWith(" backend=xdp"), joined);
            // an operator (or another tool) takes the program off the interface
            assertEquals(0, Veth.run("ip", "link", "set", "dev", veth.name, "xdpdrv", "off"));
            final String abort = in.readLine();
            assertTrue(abort.startsWith("ABORT job=" + jobId + " reason=backend xdp failed: program detached from " + veth.name), abort);
        }
        final String next = create("after", "type=int32 k=64 s=4");
        assertTrue(next.contains(" backend=software fallback=xdp: program detached from " + veth.name), next);
        assertTrue(metrics().contains("switchml_backend_up{backend=\"xdp\"} 0.0"), "the gauge still says up");
    }

    private String metrics() throws Exception
    {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" +
            appliance.httpPort() + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    private List<String> jobs() throws Exception
    {
        final List<String> lines = new ArrayList<>();
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort());
            PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8);
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)))
        {
            out.println("JOBS");
            String line;
            while ((line = in.readLine()) != null && !line.equals("END"))
            {
                lines.add(line);
            }
        }
        assertFalse(lines.isEmpty());
        return lines;
    }
}
