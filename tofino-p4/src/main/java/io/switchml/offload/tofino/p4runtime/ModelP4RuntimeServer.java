package io.switchml.offload.tofino.p4runtime;

import com.google.protobuf.Any;
import com.google.rpc.Code;
import com.google.rpc.Status;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import p4.v1.P4RuntimeGrpc;
import p4.v1.P4RuntimeOuterClass.CapabilitiesRequest;
import p4.v1.P4RuntimeOuterClass.CapabilitiesResponse;
import p4.v1.P4RuntimeOuterClass.Entity;
import p4.v1.P4RuntimeOuterClass.Error;
import p4.v1.P4RuntimeOuterClass.ForwardingPipelineConfig;
import p4.v1.P4RuntimeOuterClass.GetForwardingPipelineConfigRequest;
import p4.v1.P4RuntimeOuterClass.GetForwardingPipelineConfigResponse;
import p4.v1.P4RuntimeOuterClass.MasterArbitrationUpdate;
import p4.v1.P4RuntimeOuterClass.ReadRequest;
import p4.v1.P4RuntimeOuterClass.ReadResponse;
import p4.v1.P4RuntimeOuterClass.SetForwardingPipelineConfigRequest;
import p4.v1.P4RuntimeOuterClass.SetForwardingPipelineConfigResponse;
import p4.v1.P4RuntimeOuterClass.StreamMessageRequest;
import p4.v1.P4RuntimeOuterClass.StreamMessageResponse;
import p4.v1.P4RuntimeOuterClass.Uint128;
import p4.v1.P4RuntimeOuterClass.Update;
import p4.v1.P4RuntimeOuterClass.WriteRequest;
import p4.v1.P4RuntimeOuterClass.WriteResponse;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A P4Runtime server in front of a {@link PipelineControl} (the Java model of switchml.p4): what a switch's agent
 * (bf_switchd, Stratum) does, to the extent the control plane uses it. Arbitration per device: the stream with the
 * highest election id is primary and the only one allowed to write; every stream is told its role (OK for the
 * primary, ALREADY_EXISTS for a backup). Write applies its updates in order and, when any fails, answers UNKNOWN with
 * one p4.v1.Error per update in the status details, as the spec prescribes. Read returns register cells.
 * SetForwardingPipelineConfig accepts only the P4Info the server runs: the model cannot load another program.
 * <p>
 * The pipeline is called under this server's lock: one writer at a time, like a switch's driver.
 */
public final class ModelP4RuntimeServer implements AutoCloseable
{
    private final long deviceId;
    private final P4InfoIndex index;
    private final P4RuntimeCodec codec;
    private final PipelineControl pipeline;
    private final Object pipelineLock;
    private final Map<StreamObserver<StreamMessageResponse>, Uint128> streams = new ConcurrentHashMap<>();
    private final Server server;
    private volatile Uint128 primary;

    private ModelP4RuntimeServer(final long deviceId, final P4InfoIndex index, final PipelineControl pipeline, final Object pipelineLock,
        final Server server)
    {
        this.deviceId = deviceId;
        this.index = index;
        this.codec = new P4RuntimeCodec(index);
        this.pipeline = pipeline;
        this.pipelineLock = pipelineLock;
        this.server = server;
    }

    /**
     * Serve on a TCP address (grpc-netty-shaded, plaintext), as a switch's agent does; port 0 picks a free one.
     *
     * @param pipelineLock held around every call into the pipeline (the data plane takes it too).
     */
    public static ModelP4RuntimeServer tcp(final InetSocketAddress address, final long deviceId, final P4InfoIndex index,
        final PipelineControl pipeline, final Object pipelineLock) throws IOException
    {
        return tcp(address, deviceId, index, pipeline, pipelineLock, null);
    }

