package io.switchml.offload.tofino.p4runtime;

import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.JobInstaller.JobImage;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.P4Names;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import p4.config.v1.P4InfoOuterClass.P4Info;

import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The control plane over real gRPC (TCP on loopback) against the model behind its P4Runtime server: a job installed
 * through P4Runtime aggregates in the model and its result reaches every rank; a removed job's packets are dropped;
 * a switch's refusals (duplicate entry, a backup controller, another device, another program, nobody listening)
 * come back with the switch's code and message, within the deadline.
 */
final class P4RuntimeModelTest
{
    private static final int DATA_PORT = 7471;
    private final Object lock = new Object();
    private TofinoModel model;
    private ModelP4RuntimeServer server;
    private P4RuntimeSwitch client;

    @BeforeEach
    void start() throws Exception
    {
        model = new TofinoModel(DATA_PORT);
        server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(), model, lock);
        client = P4RuntimeSwitch.connect("127.0.0.1", server.port(), 1, 10, 2000, P4InfoIndex.switchml(), null);
    }

    @AfterEach
    void stop()
    {
        client.close();
        server.close();
    }

    private static JobImage job(final int world)
    {
        final int[] addrs = new int[world];
        final int[] ports = new int[world];
        final int[] switchPorts = new int[world];
        for (int rank = 0; rank < world; rank++)
        {
            addrs[rank] = 0x0A00_0010 + rank;
            ports[rank] = 41000 + rank;
            switchPorts[rank] = rank + 1;
        }
        return new JobImage(7, world, ElementType.INT32, 64, 4, 100, 3, addrs, ports, switchPorts);
    }

    private static TofinoModel.PacketIn update(final JobImage job, final int rank, final int slot, final int base)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(64)]);
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
        header.writeHeader(DataHeaderFlyweight.TYPE_UPDATE, job.jobId(), rank, 0, ElementType.INT32, slot, slot, 64,
            DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.tensorCheckOf(slot));
        for (int lane = 0; lane < 64; lane++)
        {
            header.lane(lane, base * 1000 + lane);
        }
        return new TofinoModel.PacketIn(rank + 1, job.addrs()[rank], job.ports()[rank], 0x0A0000FE, DATA_PORT, buffer.byteArray(), 0,
            buffer.capacity());
    }

    @Test
    void jobInstalledThroughP4RuntimeAggregatesAndRemovedJobIsDropped() throws Exception
    {
        installAggregateAndRemove(client, model);
    }

    @Test
    void aCompilersNamesAndIdsAreMatchedByName() throws Exception
    {
        // a switch running the program as a compiler numbered and named it: the control plane reads its P4Info back,
        // finds our tables, actions and registers by name, and writes by the switch's ids
        final P4Info compiled = CompiledP4Info.of(P4InfoIndex.switchml().info());
        final TofinoModel compiledModel = new TofinoModel(DATA_PORT);
        try (ModelP4RuntimeServer compiledSwitch = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1,
                P4InfoIndex.resolve(compiled, P4InfoIndex.switchml()), compiledModel, lock);
            P4RuntimeSwitch session = P4RuntimeSwitch.connect("127.0.0.1", compiledSwitch.port(), 1, 10, 2000,
                P4InfoIndex.switchml(), null))
        {
            installAggregateAndRemove(session, compiledModel);
        }

        // a switch that already runs the compiled program, checked against the compiler's P4Info given with it (what
        // the backend does after a lost session before it would push again)
        final TofinoModel runningModel = new TofinoModel(DATA_PORT);
        try (ModelP4RuntimeServer runningSwitch = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1,
                P4InfoIndex.resolve(compiled, P4InfoIndex.switchml()), runningModel, lock);
            P4RuntimeSwitch session = P4RuntimeSwitch.connect("127.0.0.1", runningSwitch.port(), 1, 10, 2000,
                P4InfoIndex.resolve(compiled, P4InfoIndex.switchml()), null))
        {
            installAggregateAndRemove(session, runningModel);
        }

        // pushing the compiled program with the compiler's P4Info, checked against ours first
        final TofinoModel pushedModel = new TofinoModel(DATA_PORT);
        try (ModelP4RuntimeServer pushedSwitch = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1,
                P4InfoIndex.resolve(compiled, P4InfoIndex.switchml()), pushedModel, lock);
            P4RuntimeSwitch session = P4RuntimeSwitch.connect("127.0.0.1", pushedSwitch.port(), 1, 10, 2000,
                P4InfoIndex.resolve(compiled, P4InfoIndex.switchml()), new byte[] {1, 2, 3}))
        {
            installAggregateAndRemove(session, pushedModel);
        }
    }

    @Test
    void aP4InfoThatDiffersFromOursIsRefusedNamingTheDifference() throws Exception
    {
        final P4Info ours = P4InfoIndex.switchml().info();
        final P4Info compiled = CompiledP4Info.of(ours);
        assertRefused(compiled.toBuilder().removeRegisters(0).build(), "it declares no register SwitchMLIngress.");
        final P4Info.Builder narrow = compiled.toBuilder();
        for (int i = 0; i < narrow.getRegistersCount(); i++)
        {
            if (narrow.getRegisters(i).getPreamble().getName().equals("pipe." + P4Names.COUNT))
            {
                narrow.getRegistersBuilder(i).getTypeSpecBuilder().getBitstringBuilder().getBitBuilder().setBitwidth(16);
            }
        }
        assertRefused(narrow.build(), "register " + P4Names.COUNT + " cells are bit<16>, not bit<32>");
        final P4Info.Builder halves = compiled.toBuilder();
        halves.getTypeInfoBuilder().putStructs("pair_t", compiled.getTypeInfo().getStructsOrThrow("pair_t").toBuilder()
            .setMembers(1, compiled.getTypeInfo().getStructsOrThrow("pair_t").getMembers(1).toBuilder().setTypeSpec(
                compiled.getTypeInfo().getStructsOrThrow("pair_t").getMembers(1).getTypeSpec().toBuilder().setBitstring(
                    p4.config.v1.P4Types.P4BitstringLikeTypeSpec.newBuilder().setBit(
                        p4.config.v1.P4Types.P4BitTypeSpec.newBuilder().setBitwidth(16))))).build());
        assertRefused(halves.build(), "register " + P4Names.SEEN + " cells are struct pair_t of bit<32>, bit<16>, not struct pair_t " +
            "of bit<32>, bit<32>");
        final P4Info.Builder params = compiled.toBuilder();
        for (int i = 0; i < params.getActionsCount(); i++)
        {
            if (params.getActions(i).getPreamble().getName().equals("pipe." + P4Names.SET_DEST))
            {
                params.getActionsBuilder(i).addParams(p4.config.v1.P4InfoOuterClass.Action.Param.newBuilder().setId(9)
                    .setName("ttl").setBitwidth(8));
            }
        }
        assertRefused(params.build(), "action " + P4Names.SET_DEST + " has 3 parameters, not 2");
        final P4Info.Builder key = compiled.toBuilder();
        for (int i = 0; i < key.getTablesCount(); i++)
        {
            if (key.getTables(i).getPreamble().getName().equals("pipe." + P4Names.JOB_TABLE))
            {
                key.getTablesBuilder(i).getMatchFieldsBuilder(0).setBitwidth(8);
            }
        }
        assertRefused(key.build(), "table " + P4Names.JOB_TABLE + " match field ");
        final P4Info twice = compiled.toBuilder().addTables(compiled.getTables(0).toBuilder().setPreamble(
            compiled.getTables(0).getPreamble().toBuilder().setId(0x02_00_7E_01).setName("pipe2." +
                compiled.getTables(0).getPreamble().getName().substring("pipe.".length())))).build();
        assertRefused(twice, "two tables could be ");

        // at start-up, before any switch is asked: the compiler's P4Info given with pipeline-config is checked too
        final PipelineException pushed = assertThrows(PipelineException.class,
            () -> P4InfoIndex.resolve(compiled.toBuilder().removeRegisters(0).build(), P4InfoIndex.switchml()));
        assertEquals("FAILED_PRECONDITION", pushed.code());
    }

    private void assertRefused(final P4Info running, final String difference) throws Exception
    {
        try (ModelP4RuntimeServer other = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1,
            new P4InfoIndex(running), new TofinoModel(DATA_PORT), lock))
        {
            final PipelineException refused = assertThrows(PipelineException.class,
                () -> P4RuntimeSwitch.connect("127.0.0.1", other.port(), 1, 10, 2000, P4InfoIndex.switchml(), null));
            assertEquals("FAILED_PRECONDITION", refused.code());
            assertTrue(refused.getMessage().contains("does not run switchml.p4 (the P4Info is not switchml.p4's: " + difference),
                refused.getMessage());
        }
    }

    private void installAggregateAndRemove(final P4RuntimeSwitch client, final TofinoModel model) throws Exception
    {
        final JobImage job = job(3);
        JobInstaller.install(client, job);
        assertEquals(1, model.tableEntries(P4Names.JOB_TABLE));
        assertEquals(3, model.tableEntries(P4Names.RANK_SOURCE));
        assertEquals(1, model.multicastGroups());

        List<TofinoModel.PacketOut> out = List.of();
        for (int rank = 0; rank < 3; rank++)
        {
            synchronized (lock)
            {
                out = model.process(update(job, rank, 2, rank + 1));
            }
            assertEquals(rank < 2 ? 0 : 3, out.size(), "rank " + rank);
        }
        for (int rank = 0; rank < 3; rank++)
        {
            final TofinoModel.PacketOut result = out.get(rank);
            assertEquals(job.addrs()[rank], result.dstAddr());
            assertEquals(job.ports()[rank], result.dstPort());
            final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(result.payload()), 0);
            assertEquals(DataHeaderFlyweight.TYPE_RESULT, header.type());
            for (int lane = 0; lane < 64; lane++)
            {
                assertEquals(6000 + 3 * lane, header.lane(lane), "lane " + lane);
            }
        }
        // the control plane reads what the data plane wrote: the count is back to 0, the seen bitmap holds 3 ranks
        assertArrayEquals(new byte[4], client.readRegister(P4Names.COUNT, (102 << 1)));
        assertArrayEquals(new byte[] {0, 0, 0, 0, 0, 0, 0, 7}, client.readRegister(P4Names.SEEN, 102));

        JobInstaller.remove(client, job);
        assertEquals(0, model.tableEntries(P4Names.JOB_TABLE) + model.tableEntries(P4Names.RANK_SOURCE) +
            model.tableEntries(P4Names.REPLICA_DEST) + model.multicastGroups());
        final List<TofinoModel.PacketOut> after;
        synchronized (lock)
        {
            after = model.process(update(job, 0, 1, 1));
        }
        // a removed job is no longer the switch's: its packets go on unchanged to the appliance, touching nothing
        assertEquals(1, after.size());
        assertTrue(after.get(0).egressPort() < 0, "forwarded, not answered");
        assertEquals(1, model.events(TofinoModel.Event.PASSED));
        assertEquals(0, model.drops(DropReason.UNKNOWN_JOB));
    }

    @Test
    void theParserTakesTheDataPortsTheControlPlaneWritesIntoItsValueSet() throws Exception
    {
        final JobImage job = job(3);
        JobInstaller.install(client, job);
        client.writeValueSet(P4Names.DATA_PORTS, List.of(JobInstaller.bytes(9000, 16), JobInstaller.bytes(9001, 16)));
        assertArrayEquals(new int[] {9000, 9001}, model.dataPorts());
        synchronized (lock)
        {
            model.process(update(job, 0, 2, 1)); // to 7471, no longer a data port
        }
        assertEquals(1, model.events(TofinoModel.Event.PASSED), "passed through unparsed, not aggregated");
        assertEquals(0, model.events(TofinoModel.Event.ABSORBED));

        client.writeValueSet(P4Names.DATA_PORTS, List.of(JobInstaller.bytes(DATA_PORT, 16)));
        synchronized (lock)
        {
            model.process(update(job, 0, 2, 1));
        }
        assertEquals(1, model.events(TofinoModel.Event.ABSORBED), "aggregated once its port is in the set again");

        final PipelineException full = assertThrows(PipelineException.class, () -> client.writeValueSet(P4Names.DATA_PORTS,
            List.of(new byte[] {1}, new byte[] {2}, new byte[] {3}, new byte[] {4}, new byte[] {5})));
        assertEquals("RESOURCE_EXHAUSTED", full.code());
        final PipelineException wide = assertThrows(PipelineException.class,
            () -> client.writeValueSet(P4Names.DATA_PORTS, List.of(new byte[] {1, 0, 0})));
        assertEquals("INVALID_ARGUMENT", wide.code());
        assertArrayEquals(new int[] {DATA_PORT}, model.dataPorts(), "a refused write changed nothing");
    }

    @Test
    void refusedWriteCarriesTheSwitchsCodeAndMessage() throws Exception
    {
        final JobImage job = job(2);
        JobInstaller.install(client, job);
        final PipelineException duplicate = assertThrows(PipelineException.class, () -> JobInstaller.install(client, job));
        assertEquals("ALREADY_EXISTS", duplicate.code());
        assertTrue(duplicate.getMessage().contains("refused the write") && duplicate.getMessage().contains("exists"), duplicate.getMessage());
        // the failed install removed what it wrote, and left the first job alone
        assertEquals(2, model.tableEntries(P4Names.RANK_SOURCE));
        assertEquals(1, model.tableEntries(P4Names.JOB_TABLE));

        final PipelineException range = assertThrows(PipelineException.class,
            () -> client.writeRegister(P4Names.COUNT, P4Names.CELLS, new byte[4]));
        assertEquals("OUT_OF_RANGE", range.code());
        client.writeRegister(P4Names.lanes(3), 5, new byte[] {0, 0, 0, 9, 0, 0, 0, 4});
        assertArrayEquals(new byte[] {0, 0, 0, 9, 0, 0, 0, 4}, client.readRegister(P4Names.lanes(3), 5));
    }

    @Test
    void backupControllerIsRefusedNamingThePrimary() throws Exception
    {
        final PipelineException backup = assertThrows(PipelineException.class,
            () -> P4RuntimeSwitch.connect("127.0.0.1", server.port(), 1, 5, 2000, P4InfoIndex.switchml(), null));
        assertEquals("PERMISSION_DENIED", backup.code());
        assertTrue(backup.getMessage().contains("election id 10 is primary"), backup.getMessage());

        final PipelineException device = assertThrows(PipelineException.class,
            () -> P4RuntimeSwitch.connect("127.0.0.1", server.port(), 2, 20, 2000, P4InfoIndex.switchml(), null));
        assertTrue(device.getMessage().contains("no device 2"), device.getMessage());
        assertEquals(null, client.health(), "the primary stays primary");
    }

    @Test
    void anotherProgramIsRefused() throws Exception
    {
        final P4Info other = P4InfoIndex.switchml().info().toBuilder().removeRegisters(0).build();
        final PipelineException refused = assertThrows(PipelineException.class,
            () -> P4RuntimeSwitch.connect("127.0.0.1", server.port(), 1, 30, 2000, new P4InfoIndex(other), new byte[] {1, 2, 3}));
        assertEquals("INVALID_ARGUMENT", refused.code());
        assertTrue(refused.getMessage().contains("cannot load another program"), refused.getMessage());
    }

    @Test
    void unreachableSwitchFailsWithinTheDeadline() throws Exception
    {
        final int port;
        try (ServerSocket socket = new ServerSocket(0))
        {
            port = socket.getLocalPort();
        }
        final long start = System.nanoTime();
        final PipelineException unreachable = assertThrows(PipelineException.class,
            () -> P4RuntimeSwitch.connect("127.0.0.1", port, 1, 1, 1000, P4InfoIndex.switchml(), null));
        assertEquals("UNAVAILABLE", unreachable.code());
        assertTrue(unreachable.getMessage().contains("127.0.0.1:" + port), unreachable.getMessage());
        assertTrue(System.nanoTime() - start < 5_000_000_000L, "failed within the deadline, not a hang");
    }

    @Test
    void updatesOfOneWriteApplyInOrderAndTheFirstFailureIsReported() throws Exception
    {
        final P4RuntimeCodec codec = new P4RuntimeCodec(P4InfoIndex.switchml());
        final PipelineControl.TableEntry entry = new PipelineControl.TableEntry(P4Names.REPLICA_DEST,
            List.of(new PipelineControl.ExactMatch(P4Names.EGRESS_RID, JobInstaller.bytes(77, 16))), P4Names.SET_DEST,
            List.of(new PipelineControl.ActionParam("dst_addr", JobInstaller.bytes(1, 32)),
                new PipelineControl.ActionParam("dst_port", JobInstaller.bytes(2, 16))));
        final PipelineException failed = assertThrows(PipelineException.class, () -> client.write(List.of(
            codec.tableUpdate(PipelineControl.UpdateType.INSERT, entry), codec.tableUpdate(PipelineControl.UpdateType.INSERT, entry))));
        assertEquals("ALREADY_EXISTS", failed.code());
        assertEquals(1, model.tableEntries(P4Names.REPLICA_DEST), "the first update of the batch applied");
    }
}
