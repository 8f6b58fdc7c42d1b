package io.switchml.offload.tofino.backend;

import com.google.protobuf.TextFormat;
import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.model.P4Names;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.offload.tofino.p4runtime.ModelP4RuntimeServer;
import io.switchml.offload.tofino.p4runtime.CompiledP4Info;
import io.switchml.offload.tofino.p4runtime.P4InfoIndex;
import io.switchml.offload.tofino.p4runtime.SwitchCertificates;
import io.switchml.ops.OpsCommand;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import p4.config.v1.P4InfoOuterClass.P4Info;
import picocli.CommandLine;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Admission on the Tofino backends, in a running appliance: each limit of the program (world size, wire format, k,
 * MAC, register space) and an unreachable switch sends the job to the next backend with the reason in the CREATE
 * reply and in JOBS (what `switchml ops jobs describe` shows); so does a switch that refuses the job's first write, with
 * the switch's own message; a job that names the backend is refused, not moved.
 * The tofino-model backend installs its jobs through P4Runtime over TCP into the pipeline model.
 */
final class TofinoPlacementTest
{
    @TempDir
    Path dir;

    private Appliance appliance;

    @AfterEach
    void stop() throws Exception
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private String send(final String line) throws Exception
    {
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort());
            PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8);
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)))
        {
            socket.setSoTimeout(10_000);
            out.println(line);
            return in.readLine();
        }
    }

    private List<String> jobs() throws Exception
    {
        final List<String> lines = new ArrayList<>();
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort());
            PrintWriter out = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.UTF_8);
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)))
        {
            socket.setSoTimeout(10_000);
            out.println("JOBS");
            String line;
            while ((line = in.readLine()) != null && !line.isEmpty() && !line.equals("END"))
            {
                lines.add(line);
            }
        }
        return lines;
    }

    /**
     * {@code switchml ops jobs describe JOB} against this appliance, in-process; returns what it printed.
     */
    private String describe(final String job)
    {
        return ops("jobs", "describe", job);
    }

    /**
     * {@code switchml ops ARGS} against this appliance, in-process; returns what it printed.
     */
    private String ops(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine ops = new CommandLine(new OpsCommand());
        ops.setOut(new PrintWriter(out, true));
        ops.setErr(new PrintWriter(err, true));
        final String[] all = java.util.Arrays.copyOf(args, args.length + 2);
        all[args.length] = "--dir=" + dir;
        all[args.length + 1] = "--control-port=" + appliance.controlPort();
        final int exit = ops.execute(all);
        assertEquals(0, exit, () -> out + "\n" + err);
        return out.toString();
    }

    private static void assertFallback(final String reply, final String reason)
    {
        if (reason == null)
        {
            assertTrue(reply.startsWith("OK ") && reply.contains(" backend=tofino-model") && !reply.contains("fallback="), reply);
            return;
        }
        assertTrue(reply.startsWith("OK ") && reply.contains(" backend=software fallback=" + reason), reply);
    }

    @Test
    void eachLimitOfTheProgramFallsBackWithItsReason() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("tofino-model,software").backendOption("tofino-model", "registers", "16"));

        assertFallback(send("CREATE name=fits world=4 type=float32 k=256 s=8 mac=off"), null);
        assertFallback(send("CREATE name=wide world=33 type=int32 k=64 s=2 mac=off"), "tofino-model: world size 33 exceeds 32");
        assertFallback(send("CREATE name=half world=4 type=float16 k=64 s=2 mac=off"),
            "tofino-model: element type float16 not supported (int32, float32)");
        assertFallback(send("CREATE name=bf world=4 type=bfloat16 k=64 s=2 mac=off"),
            "tofino-model: element type bfloat16 not supported (int32, float32)");
        assertFallback(send("CREATE name=k128 world=4 type=int32 k=128 s=2 mac=off"),
            "tofino-model: k=128 not in {64, 256} (64 lanes per pass, 256 by recirculation)");
        assertFallback(send("CREATE name=k1024 world=4 type=int32 k=1024 s=2 mac=off"), "tofino-model: k=1024 exceeds 256");
        assertFallback(send("CREATE name=mac world=4 type=int32 k=64 s=2 mac=on"), "tofino-model: mac=on not supported");
        assertFallback(send("CREATE name=huge world=4 type=int32 k=64 s=20 mac=off"),
            "tofino-model: s=20 needs 40 slot versions, capacity is 32");
        // 16 slots: "fits" holds 8, this one 6, leaving 2
        assertFallback(send("CREATE name=more world=2 type=int32 k=64 s=6 mac=off"), null);
        assertFallback(send("CREATE name=full world=2 type=int32 k=64 s=4 mac=off"),
            "tofino-model: s=4 does not fit the free register space: 2 contiguous of 16 slots free");

        assertTrue(jobs().stream().anyMatch(l -> l.contains("name=k128") && l.contains("backend=software") &&
            l.endsWith("fallback=tofino-model: k=128 not in {64, 256} (64 lanes per pass, 256 by recirculation)")), jobs().toString());
        assertTrue(jobs().stream().anyMatch(l -> l.contains("name=fits") && l.contains("backend=tofino-model")), jobs().toString());

        // what an operator sees: each refused job's backend row names the limit
        final String[][] described = {
            {"wide", "world size 33 exceeds 32"},
            {"half", "element type float16 not supported (int32, float32)"},
            {"bf", "element type bfloat16 not supported (int32, float32)"},
            {"k128", "k=128 not in {64, 256} (64 lanes per pass, 256 by recirculation)"},
            {"mac", "mac=on not supported"},
            {"huge", "s=20 needs 40 slot versions, capacity is 32"},
            {"full", "s=4 does not fit the free register space: 2 contiguous of 16 slots free"}};
        for (final String[] job : described)
        {
            final String text = describe(job[0]);
            assertTrue(text.contains("backend         software (passed over: tofino-model: " + job[1] + ")"), text);
        }
        assertTrue(describe("fits").contains("backend         tofino-model (its first choice)"), describe("fits"));

        assertEquals("ERR message=backend tofino-model cannot take job 'explicit': k=128 not in {64, 256} (64 lanes per pass, 256 by " +
            "recirculation)", send("CREATE name=explicit world=2 type=int32 k=128 s=2 mac=off backend=tofino-model"));
    }

    @Test
    void oneTenantCannotTakeTheSwitchFromAnother() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("tofino-model,software").tenantOffloadSlots(16));
        final String quota = "tofino-model: tenant 'a' would hold 20 offload slot versions, over its quota of 16 " +
            "(switchml.appliance.tenant.offload.slots)";
        assertFallback(send("CREATE name=a1 tenant=a world=2 type=int32 k=64 s=4 mac=off"), null);
        assertFallback(send("CREATE name=a2 tenant=a world=2 type=int32 k=64 s=4 mac=off"), null);
        assertFallback(send("CREATE name=a3 tenant=a world=2 type=int32 k=64 s=2 mac=off"), quota);
        assertEquals("ERR message=backend tofino-model cannot take job 'a4': " + quota.substring("tofino-model: ".length()),
            send("CREATE name=a4 tenant=a world=2 type=int32 k=64 s=2 mac=off backend=tofino-model"));
        assertFallback(send("CREATE name=b1 tenant=b world=2 type=int32 k=64 s=8 mac=off"), null);

        // a job of tenant a ends: its share comes back
        final String a1 = jobs().stream().filter(line -> line.contains("name=a1 ")).findFirst().orElseThrow();
        final String id = a1.replaceFirst("^.*?\\bjob=(\\d+).*$", "$1");
        assertTrue(send("ABORTJOB job=" + id + " reason=done").startsWith("OK"), a1);
        // s=4 lands only if a's share is back to 8: a3, which went to software, must not have been charged
        assertFallback(send("CREATE name=a5 tenant=a world=2 type=int32 k=64 s=4 mac=off"), null);
    }

    @Test
    void aSwitchThatRefusesTheJobSendsItToTheNextBackendWithTheSwitchsMessage() throws Exception
    {
        // a switch (the model behind its P4Runtime server on TCP) on which job id 1 is already taken, as an entry
        // another controller left behind
        final TofinoModel model = new TofinoModel(7471);
        final Object lock = new Object();
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(),
            model, lock))
        {
            // written after the start: what a switch holds at start that this appliance does not is removed then
            // (aRestartedApplianceRemovesWhatTheLastOneLeftOnTheSwitchAndPlacesItsJobs)
            appliance = Appliance.launch(tofinoAt(server.port()));
            synchronized (lock)
            {
                JobInstaller.admit(model, new JobInstaller.JobImage(1, 2, ElementType.INT32, 64, 2, 500, 900, new int[0], new int[0],
                    new int[0]));
            }
            final String refused = send("CREATE name=taken world=2 type=int32 k=64 s=2 mac=off");
            assertTrue(refused.startsWith("OK job=1 ") && refused.contains(" backend=software fallback=tofino: switch 127.0.0.1:" +
                server.port() + " refused the write: SwitchMLIngress.job_table: an entry with key [1] exists"), refused);

            final String placed = send("CREATE name=placed world=2 type=int32 k=256 s=4 mac=off");
            assertTrue(placed.startsWith("OK job=2 ") && placed.contains(" backend=tofino") && !placed.contains("fallback"), placed);
            synchronized (lock)
            {
                assertEquals(2, model.tableEntries(P4Names.JOB_TABLE), "job 2 admitted on the switch at CREATE");
            }
        }
    }

    @Test
    void aRestartedApplianceRemovesWhatTheLastOneLeftOnTheSwitchAndPlacesItsJobs() throws Exception
    {
        // an appliance killed with the switch up left: job 1 installed (group 1), job 2 admitted, and what a failed
        // attach of job 3 left (its pinning, its replicas' destinations and group 3, no job entry); group 1500 is
        // outside this appliance's range (1-1024) and is not its to remove
        final TofinoModel model = new TofinoModel(7471);
        final Object lock = new Object();
        final JobInstaller.JobImage stale = new JobInstaller.JobImage(1, 2, ElementType.INT32, 64, 4, 0, 1,
            new int[] {0x0A09_0001, 0x0A09_0002}, new int[] {5000, 5001}, new int[] {1, 2});
        final JobInstaller.JobImage failedAttach = new JobInstaller.JobImage(3, 2, ElementType.INT32, 64, 4, 8, 3,
            new int[] {0x0A09_0003, 0x0A09_0004}, new int[] {5000, 5001}, new int[] {1, 2});
        JobInstaller.install(model, stale);
        JobInstaller.admit(model, new JobInstaller.JobImage(2, 2, ElementType.INT32, 64, 4, 4, 2, new int[0], new int[0], new int[0]));
        JobInstaller.install(model, failedAttach);
        JobInstaller.withdraw(model, failedAttach);
        model.writeMulticastGroup(io.switchml.offload.tofino.PipelineControl.UpdateType.INSERT, 1500, List.of());
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(),
            model, lock))
        {
            appliance = Appliance.launch(tofinoAt(server.port()));
            synchronized (lock)
            {
                assertEquals(0, model.tableEntries(P4Names.JOB_TABLE), "the dead run's jobs removed");
                assertEquals(0, model.tableEntries(P4Names.RANK_SOURCE));
                assertEquals(0, model.tableEntries(P4Names.REPLICA_DEST));
                assertEquals(List.of(1500), model.readMulticastGroups(), "groups of the range removed, the one outside kept");
            }

            // job ids restart at 1: the new job 1 takes the switch, with group 1 again, and runs on it
            final String created = send("CREATE name=again world=2 type=int32 k=64 s=4 mac=off token=token-again");
            assertTrue(created.startsWith("OK job=1 ") && created.contains(" backend=tofino") && !created.contains("fallback"), created);
            final int[] ports = new int[2];
            final List<Socket> controls = new ArrayList<>();
            try
            {
                for (int rank = 0; rank < 2; rank++)
                {
                    ports[rank] = freePort();
                    final Socket control = new Socket(InetAddress.getLoopbackAddress(), appliance.controlPort());
                    controls.add(control);
                    control.setSoTimeout(10_000);
                    control.getOutputStream().write(("JOIN job=1 rank=" + rank + " token=token-again ports=" + ports[rank] + "\n")
                        .getBytes(StandardCharsets.UTF_8));
                }
                // a JOIN is answered once every rank has joined
                for (final Socket control : controls)
                {
                    final String joined = new BufferedReader(new InputStreamReader(control.getInputStream(), StandardCharsets.UTF_8))
                        .readLine();
                    assertTrue(joined != null && joined.startsWith("OK"), joined);
                }
                final long deadline = System.nanoTime() + 10_000_000_000L;
                while (true)
                {
                    synchronized (lock)
                    {
                        if (model.tableEntries(P4Names.RANK_SOURCE) == 2 && model.multicastGroups() == 2)
                        {
                            break;
                        }
                    }
                    assertTrue(System.nanoTime() < deadline, "job 1 attached on the switch");
                    Thread.sleep(20);
                }
                final List<TofinoModel.PacketOut> results;
                synchronized (lock)
                {
                    assertEquals(List.of(), model.process(update(1, 0, ports[0], 10)));
                    results = model.process(update(1, 1, ports[1], 100));
                }
                assertEquals(2, results.size(), "the result to both ranks of the new job 1");
                for (final TofinoModel.PacketOut result : results)
                {
                    assertEquals(0x7F00_0001, result.dstAddr());
                    final io.switchml.protocol.DataHeaderFlyweight header = new io.switchml.protocol.DataHeaderFlyweight()
                        .wrap(new org.agrona.concurrent.UnsafeBuffer(result.payload()), 0);
                    assertEquals(io.switchml.protocol.DataHeaderFlyweight.TYPE_RESULT, header.type());
                    assertEquals(110, header.lane(0), "the new job's values, not the dead one's");
                }
            }
            finally
            {
                for (final Socket control : controls)
                {
                    control.close();
                }
            }
        }
    }

    private TofinoModel.PacketIn update(final int jobId, final int rank, final int srcPort, final int value)
    {
        final byte[] bytes = new byte[io.switchml.protocol.DataHeaderFlyweight.packetLength(4)];
        final io.switchml.protocol.DataHeaderFlyweight header = new io.switchml.protocol.DataHeaderFlyweight()
            .wrap(new org.agrona.concurrent.UnsafeBuffer(bytes), 0).writeHeader(io.switchml.protocol.DataHeaderFlyweight.TYPE_UPDATE,
                jobId, rank, 0, ElementType.INT32, 0, 0, 4, io.switchml.protocol.DataHeaderFlyweight.NO_EXPONENT,
                io.switchml.protocol.DataHeaderFlyweight.NO_EXPONENT);
        for (int lane = 0; lane < 4; lane++)
        {
            header.lane(lane, value);
        }
        return new TofinoModel.PacketIn(1, 0x7F00_0001, srcPort, 0x7F00_0001, appliance.dataPort(), bytes, 0, bytes.length);
    }

    @Test
    void unreachableSwitchIsAFallbackReason() throws Exception
    {
        final int port = freePort();
        appliance = Appliance.launch(tofinoAt(port).backendOption("tofino", "timeout-ms", "5000"));
        final String reply = send("CREATE name=nosw world=2 type=int32 k=64 s=2 mac=off");
        assertTrue(reply.startsWith("OK ") && reply.contains(" backend=software fallback=tofino: not started: switch 127.0.0.1:" + port +
            " not reachable: UNAVAILABLE"), reply);
        final String text = describe("nosw");
        assertTrue(text.contains("backend         software (passed over: tofino: not started: switch 127.0.0.1:" + port +
            " not reachable: UNAVAILABLE"), text);
        // and the operator's status says why the backend is down, not only that it is
        final String status = ops("status");
        assertTrue(status.contains("backends    tofino down (not started: switch 127.0.0.1:" + port + " not reachable: UNAVAILABLE") &&
            status.contains("), software up"), status);
    }

    @Test
    void aSwitchRunningTheCompilersP4InfoTakesJobsAndABadP4InfoOptionIsNamedAtStart() throws Exception
    {
        // the switch runs the program under a compiler's names and ids (pipe.SwitchMLIngress.job_table, its own
        // numbering): the backend reads its P4Info back, matches it by name and installs by the switch's ids
        final P4Info compiled = CompiledP4Info.of(P4InfoIndex.switchml().info());
        final TofinoModel model = new TofinoModel(7471);
        final Object lock = new Object();
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1,
            P4InfoIndex.resolve(compiled, P4InfoIndex.switchml()), model, lock))
        {
            appliance = Appliance.launch(tofinoAt(server.port()));
            assertPlacedOnTofino("compiled");
            synchronized (lock)
            {
                assertEquals(1, model.tableEntries(P4Names.JOB_TABLE), "the job admitted on the switch at CREATE");
                assertEquals(List.of(appliance.dataPort()), java.util.Arrays.stream(model.dataPorts()).boxed().toList(),
                    "the backend told the parser its data port (an ephemeral one here)");
            }
            appliance.close();
            appliance = null;

            // pushing a compiled program: its P4Info is checked against ours before the switch is asked
            final Path config = Files.write(dir.resolve("tofino.bin"), new byte[] {1, 2, 3});
            final Path lacking = Files.writeString(dir.resolve("p4info.txtpb"),
                TextFormat.printer().printToString(compiled.toBuilder().removeRegisters(0).build()));
            final String prefix = "switchml.appliance.tofino.";
            assertEquals("tofino: not started: " + prefix + "p4info " + lacking + ": the P4Info is not switchml.p4's: it declares no " +
                "register SwitchMLIngress.lanes_31.values", fallbackWith(server, Map.of("pipeline-config", config.toString(), "p4info",
                    lacking.toString())));
            assertEquals("tofino: not started: " + prefix + "pipeline-config needs " + prefix + "p4info: the compiler's P4Info " +
                "of that program (bf-p4c --p4runtime-files), whose ids the compiled program uses",
                fallbackWith(server, Map.of("pipeline-config", config.toString())));
            assertEquals("tofino: not started: " + prefix + "p4info is used only with " + prefix + "pipeline-config (without it " +
                "the switch's own P4Info is read back and checked)", fallbackWith(server, Map.of("p4info", lacking.toString())));

            final Path good = Files.writeString(dir.resolve("compiled.txtpb"), TextFormat.printer().printToString(compiled));
            appliance = Appliance.launch(tofinoAt(server.port()).backendOption("tofino", "election-id", "2")
                .backendOption("tofino", "pipeline-config", config.toString()).backendOption("tofino", "p4info", good.toString()));
            assertPlacedOnTofino("pushed");
        }
    }

    @Test
    void aSwitchServingP4RuntimeOverTlsIsReachedWithTheConfiguredCertificate() throws Exception
    {
        final Path switchPem = SwitchCertificates.create(dir, "switch");
        final io.grpc.ServerCredentials tls = io.grpc.TlsServerCredentials.newBuilder().keyManager(
            io.switchml.protocol.ControlTls.keyManagers(SwitchCertificates.keystore(dir, "switch"), SwitchCertificates.password(dir, "switch")))
            .build();
        final TofinoModel model = new TofinoModel();
        final Object lock = new Object();
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(),
            model, lock, tls))
        {
            final String plaintext = fallbackWith(server, Map.of());
            assertTrue(plaintext.startsWith("tofino: not started: switch 127.0.0.1:" + server.port() + " not reachable: "), plaintext);
            final String prefix = "switchml.appliance.tofino.";
            assertEquals("tofino: not started: " + prefix + "tls-keystore needs " + prefix + "tls-ca: the certificate that the " +
                "switch's P4Runtime server must present", fallbackWith(server, Map.of("tls-keystore", switchPem.toString(),
                    "tls-password-file", switchPem.toString())));
            assertTrue(fallbackWith(server, Map.of("tls-ca", dir.resolve("missing.pem").toString())).startsWith(
                "tofino: not started: " + prefix + "tls-ca: cannot read trusted certificates from " + dir.resolve("missing.pem")));

            appliance = Appliance.launch(tofinoAt(server.port()).backendOption("tofino", "tls-ca", switchPem.toString()));
            assertPlacedOnTofino("tls");
            synchronized (lock)
            {
                assertEquals(1, model.tableEntries(P4Names.JOB_TABLE), "the job admitted over TLS");
            }
        }
    }

    @Test
    void aLostSessionIsReestablishedAndTheSwitchIsBroughtBackInLine() throws Exception
    {
        final int port = freePort();
        final TofinoModel model = new TofinoModel();
        final Object lock = new Object();
        ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", port), 1, P4InfoIndex.switchml(),
            model, lock);
        try
        {
            // 8 slots of register space, so that a range not given back shows as a job that no longer fits
            appliance = Appliance.launch(tofinoAt(port).backendOption("tofino", "timeout-ms", "5000")
                .backendOption("tofino", "registers", "8"));
            final String first = send("CREATE name=before world=2 type=int32 k=64 s=4 mac=off joinTimeoutMs=1500");
            assertTrue(first.startsWith("OK ") && first.contains(" backend=tofino") && !first.contains("fallback"), first);

            // the switch's agent goes away: new jobs go elsewhere saying why, and the job nobody joined is released
            // while the session is down, so its entry stays on the switch for now
            server.close();
            // (a CREATE in the moment before the stream reports the loss falls back with the refused write instead)
            final String during = awaitReply("CREATE name=during world=2 type=int32 k=64 s=4 mac=off", "; reconnecting");
            assertTrue(during.contains(" backend=software fallback=tofino: P4Runtime stream to 127.0.0.1:" + port + " failed"), during);
            awaitGone("before");
            synchronized (lock)
            {
                assertEquals(1, model.tableEntries(P4Names.JOB_TABLE), "its entry could not be removed while the switch was away");
                model.writeValueSet(P4Names.DATA_PORTS, List.of()); // and the agent forgot the data port
            }

            // it comes back on the same address with its tables: the backend reconnects, writes the data port again
            // and removes the released job's entry
            server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", port), 1, P4InfoIndex.switchml(), model, lock);
            assertTrue(!awaitReply("CREATE name=after world=2 type=int32 k=64 s=4 mac=off", " backend=tofino").contains("fallback"));
            synchronized (lock)
            {
                assertEquals(1, model.tableEntries(P4Names.JOB_TABLE), "the released job's entry removed, the new one written");
                assertEquals(List.of(appliance.dataPort()), java.util.Arrays.stream(model.dataPorts()).boxed().toList());
            }

            // now it restarts empty: a job still waiting for its ranks is admitted again, and the range of one released
            // meanwhile comes back although the switch no longer has its entry (NOT_FOUND counts as removed)
            assertPlacedOnTofino("waiting", 2);
            final String doomed = send("CREATE name=doomed world=2 type=int32 k=64 s=2 mac=off joinTimeoutMs=1500");
            assertTrue(doomed.contains(" backend=tofino") && !doomed.contains("fallback"), doomed + ": all 8 slots taken now");
            server.close();
            awaitGone("doomed");
            final TofinoModel empty = new TofinoModel();
            server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", port), 1, P4InfoIndex.switchml(), empty, lock);
            final String last = awaitReply("CREATE name=last world=2 type=int32 k=64 s=2 mac=off", " backend=tofino");
            assertTrue(!last.contains("fallback"), last + ": fits only if the released job's range came back");
            synchronized (lock)
            {
                assertEquals(3, empty.tableEntries(P4Names.JOB_TABLE), "after and waiting admitted again, last written");
                assertEquals(List.of(appliance.dataPort()), java.util.Arrays.stream(empty.dataPorts()).boxed().toList());
            }
            try (java.net.http.HttpClient client = java.net.http.HttpClient.newHttpClient())
            {
                final String metrics = client.send(java.net.http.HttpRequest.newBuilder(java.net.URI.create("http://127.0.0.1:" +
                    appliance.httpPort() + "/metrics")).build(), java.net.http.HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("switchml_backend_reconnects_total{backend=\"tofino\"} 2.0"), metrics);
            }
        }
        finally
        {
            server.close();
        }
    }

    private void awaitGone(final String name) throws Exception
    {
        final long deadline = System.nanoTime() + 10_000_000_000L;
        while (jobs().stream().anyMatch(line -> line.contains("name=" + name + " ")))
        {
            assertTrue(System.nanoTime() < deadline, "job " + name + " was never released: " + jobs());
            Thread.sleep(50);
        }
    }

    /**
     * @return the reply to a CREATE of a fresh name, sent every 100 ms until it contains the text (10 s at most).
     */
    private String awaitReply(final String create, final String text) throws Exception
    {
        final long deadline = System.nanoTime() + 10_000_000_000L;
        for (int attempt = 0; ; attempt++)
        {
            final String reply = send(create.replaceFirst("name=(\\S+)", "name=$1-" + attempt));
            if (reply.contains(text) || System.nanoTime() > deadline)
            {
                assertTrue(reply.contains(text), reply);
                return reply;
            }
            Thread.sleep(100);
        }
    }

    private static int freePort() throws java.io.IOException
    {
        try (ServerSocket socket = new ServerSocket(0))
        {
            return socket.getLocalPort();
        }
    }

    /**
     * CREATE a job that must land on the tofino backend with nothing passed over.
     */
    private void assertPlacedOnTofino(final String name) throws Exception
    {
        assertPlacedOnTofino(name, 4);
    }

    private void assertPlacedOnTofino(final String name, final int slots) throws Exception
    {
        final String reply = send("CREATE name=" + name + " world=2 type=int32 k=64 s=" + slots + " mac=off");
        assertTrue(reply.startsWith("OK ") && reply.contains(" backend=tofino") && !reply.contains("fallback"), reply);
    }

    /**
     * @return an appliance's context with the tofino backend first, at a switch on loopback, this host on its port 1.
     */
    private ApplianceContext tofinoAt(final int switchPort)
    {
        return new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString()).backends("tofino,software")
            .backendOption("tofino", "switch", "127.0.0.1:" + switchPort).backendOption("tofino", "ports", "127.0.0.1=1");
    }

    /**
     * @return the fallback reason of a job created on an appliance whose tofino backend has these extra options.
     */
    private String fallbackWith(final ModelP4RuntimeServer server, final Map<String, String> options) throws Exception
    {
        ApplianceContext context = tofinoAt(server.port());
        for (final Map.Entry<String, String> option : options.entrySet())
        {
            context = context.backendOption("tofino", option.getKey(), option.getValue());
        }
        try (Appliance withOptions = Appliance.launch(context))
        {
            appliance = withOptions;
            final String reply = send("CREATE name=fallback world=2 type=int32 k=64 s=4 mac=off");
            assertTrue(reply.startsWith("OK ") && reply.contains(" backend=software fallback="), reply);
            return reply.substring(reply.indexOf(" fallback=") + " fallback=".length());
        }
        finally
        {
            appliance = null;
        }
    }
}
