package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.offload.tofino.p4runtime.ModelP4RuntimeServer;
import io.switchml.offload.tofino.p4runtime.P4InfoIndex;
import io.switchml.offload.tofino.p4runtime.P4RuntimeSwitch;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The two kinds of {@link SwitchConnection}: a real switch reached by P4Runtime, and the embedded model behind its
 * own P4Runtime server on loopback (reached by the same client over TCP, so the control plane is the same code).
 */
final class Connections
{
    private Connections()
    {
    }

    static SwitchConnection remote(final TofinoOptions options, final String prefix, final String name,
        final java.util.function.Consumer<String> log, final Runnable reconnects) throws BackendException
    {
        byte[] config = null;
        if (options.pipelineConfig() != null)
        {
            try
            {
                config = Files.readAllBytes(Path.of(options.pipelineConfig()));
            }
            catch (final IOException ex)
            {
                throw new BackendException(prefix + "pipeline-config: cannot read " + options.pipelineConfig() + ": " + ex.getMessage());
            }
        }
        P4InfoIndex index = P4InfoIndex.switchml();
        if (options.p4info() != null)
        {
            try
            {
                index = P4InfoIndex.resolve(P4InfoIndex.read(Path.of(options.p4info())), index);
            }
            catch (final IOException ex)
            {
                throw new BackendException(prefix + "p4info: cannot read " + options.p4info() + ": " + ex.getMessage());
            }
            catch (final PipelineException ex)
            {
                throw new BackendException(prefix + "p4info " + options.p4info() + ": " + ex.detail(), ex);
            }
        }
        io.grpc.ChannelCredentials credentials = null;
        if (options.tlsCa() != null)
        {
            final javax.net.ssl.TrustManager[] trust;
            try
            {
                trust = io.switchml.protocol.ControlTls.trustManagers(Path.of(options.tlsCa()));
            }
            catch (final IllegalArgumentException ex)
            {
                throw new BackendException(prefix + "tls-ca: " + ex.getMessage(), ex);
            }
            javax.net.ssl.KeyManager[] keys = null;
            if (options.tlsKeystore() != null)
            {
                try
                {
                    keys = io.switchml.protocol.ControlTls.keyManagers(Path.of(options.tlsKeystore()), Path.of(options.tlsPasswordFile()));
                }
                catch (final IllegalArgumentException ex)
                {
                    throw new BackendException(prefix + "tls-keystore / tls-password-file: " + ex.getMessage(), ex);
                }
            }
            credentials = P4RuntimeSwitch.tls(trust, keys);
        }
        final io.grpc.ChannelCredentials tls = credentials;
        final P4InfoIndex expected = index;
        final byte[] pipeline = config;
        final ReconnectingSwitch.Connector first = () -> P4RuntimeSwitch.connect(options.switchAddress(), options.switchPort(),
            tls, options.deviceId(), options.electionId(), options.timeoutMs(), expected, pipeline);
        // after a lost session, push the program again only if the switch no longer runs it: a push resets its data plane
        final ReconnectingSwitch.Connector again = pipeline == null ? first : () ->
        {
            try
            {
                return P4RuntimeSwitch.connect(options.switchAddress(), options.switchPort(), tls, options.deviceId(),
                    options.electionId(), options.timeoutMs(), expected, null);
            }
            catch (final PipelineException ex)
            {
                // unreachable or another controller primary: a push would not help; anything else (another program,
                // no program: FAILED_PRECONDITION, NOT_FOUND, UNKNOWN ...) calls for the push
                if ("UNAVAILABLE".equals(ex.code()) || "PERMISSION_DENIED".equals(ex.code()))
                {
                    throw ex;
                }
                return first.connect();
            }
        };
        try
        {
            final ReconnectingSwitch connection = new ReconnectingSwitch(name, first.connect(), again, log, System::nanoTime);
            connection.countReconnects(reconnects);
            return connection;
        }
        catch (final PipelineException ex)
        {
            throw new BackendException(ex.detail(), ex);
        }
    }

    static SwitchConnection model(
        final TofinoOptions options, final int applianceAddr, final int[] dataPorts, final java.util.function.Consumer<String> log)
        throws BackendException
    {
        final TofinoModel model = new TofinoModel(); // its parser takes no port until the backend writes the value set
        final Object lock = new Object();
        final ModelP4RuntimeServer server;
        try
        {
            server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", options.switchAddress() != null ? options.switchPort() : 0),
                options.deviceId(), P4InfoIndex.switchml(), model, lock);
        }
        catch (final IOException ex)
        {
            throw new BackendException("cannot start the model's P4Runtime server: " + ex.getMessage(), ex);
        }
        final P4RuntimeSwitch session;
        try
        {
            session = P4RuntimeSwitch.connect("127.0.0.1", server.port(), options.deviceId(), options.electionId(), options.timeoutMs(),
                P4InfoIndex.switchml(), null);
        }
        catch (final PipelineException ex)
        {
            server.close();
            throw new BackendException(ex.detail(), ex);
        }
        final ModelDataPath dataPath = new ModelDataPath(model, lock, applianceAddr, dataPorts);
        return new SwitchConnection()
        {
            public PipelineControl control()
            {
                return session;
            }

            public String health()
            {
                return session.health();
            }

            public ShardDataPath dataPath()
            {
                return dataPath;
            }

            public String describe()
            {
                return "the pipeline model (P4Runtime on " + session.target() + ")";
            }

            public void close()
            {
                session.close();
                server.close();
                synchronized (lock)
                {
                    log.accept("tofino-model: closed; pipeline counters: " + model.describeCounters());
                }
            }
        };
    }
}
