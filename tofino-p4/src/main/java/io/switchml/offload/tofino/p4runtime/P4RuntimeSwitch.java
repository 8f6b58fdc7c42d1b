package io.switchml.offload.tofino.p4runtime;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.protocol.ControlTls;
import p4.v1.P4RuntimeGrpc;
import p4.v1.P4RuntimeOuterClass.Entity;
import p4.v1.P4RuntimeOuterClass.Error;
import p4.v1.P4RuntimeOuterClass.ForwardingPipelineConfig;
import p4.v1.P4RuntimeOuterClass.GetForwardingPipelineConfigRequest;
import p4.v1.P4RuntimeOuterClass.MasterArbitrationUpdate;
import p4.v1.P4RuntimeOuterClass.ReadRequest;
import p4.v1.P4RuntimeOuterClass.ReadResponse;
import p4.v1.P4RuntimeOuterClass.SetForwardingPipelineConfigRequest;
import p4.v1.P4RuntimeOuterClass.StreamMessageRequest;
import p4.v1.P4RuntimeOuterClass.StreamMessageResponse;
import p4.v1.P4RuntimeOuterClass.Uint128;
import p4.v1.P4RuntimeOuterClass.Update;
import p4.v1.P4RuntimeOuterClass.WriteRequest;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The control plane's P4Runtime session with a switch (or the model's server): a plaintext gRPC channel, the
 * stream channel with master arbitration for a device id and election id, a check that the switch runs switchml.p4
 * (its P4Info read back and matched by name, so a compiler's ids and pipeline-prefixed names work: see
 * {@link P4InfoIndex#resolve}) or a SetForwardingPipelineConfig with the compiled program and its P4Info, and
 * {@link PipelineControl} calls translated into Write / Read requests by the switch's ids. Every call has a deadline; a write the switch refuses fails with the first failing
 * update's canonical code and the switch's own message.
 */
public final class P4RuntimeSwitch implements PipelineControl, AutoCloseable
{
    private final String target;
    private final long deviceId;
    private final Uint128 electionId;
    private final long timeoutMs;
    /** Set once in {@link #connect}, before the session is returned: by the ids of the P4Info the switch runs. */
    private volatile P4RuntimeCodec codec;
    private final ManagedChannel channel;
    private final P4RuntimeGrpc.P4RuntimeBlockingStub blocking;
    private final StreamObserver<StreamMessageRequest> stream;
    private volatile String health = "arbitration pending";

    private P4RuntimeSwitch(final String target, final ManagedChannel channel, final long deviceId, final long electionId,
        final long timeoutMs, final P4InfoIndex index)
    {
        this.target = target;
        this.channel = channel;
        this.deviceId = deviceId;
        this.electionId = Uint128.newBuilder().setHigh(0).setLow(electionId).build();
        this.timeoutMs = timeoutMs;
        this.codec = new P4RuntimeCodec(index);
        this.blocking = P4RuntimeGrpc.newBlockingStub(channel);
        final CompletableFuture<MasterArbitrationUpdate> arbitration = new CompletableFuture<>();
        this.stream = P4RuntimeGrpc.newStub(channel).streamChannel(new StreamObserver<>()
        {
            public void onNext(final StreamMessageResponse message)
            {
                if (message.hasArbitration())
                {
                    final MasterArbitrationUpdate update = message.getArbitration();
                    health = update.getStatus().getCode() == com.google.rpc.Code.OK_VALUE ? null :
                        "not primary on " + target + ": election id " + update.getElectionId().getLow() + " is primary, ours is " +
                        P4RuntimeSwitch.this.electionId.getLow();
                    arbitration.complete(update);
                }
            }

            public void onError(final Throwable error)
            {
                health = "P4Runtime stream to " + target + " failed: " + describe(error);
                arbitration.completeExceptionally(error);
            }

            public void onCompleted()
            {
                health = "P4Runtime stream to " + target + " closed by the switch";
                arbitration.completeExceptionally(new IllegalStateException(health));
            }
        });
        this.arbitration = arbitration;
    }

    private final CompletableFuture<MasterArbitrationUpdate> arbitration;

    /**
     * Connect to a switch, become its primary controller for the device, and check (or set) its pipeline.
     *
     * @param host           the switch's P4Runtime server.
     * @param port           its port (9559 by convention).
     * @param index          the P4Info the control plane expects ({@link P4InfoIndex#switchml()}), or with a
     *                       pipelineConfig the compiler's P4Info resolved against it, which is pushed with it.
     * @param pipelineConfig the compiled program to push with SetForwardingPipelineConfig, or null to check that the
     *                       switch already runs switchml.p4, whatever its compiler named and numbered.
     * @throws PipelineException UNAVAILABLE when it cannot be reached within the deadline, PERMISSION_DENIED when
     *                           another controller is primary, FAILED_PRECONDITION when it runs another program.
     */
    public static P4RuntimeSwitch connect(final String host, final int port, final long deviceId, final long electionId,
        final long timeoutMs, final P4InfoIndex index, final byte[] pipelineConfig) throws PipelineException
    {
        return connect(host, port, null, deviceId, electionId, timeoutMs, index, pipelineConfig);
    }

    /**
     * As {@link #connect(String, int, long, long, long, P4InfoIndex, byte[])}, over TLS when credentials are given
     * ({@link #tls}), else plaintext.
     */
    public static P4RuntimeSwitch connect(final String host, final int port, final ChannelCredentials credentials,
        final long deviceId, final long electionId, final long timeoutMs, final P4InfoIndex index, final byte[] pipelineConfig)
        throws PipelineException
    {
        final ManagedChannel channel = credentials == null ? NettyChannelBuilder.forAddress(host, port).usePlaintext().build() :
            NettyChannelBuilder.forAddress(host, port, credentials).build();
        return connect(channel, host + ":" + port + (credentials == null ? "" : " (TLS)"), deviceId, electionId, timeoutMs, index,
            pipelineConfig);
    }

    /**
     * TLS credentials for a switch's P4Runtime server (Stratum's {@code -ca_cert_file} / {@code -server_cert_file}):
     * the server's certificate must be signed by (or be) one in {@code trustedPem} and name the host; with a keystore,
     * this controller presents its own certificate, for a server that requires one.
     *
     * @throws IllegalArgumentException naming the file that cannot be read.
     */
    public static ChannelCredentials tls(final Path trustedPem, final Path keystore, final Path passwordFile)
    {
        return tls(ControlTls.trustManagers(trustedPem), keystore == null ? null : ControlTls.keyManagers(keystore, passwordFile));
    }

    /**
     * As {@link #tls(Path, Path, Path)} from trust and key managers already loaded (keys null: no client certificate).
     */
    public static ChannelCredentials tls(final javax.net.ssl.TrustManager[] trust, final javax.net.ssl.KeyManager[] keys)
    {
        final TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder().trustManager(trust);
        if (keys != null)
        {
            builder.keyManager(keys);
        }
        return builder.build();
    }

    /**
     * As {@link #connect(String, int, long, long, long, P4InfoIndex, byte[])} over a given channel.
     */
    public static P4RuntimeSwitch connect(final ManagedChannel channel, final String target, final long deviceId, final long electionId,
        final long timeoutMs, final P4InfoIndex index, final byte[] pipelineConfig) throws PipelineException
    {
        final P4RuntimeSwitch session = new P4RuntimeSwitch(target, channel, deviceId, electionId, timeoutMs, index);
        try
        {
            session.stream.onNext(StreamMessageRequest.newBuilder().setArbitration(MasterArbitrationUpdate.newBuilder()
                .setDeviceId(deviceId).setElectionId(session.electionId)).build());
            final MasterArbitrationUpdate update = session.arbitration.get(timeoutMs, TimeUnit.MILLISECONDS);
            if (update.getStatus().getCode() != com.google.rpc.Code.OK_VALUE)
            {
                throw new PipelineException("PERMISSION_DENIED", session.health);
            }
            if (pipelineConfig != null)
            {
                session.stub().setForwardingPipelineConfig(SetForwardingPipelineConfigRequest.newBuilder().setDeviceId(deviceId)
                    .setElectionId(session.electionId).setAction(SetForwardingPipelineConfigRequest.Action.VERIFY_AND_COMMIT)
                    .setConfig(ForwardingPipelineConfig.newBuilder().setP4Info(index.info())
                        .setP4DeviceConfig(com.google.protobuf.ByteString.copyFrom(pipelineConfig))).build());
            }
            else
            {
                final ForwardingPipelineConfig running = session.stub().getForwardingPipelineConfig(
                    GetForwardingPipelineConfigRequest.newBuilder().setDeviceId(deviceId).build()).getConfig();
                try
                {
                    // the compiler's names and ids (pipe.SwitchMLIngress.job_table, its own numbering), checked by name
                    session.codec = new P4RuntimeCodec(P4InfoIndex.resolve(running.getP4Info(), index));
                }
                catch (final PipelineException ex)
                {
                    throw new PipelineException("FAILED_PRECONDITION", target + " device " + deviceId + " does not run " +
                        "switchml.p4 (" + ex.detail() + "); set pipeline-config to push the compiled program");
                }
            }
            return session;
        }
        catch (final ExecutionException | TimeoutException ex)
        {
            session.close();
            throw new PipelineException("UNAVAILABLE", ex instanceof ExecutionException ?
                "switch " + target + " not reachable: " + describe(ex.getCause()) :
                "switch " + target + " not reachable within " + timeoutMs + " ms");
        }
        catch (final StatusRuntimeException ex)
        {
            session.close();
            throw new PipelineException(ex.getStatus().getCode().name(), "switch " + target + ": " + describe(ex));
        }
        catch (final InterruptedException ex)
        {
            session.close();
            Thread.currentThread().interrupt();
            throw new PipelineException("CANCELLED", "interrupted while connecting to " + target);
        }
        catch (final PipelineException ex)
        {
            session.close();
            throw ex;
        }
    }

    private P4RuntimeGrpc.P4RuntimeBlockingStub stub()
    {
        return blocking.withDeadlineAfter(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /**
     * @return null while the stream is up and this session is primary, else why not.
     */
    public String health()
    {
        return health;
    }

    public long deviceId()
    {
        return deviceId;
    }

    public String target()
    {
        return target;
    }

    /**
     * Write several updates in one request, in order (the switch applies them in order).
     */
    public void write(final List<Update> updates) throws PipelineException
    {
        try
        {
            stub().write(WriteRequest.newBuilder().setDeviceId(deviceId).setElectionId(electionId).addAllUpdates(updates).build());
        }
        catch (final StatusRuntimeException ex)
        {
            throw refusal(ex);
        }
    }

    public void writeTableEntry(final UpdateType type, final TableEntry entry) throws PipelineException
    {
        write(List.of(codec.tableUpdate(type, entry)));
    }

    public void writeRegister(final String register, final int index, final byte[] value) throws PipelineException
    {
        write(List.of(codec.registerUpdate(register, index, value)));
    }

    public byte[] readRegister(final String register, final int index) throws PipelineException
    {
        try
        {
            final Iterator<ReadResponse> replies = stub().read(ReadRequest.newBuilder().setDeviceId(deviceId)
                .addEntities(codec.registerRead(register, index)).build());
            while (replies.hasNext())
            {
                final ReadResponse reply = replies.next();
                if (reply.getEntitiesCount() > 0)
                {
                    return P4RuntimeCodec.registerValue(reply.getEntities(0).getRegisterEntry());
                }
            }
            throw new PipelineException("NOT_FOUND", target + " returned no cell " + index + " of " + register);
        }
        catch (final StatusRuntimeException ex)
        {
            throw new PipelineException(ex.getStatus().getCode().name(), "switch " + target + ": " + describe(ex));
        }
    }

    public List<TableEntry> readTableEntries(final String table) throws PipelineException
    {
        final List<TableEntry> entries = new ArrayList<>();
        for (final Entity entity : read(codec.tableRead(table)))
        {
            if (entity.hasTableEntry())
            {
                entries.add(codec.tableEntry(entity.getTableEntry(), false));
            }
        }
        return entries;
    }

    public List<Integer> readMulticastGroups() throws PipelineException
    {
        final List<Integer> groups = new ArrayList<>();
        for (final Entity entity : read(P4RuntimeCodec.multicastGroupsRead()))
        {
            if (entity.hasPacketReplicationEngineEntry() && entity.getPacketReplicationEngineEntry().hasMulticastGroupEntry())
            {
                groups.add(entity.getPacketReplicationEngineEntry().getMulticastGroupEntry().getMulticastGroupId());
            }
        }
        groups.sort(null);
        return groups;
    }

    private List<Entity> read(final Entity wildcard) throws PipelineException
    {
        try
        {
            final List<Entity> entities = new ArrayList<>();
            final Iterator<ReadResponse> replies = stub().read(ReadRequest.newBuilder().setDeviceId(deviceId).addEntities(wildcard).build());
            while (replies.hasNext())
            {
                entities.addAll(replies.next().getEntitiesList());
            }
            return entities;
        }
        catch (final StatusRuntimeException ex)
        {
            throw new PipelineException(ex.getStatus().getCode().name(), "switch " + target + ": " + describe(ex));
        }
    }

    public void writeMulticastGroup(final UpdateType type, final int groupId, final List<Replica> replicas) throws PipelineException
    {
        write(List.of(P4RuntimeCodec.multicastUpdate(type, groupId, replicas)));
    }

    public void writeValueSet(final String valueSet, final List<byte[]> members) throws PipelineException
    {
        write(List.of(codec.valueSetUpdate(valueSet, members)));
    }

    private PipelineException refusal(final StatusRuntimeException ex)
    {
        final com.google.rpc.Status status = StatusProto.fromThrowable(ex);
        if (status != null)
        {
            for (final Any detail : status.getDetailsList())
            {
                try
                {
                    final Error error = detail.unpack(Error.class);
                    if (error.getCanonicalCode() != com.google.rpc.Code.OK_VALUE)
                    {
                        return new PipelineException(com.google.rpc.Code.forNumber(error.getCanonicalCode()).name(),
                            "switch " + target + " refused the write: " + error.getMessage());
                    }
                }
                catch (final InvalidProtocolBufferException ignored)
                {
                    // not a p4.v1.Error: fall through to the status itself
                }
            }
        }
        return new PipelineException(ex.getStatus().getCode().name(), "switch " + target + ": " + describe(ex));
    }

    /**
     * @return a failure in one line (gRPC's descriptions can carry the channel pipeline on further lines, and this
     * text ends up in control replies and logs), with the transport's own cause when there is one: a refused TLS
     * handshake or a refused connection is what an operator can act on.
     */
    private static String describe(final Throwable error)
    {
        if (error instanceof StatusRuntimeException status)
        {
            final String description = status.getStatus().getDescription();
            final String text = status.getStatus().getCode() + (description != null ? " " + firstLine(description) : "");
            Throwable cause = status.getStatus().getCause() != null ? status.getStatus().getCause() : status.getCause();
            String tls = null;
            String root = null;
            for (int depth = 0; cause != null && depth < 10; depth++, cause = cause.getCause())
            {
                final String message = cause.getMessage() != null ? firstLine(cause.getMessage()) : cause.getClass().getSimpleName();
                if (cause instanceof javax.net.ssl.SSLException && tls == null)
                {
                    tls = message;
                }
                root = message;
            }
            if (tls != null)
            {
                return text + ": TLS handshake failed: " + (root != null && !root.equals(tls) ? tls + ": " + root : tls);
            }
            return root != null && !text.contains(root) ? text + ": " + root : text;
        }
        return error == null ? "" : error.getClass().getSimpleName() + (error.getMessage() != null ? " " + firstLine(error.getMessage()) : "");
    }

    private static String firstLine(final String text)
    {
        final int newline = text.indexOf('\n');
        return (newline < 0 ? text : text.substring(0, newline)).strip();
    }

    public void close()
    {
        try
        {
            stream.onCompleted();
        }
        catch (final RuntimeException ignored)
        {
            // already failed
        }
        channel.shutdownNow();
        try
        {
            channel.awaitTermination(2, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
