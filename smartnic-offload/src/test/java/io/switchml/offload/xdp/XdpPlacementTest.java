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
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
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
import java.util.function.Predicate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Placement on the real xdp backend (attached to a veth in driver mode) with software behind it: a job goes to xdp
 * when the program can take it and to software otherwise, with the reason in the CREATE reply, in JOBS and in the
 * fallbacks counter on /metrics; one test per capability limit; a job that asks for xdp explicitly is refused, not
 * moved; a backend that fails mid-job aborts the job naming it, and the next job lands on software; the program is
 * put back (by default) once its jobs are gone and the interface is free and fit for it, never over another program.
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
        appliance = launch(new ApplianceContext());
    }

    private Appliance launch(final ApplianceContext context) throws Exception
    {
        return Appliance.launch(context.dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
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
    void withReattachOffADetachedProgramAbortsItsJobAndStaysDown() throws Exception
    {
        appliance.close();
        appliance = launch(new ApplianceContext().backendOption("xdp", "reattach", "off"));
        final String jobId = joinSoloJob("solo", () -> assertEquals(0, Veth.run("ip", "link", "set", "dev", veth.name, "xdpdrv", "off")),
            "backend xdp failed: program detached from " + veth.name);
        assertFalse(jobId.isEmpty());
        final String next = create("after", "type=int32 k=64 s=4");
        assertTrue(next.contains(" backend=software fallback=xdp: program detached from " + veth.name), next);
        assertTrue(metrics().contains("switchml_backend_up{backend=\"xdp\"} 0.0"), "the gauge still says up");
        Thread.sleep(AttachmentWatch.HOLD_DOWN_NS / 1_000_000 + 4 * XdpBackend.MONITOR_INTERVAL_MS);
        assertTrue(XdpAttachment.query(veth.name).isEmpty(), "put back with reattach=off");
        assertEquals("BACKEND name=xdp up=0 reason=program detached from " + veth.name, backend());
    }

    @Test
    void aProgramReplacedByAnotherIsLeftAloneAndOursGoesBackWhenItGoes() throws Exception
    {
        final int ours = XdpAttachment.query(veth.name).orElseThrow().id();
        final String late = send("CREATE name=late world=1 type=int32 k=64 s=4 mac=off");
        assertTrue(late.contains(" backend=xdp"), late);
        final int[] foreign = new int[1];
        // an operator (or another loader) puts another program in place of ours
        joinSoloJob("solo", () -> foreign[0] = veth.replaceWithForeignProgram(), "backend xdp failed: program on " + veth.name +
            " replaced by id ");
        final String replaced = "program on " + veth.name + " replaced by id " + foreign[0] + " (switchml_pass)";
        assertTrue(create("meanwhile", "type=int32 k=64 s=4").contains(" backend=software fallback=xdp: " + replaced));
        assertEquals("BACKEND name=xdp up=0 reason=" + replaced + "; not re-attached: " + veth.name + " has XDP program id " +
            foreign[0] + " (switchml_pass), which is never replaced: waiting for it to go", awaitBackend(line -> line.contains("not re-attached")));
        // a job placed before the failure whose ranks complete their join now is refused, not installed
        final String lateJoin = send("JOIN job=" + late.split(" ")[1].substring("job=".length()) + " rank=0 token=" +
            late.split(" ")[2].substring("token=".length()) + " ports=40001");
        assertTrue(lateJoin.startsWith("ERR ") && lateJoin.contains("backend xdp failed to install the job: " + replaced), lateJoin);
        Thread.sleep(2 * AttachmentWatch.HOLD_DOWN_NS / 1_000_000);
        assertEquals(foreign[0], XdpAttachment.query(veth.name).orElseThrow().id(), "the other program was replaced");

        assertEquals(0, Veth.run("ip", "link", "set", "dev", veth.name, "xdpdrv", "off"));
        assertEquals("BACKEND name=xdp up=1", awaitBackend(line -> line.contains("up=1")));
        assertEquals(ours, XdpAttachment.query(veth.name).orElseThrow().id(), "not the same program put back");
        final String metrics = metrics();
        assertTrue(metrics.contains("switchml_backend_up{backend=\"xdp\"} 1.0"), metrics);
        assertTrue(metrics.contains("switchml_backend_reattachments_total{backend=\"xdp\"} 1.0"), metrics);
        joinSoloJob("again", null, null);

        // taken off again within a minute of being put back: the hold-down doubles (its exact values: AttachmentWatchTest)
        final long takenOffNs = System.nanoTime();
        assertEquals(0, Veth.run("ip", "link", "set", "dev", veth.name, "xdpdrv", "off"));
        awaitBackend(line -> line.contains("up=0"));
        assertEquals("BACKEND name=xdp up=1", awaitBackend(line -> line.contains("up=1")));
        final long downMs = (System.nanoTime() - takenOffNs) / 1_000_000;
        assertTrue(downMs >= 2 * AttachmentWatch.HOLD_DOWN_NS / 1_000_000, "put back after " + downMs + " ms");
        assertEquals(ours, XdpAttachment.query(veth.name).orElseThrow().id());
    }

    @Test
    void aProgramLostWithItsInterfaceIsPutBackWhenTheInterfaceReturnsWithAnMtuThatCarriesItsKAndAnMtuLoweredUnderItTakesItDown() throws Exception
    {
        final int ours = XdpAttachment.query(veth.name).orElseThrow().id();
        joinSoloJob("solo", veth::close, "backend xdp failed: " + veth.name + " is gone");
        veth = new Veth("p", 1000);
        // (1000 - 68) / 4 = 233 lanes, below the 358 of MTU 1500 that the backend announced at start
        final String waiting = awaitBackend(line -> line.contains("MTU"));
        assertEquals("BACKEND name=xdp up=0 reason=" + veth.name + " is gone (deleted, or moved to another network namespace); " +
            "not re-attached: " + veth.name + "'s MTU is 1000, which carries k up to 233, below the 358 this backend announced " +
            "(restore the MTU, or restart the appliance to take the new one)", waiting);
        assertTrue(XdpAttachment.query(veth.name).isEmpty());

        assertEquals(0, Veth.run("ip", "link", "set", veth.name, "mtu", "1500"));
        assertEquals("BACKEND name=xdp up=1", awaitBackend(line -> line.contains("up=1")));
        assertEquals(ours, XdpAttachment.query(veth.name).orElseThrow().id());
        joinSoloJob("again", null, null);

        // the MTU lowered under the attached program: down, naming it, and up when it is back, the program never moved
        assertEquals(0, Veth.run("ip", "link", "set", veth.name, "mtu", "1400"));
        assertEquals("BACKEND name=xdp up=0 reason=" + veth.name + "'s MTU is 1400, which carries k up to 333, below the 358 " +
            "this backend announced (restore the MTU, or restart the appliance to take the new one)", awaitBackend(line -> line.contains("up=0")));
        assertEquals(0, Veth.run("ip", "link", "set", veth.name, "mtu", "1500"));
        assertEquals("BACKEND name=xdp up=1", awaitBackend(line -> line.contains("up=1")));
        assertEquals(ours, XdpAttachment.query(veth.name).orElseThrow().id());
        assertTrue(metrics().contains("switchml_backend_reattachments_total{backend=\"xdp\"} 1.0"), "re-attached for an MTU");
    }

    /**
     * A released job whose entry the kernel will not take out of the job table keeps its slots reserved, so that no
     * later job aggregates into slots that the stale entry still claims, and the monitor tries the removal again. The
     * table is frozen (BPF_MAP_FREEZE): the kernel then refuses every write from user space with EPERM. Before this,
     * the failure was logged and the range freed: the 96-slot job below went to xdp.
     */
    @Test
    void aJobWhoseEntryTheKernelWillNotRemoveKeepsItsSlotsReserved() throws Exception
    {
        final XdpBackend backend = (XdpBackend)appliance.backends().stream()
            .filter(candidate -> candidate.name().equals(XdpBackend.NAME)).findFirst().orElseThrow();
        final String jobId = joinSoloJob("stuck", () -> freeze(backend.program().jobTableFd()), null);
        // its rank's control connection closed: the job ends and is released
        final long deadlineNs = System.nanoTime() + 10_000_000_000L;
        while (backend.leftoverJobIds().isEmpty() && System.nanoTime() - deadlineNs < 0)
        {
            Thread.sleep(20);
        }
        assertEquals(List.of(Integer.parseInt(jobId)), backend.leftoverJobIds(), backend.describe());
        assertTrue(backend.describe().endsWith("; released jobs still in the job table (their slots reserved, " +
            "removal retried): [" + jobId + "]"), backend.describe());
        assertFallback(create("whole", "type=int32 k=64 s=96"), "xdp: only 92 contiguous of 96 slots free, s=96");
        assertFallback(create("rest", "type=int32 k=64 s=92"), null);
    }

    /** BPF_MAP_FREEZE through libbpf: the map stays readable and writable by the program, not by syscalls. */
    private static void freeze(final int mapFd) throws Exception
    {
        final MethodHandle freeze = Libbpf.call("bpf_map_freeze",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        try
        {
            assertEquals(0, (int)freeze.invokeExact(mapFd), "bpf_map_freeze");
        }
        catch (final Throwable ex)
        {
            throw new Exception(ex);
        }
    }

    /**
     * Create a one-rank job, expect it on xdp, join it; then run {@code fault} (when not null) and expect the job's
     * ABORT, starting with {@code abortReason} (when not null); then close the rank's control connection.
     *
     * @return the job's id.
     */
    private String joinSoloJob(final String name, final Fault fault, final String abortReason) throws Exception
    {
        final String created = send("CREATE name=" + name + " world=1 type=int32 k=64 s=4 mac=off");
        assertTrue(created.contains(" backend=xdp") && !created.contains("fallback"), created);
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
            if (fault != null)
            {
                fault.run();
            }
            if (abortReason != null)
            {
                final String abort = in.readLine();
                assertTrue(abort.startsWith("ABORT job=" + jobId + " reason=" + abortReason), abort);
            }
        }
        return jobId;
    }

    /** What a test does to the interface or its program while a job runs. */
    @FunctionalInterface
    private interface Fault
    {
        void run() throws Exception;
    }

    /** @return the xdp line of BACKENDS. */
    private String backend() throws Exception
    {
        return ControlLine.send(appliance.controlPort(), "BACKENDS");
    }

    /** @return the first xdp line of BACKENDS that matches, polled every 50 ms for 10 s at most. */
    private String awaitBackend(final Predicate<String> condition) throws Exception
    {
        final long deadlineNs = System.nanoTime() + 10_000_000_000L;
        String line = backend();
        while (!condition.test(line) && System.nanoTime() - deadlineNs < 0)
        {
            Thread.sleep(50);
            line = backend();
        }
        assertTrue(condition.test(line), line);
        return line;
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