    /**
     * As {@link #tcp(InetSocketAddress, long, P4InfoIndex, PipelineControl, Object)}, over TLS with these credentials
     * (as Stratum with {@code -server_cert_file}), or plaintext when null.
     */
    public static ModelP4RuntimeServer tcp(final InetSocketAddress address, final long deviceId, final P4InfoIndex index,
        final PipelineControl pipeline, final Object pipelineLock, final io.grpc.ServerCredentials credentials) throws IOException
    {
        final ModelP4RuntimeServer[] self = new ModelP4RuntimeServer[1];
        final Service service = new Service(() -> self[0]);
        final Server server = (credentials == null ? NettyServerBuilder.forAddress(address) :
            NettyServerBuilder.forAddress(address, credentials)).addService(service).build().start();
        self[0] = new ModelP4RuntimeServer(deviceId, index, pipeline, pipelineLock, server);
        return self[0];
    }

    /**
     * @return the TCP port (for a server started with {@link #tcp}).
     */
    public int port()
    {
        return server.getPort();
    }

    public void close()
    {
        server.shutdownNow();
        try
        {
            server.awaitTermination(5, TimeUnit.SECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    private static int compare(final Uint128 a, final Uint128 b)
    {
        final int high = Long.compareUnsigned(a.getHigh(), b.getHigh());
        return high != 0 ? high : Long.compareUnsigned(a.getLow(), b.getLow());
    }

    private synchronized void arbitrate(final StreamObserver<StreamMessageResponse> stream, final MasterArbitrationUpdate update)
    {
        if (update.getDeviceId() != deviceId)
        {
            stream.onError(io.grpc.Status.NOT_FOUND.withDescription("no device " + update.getDeviceId() + " (this switch is device " +
                deviceId + ")").asRuntimeException());
            return;
        }
        streams.put(stream, update.getElectionId());
        if (primary == null || compare(update.getElectionId(), primary) > 0)
        {
            primary = update.getElectionId();
        }
        announce();
    }

    private synchronized void disconnected(final StreamObserver<StreamMessageResponse> stream)
    {
        final Uint128 election = streams.remove(stream);
        if (election != null && primary != null && compare(election, primary) == 0)
        {
            primary = streams.values().stream().max(ModelP4RuntimeServer::compare).orElse(null);
            announce();
        }
    }

    private void announce()
    {
        for (final Map.Entry<StreamObserver<StreamMessageResponse>, Uint128> entry : streams.entrySet())
        {
            final boolean isPrimary = compare(entry.getValue(), primary) == 0;
            final Status status = Status.newBuilder().setCode(isPrimary ? Code.OK_VALUE : Code.ALREADY_EXISTS_VALUE)
                .setMessage(isPrimary ? "primary" : "backup: election id " + primary.getLow() + " is primary").build();
            try
            {
                synchronized (entry.getKey())
                {
                    entry.getKey().onNext(StreamMessageResponse.newBuilder().setArbitration(MasterArbitrationUpdate.newBuilder()
                        .setDeviceId(deviceId).setElectionId(primary).setStatus(status)).build());
                }
            }
            catch (final RuntimeException ignored)
            {
                // a stream that went away; its onCompleted/onError removes it
            }
        }
    }

    private void write(final WriteRequest request, final StreamObserver<WriteResponse> response)
    {
        if (request.getDeviceId() != deviceId)
        {
            response.onError(io.grpc.Status.NOT_FOUND.withDescription("no device " + request.getDeviceId()).asRuntimeException());
            return;
        }
        final Uint128 current = primary;
        if (current == null || compare(request.getElectionId(), current) != 0)
        {
            response.onError(io.grpc.Status.PERMISSION_DENIED.withDescription("not primary: election id " +
                (current == null ? "none" : current.getLow()) + " is primary, the write carries " + request.getElectionId().getLow())
                .asRuntimeException());
            return;
        }
        final List<Error> errors = new ArrayList<>();
        boolean failed = false;
        synchronized (pipelineLock)
        {
            for (final Update update : request.getUpdatesList())
            {
                try
                {
                    codec.apply(update, pipeline);
                    errors.add(Error.newBuilder().setCanonicalCode(Code.OK_VALUE).build());
                }
                catch (final PipelineException ex)
                {
                    failed = true;
                    errors.add(Error.newBuilder().setCanonicalCode(code(ex.code()).getNumber()).setMessage(ex.detail()).build());
                }
            }
        }
        if (!failed)
        {
            response.onNext(WriteResponse.getDefaultInstance());
            response.onCompleted();
            return;
        }
        final Status.Builder status = Status.newBuilder().setCode(Code.UNKNOWN_VALUE).setMessage("write failed");
        errors.forEach(error -> status.addDetails(Any.pack(error)));
        response.onError(StatusProto.toStatusRuntimeException(status.build()));
    }

    private void read(final ReadRequest request, final StreamObserver<ReadResponse> response)
    {
        final ReadResponse.Builder reply = ReadResponse.newBuilder();
        try
        {
            synchronized (pipelineLock)
            {
                for (final Entity entity : request.getEntitiesList())
                {
                    if (entity.hasRegisterEntry() && entity.getRegisterEntry().hasIndex())
                    {
                        reply.addEntities(codec.readRegister(entity.getRegisterEntry(), pipeline));
                    }
                    else
                    {
                        reply.addAllEntities(codec.read(entity, pipeline));
                    }
                }
            }
        }
        catch (final PipelineException ex)
        {
            response.onError(io.grpc.Status.fromCodeValue(code(ex.code()).getNumber()).withDescription(ex.detail()).asRuntimeException());
            return;
        }
        response.onNext(reply.build());
        response.onCompleted();
    }

    private void setPipeline(final SetForwardingPipelineConfigRequest request, final StreamObserver<SetForwardingPipelineConfigResponse> response)
    {
        if (!request.getConfig().getP4Info().equals(index.info()))
        {
            response.onError(io.grpc.Status.INVALID_ARGUMENT.withDescription("this switch is a model of switchml.p4 and cannot load " +
                "another program: the P4Info differs from the one it runs").asRuntimeException());
            return;
        }
        response.onNext(SetForwardingPipelineConfigResponse.getDefaultInstance());
        response.onCompleted();
    }

    private static Code code(final String name)
    {
        try
        {
            return Code.valueOf(name);
        }
        catch (final IllegalArgumentException ex)
        {
            return Code.UNKNOWN;
        }
    }

    /** The gRPC service, bound to its server once the transport is up. */
    private static final class Service extends P4RuntimeGrpc.P4RuntimeImplBase
    {
        private final java.util.function.Supplier<ModelP4RuntimeServer> server;

        Service(final java.util.function.Supplier<ModelP4RuntimeServer> server)
        {
            this.server = server;
        }

        public void write(final WriteRequest request, final StreamObserver<WriteResponse> response)
        {
            server.get().write(request, response);
        }

        public void read(final ReadRequest request, final StreamObserver<ReadResponse> response)
        {
            server.get().read(request, response);
        }

        public void setForwardingPipelineConfig(final SetForwardingPipelineConfigRequest request,
            final StreamObserver<SetForwardingPipelineConfigResponse> response)
        {
            server.get().setPipeline(request, response);
        }

        public void getForwardingPipelineConfig(final GetForwardingPipelineConfigRequest request,
            final StreamObserver<GetForwardingPipelineConfigResponse> response)
        {
            response.onNext(GetForwardingPipelineConfigResponse.newBuilder().setConfig(ForwardingPipelineConfig.newBuilder()
                .setP4Info(server.get().index.info())).build());
            response.onCompleted();
        }

        public void capabilities(final CapabilitiesRequest request, final StreamObserver<CapabilitiesResponse> response)
        {
            response.onNext(CapabilitiesResponse.newBuilder().setP4RuntimeApiVersion("1.3.0").build());
            response.onCompleted();
        }

        public StreamObserver<StreamMessageRequest> streamChannel(final StreamObserver<StreamMessageResponse> stream)
        {
            return new StreamObserver<>()
            {
                public void onNext(final StreamMessageRequest message)
                {
                    if (message.hasArbitration())
                    {
                        server.get().arbitrate(stream, message.getArbitration());
                    }
                }

                public void onError(final Throwable error)
                {
                    server.get().disconnected(stream);
                }

                public void onCompleted()
                {
                    server.get().disconnected(stream);
                    stream.onCompleted();
                }
            };
        }
    }
}
