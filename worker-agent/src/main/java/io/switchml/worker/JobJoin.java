package io.switchml.worker;

import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import io.switchml.worker.transport.DatagramTransport;
import io.switchml.worker.transport.NativeDatagramTransport;
import io.switchml.worker.transport.NioDatagramTransport;
import io.switchml.worker.transport.TransportKind;

import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The control-plane handshake that makes this process a rank of a job: CREATE (if absent) and JOIN on the
 * appliance's control endpoint, a data transport per appliance shard bound to the address that reaches the
 * appliance and connected to the shard's port, and the results group joined where the appliance multicasts. The data
 * path's warm-up runs while the join waits for the other ranks. {@link WorkerClient#connect} starts the I/O agents on
 * what it returns; what is left of a failed join is closed here.
 */
final class JobJoin
{
    /**
     * What the JOIN reply sets for the rank's data path.
     *
     * @param backend    the backend the job runs on ("unknown" from an appliance older than backends).
     * @param macEnabled whether every data packet carries a MAC.
     * @param macK0      first half of the job's SipHash key.
     * @param macK1      second half.
     */
    record JoinTerms(String backend, boolean macEnabled, long macK0, long macK1)
    {
        /** A peer that is not an appliance: no MAC, no backend. */
        static final JoinTerms NO_APPLIANCE = new JoinTerms("unknown", false, 0, 0);

        /**
         * @param reply the JOIN reply's fields.
         * @throws IOException when the MAC key is missing or malformed.
         */
        static JoinTerms parse(final Map<String, String> reply) throws IOException
        {
            final String key = reply.get("key");
            if (key == null || key.length() != 32 || !key.chars().allMatch(c -> Character.digit(c, 16) >= 0))
            {
                throw new IOException("appliance sent " + (key == null ? "no" : "a malformed") + " MAC key");
            }
            return new JoinTerms(reply.getOrDefault("backend", "unknown"), "on".equals(reply.get("mac")),
                Long.parseUnsignedLong(key.substring(0, 16), 16), Long.parseUnsignedLong(key.substring(16), 16));
        }
    }

    /**
     * A joined rank: its control connection, one connected transport per shard, the job's id, what the JOIN reply set
     * and the CREATE reply's fallback (the backends that passed the job over, with their reasons).
     */
    record Joined(Socket control, DatagramTransport[] transports, int jobId, JoinTerms terms, String fallback,
        DataPathWarmUp warmUp)
    {
        /**
         * Release the connection and the transports.
         */
        void close()
        {
            closeQuietly(control, transports);
        }
    }

    private JobJoin()
    {
    }

    /**
     * Join the job through the appliance's control endpoint, with a data transport per shard, and wait until every
     * rank has joined.
     *
     * @param context worker configuration, concluded.
     * @return the control connection, the shards' transports connected to their ports, and the replies.
     * @throws AllReduceException when the appliance refuses the join (the message says why) or cannot be reached.
     */
    static Joined join(final WorkerContext context)
    {
        Socket socket = null;
        DatagramTransport[] transports = new DatagramTransport[0];
        final String where = where(context);
        try
        {
            socket = io.switchml.protocol.ControlTls.connect(context.applianceHost(), context.controlPort(), 5_000,
                context.tlsCa() == null ? null : java.nio.file.Path.of(context.tlsCa()),
                context.tlsKeystore() == null ? null : java.nio.file.Path.of(context.tlsKeystore()),
                context.tlsPasswordFile() == null ? null : java.nio.file.Path.of(context.tlsPasswordFile()));
            socket.setKeepAlive(true);
            final OutputStream out = socket.getOutputStream();

            send(out, ControlProtocol.CREATE + " name=" + context.jobName() + " tenant=" + context.tenant() +
                " world=" + context.worldSize() + " type=" + ElementType.name(context.elementType()) + " k=" + context.lanes() +
                " s=" + context.slots() + " mac=" + (context.macEnabled() ? "on" : "off") + " token=" + context.token() +
                " ifAbsent=true" + (io.switchml.protocol.ControlProtocol.BACKEND_AUTO.equals(context.backend()) ? "" : " backend=" + context.backend()) +
                (context.slotTimeoutMs() > 0 ? " slotTimeoutMs=" + context.slotTimeoutMs() : "") +
                (context.credential() != null ? " auth=" + context.credential() : ""));
            socket.setSoTimeout(10_000);
            final Map<String, String> created = expectOk(readLine(socket), context, where, "create");
            final int jobId = ControlProtocol.intField(created, "job");
            final String[] dataPorts = ControlProtocol.requiredField(created, "dataPorts").split(",");

            transports = new DatagramTransport[dataPorts.length];
            final StringBuilder ports = new StringBuilder();
            final TransportKind kind = context.transport().resolve();
            for (int shard = 0; shard < transports.length; shard++)
            {
                transports[shard] = openTransport(kind, context, socket.getLocalAddress());
                ports.append(shard == 0 ? "" : ",").append(transports[shard].localPort());
            }

            final DataPathWarmUp warmUp = DataPathWarmUp.maybeStart(context);
            send(out, ControlProtocol.JOIN + " job=" + jobId + " rank=" + context.rank() + " token=" + context.token() +
                " ports=" + ports);
            socket.setSoTimeout((int)Math.min(Integer.MAX_VALUE, context.joinTimeoutMs()));
            final Map<String, String> joined = expectOk(readLine(socket), context, where, "join");
            final JoinTerms terms = JoinTerms.parse(joined);
            socket.setSoTimeout(0);
            final boolean untilFirstCall = context.warmUpUntilFirstCall() && DataPathWarmUp.UNTIL_FIRST_CALL;
            if (warmUp != null && untilFirstCall)
            {
                // it ran while the join waited for the other ranks; it goes on through its grace in the background,
                // until the client's first call stops it (WorkerClient#submit)
                warmUp.endAfterGrace();
            }
            else if (warmUp != null)
            {
                // the same, but the join waits for the grace
                warmUp.finish();
            }
            if (!(socket.getInetAddress() instanceof java.net.Inet4Address appliance))
            {
                throw new IOException("the data plane is IPv4 only; the appliance is at " + socket.getInetAddress());
            }
            for (int shard = 0; shard < transports.length; shard++)
            {
                transports[shard].connect(appliance, Integer.parseInt(dataPorts[shard]));
            }
            joinMulticast(joined.get("group"), socket, transports);
            return new Joined(socket, transports, jobId, terms, created.get("fallback"),
                untilFirstCall ? warmUp : null);
        }
        catch (final IOException | NumberFormatException ex)
        {
            closeQuietly(socket, transports);
            throw cannotJoin(context, ex);
        }
        catch (final RuntimeException ex)
        {
            closeQuietly(socket, transports);
            throw ex;
        }
    }

    /**
     * @return "cannot join job 'J' as rank R at appliance H:P: cause", for a join that failed on I/O or a malformed
     * reply.
     */
    static AllReduceException cannotJoin(final WorkerContext context, final Exception cause)
    {
        return new AllReduceException("cannot join job '" + context.jobName() + "' as rank " + context.rank() + " at " +
            where(context) + ": " + cause, cause);
    }

    /** @return "appliance H:P", the control endpoint a join talks to, for its messages. */
    private static String where(final WorkerContext context)
    {
        return "appliance " + context.applianceHost() + ":" + context.controlPort();
    }

    /**
     * Open one shard's transport of the kind resolved from {@code --transport}, bound to the local address that
     * reaches the appliance.
     */
    static DatagramTransport openTransport(final TransportKind kind, final WorkerContext context,
        final java.net.InetAddress local) throws IOException
    {
        return openTransport(kind, context, local, NativeDatagramTransport.RECEIVE_BATCH);
    }

    /**
     * @param receiveBatch datagrams per recvmmsg call of a native transport: see
     *                     {@link NativeDatagramTransport#NativeDatagramTransport(java.net.InetAddress, int, int,
     *                     boolean, boolean, int)}.
     */
    static DatagramTransport openTransport(final TransportKind kind, final WorkerContext context,
        final java.net.InetAddress local, final int receiveBatch) throws IOException
    {
        final int maxDatagram = DataHeaderFlyweight.packetLength(context.lanes());
        return kind == TransportKind.NATIVE ?
            new NativeDatagramTransport(local, context.socketBufferBytes(), maxDatagram, context.gso(),
                context.gro(), receiveBatch) :
            new NioDatagramTransport(local, context.socketBufferBytes(), maxDatagram);
    }

    /**
     * When the appliance multicasts completed results ("group=A.B.C.D:port0,port1,..." in the join
     * reply), join that group on one socket per shard bound to the shard's multicast port, on the
     * interface that reaches the appliance. Shadow results for retransmissions still come by unicast.
     */
    private static void joinMulticast(final String group, final Socket control, final DatagramTransport[] transports)
        throws IOException
    {
        if (group == null)
        {
            return;
        }
        final int colon = group.indexOf(':');
        final java.net.InetAddress address = java.net.InetAddress.getByName(group.substring(0, colon));
        final String[] ports = group.substring(colon + 1).split(",");
        if (!(address instanceof java.net.Inet4Address group4) ||
            !(control.getLocalAddress() instanceof java.net.Inet4Address local))
        {
            throw new IOException("multicast group " + group + " and the local address must be IPv4");
        }
        for (int shard = 0; shard < ports.length && shard < transports.length; shard++)
        {
            transports[shard].joinGroup(group4, Integer.parseInt(ports[shard]), local);
        }
    }

    private static void send(final OutputStream out, final String line) throws IOException
    {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static Map<String, String> expectOk(
        final String line, final WorkerContext context, final String where, final String step)
    {
        if (line == null)
        {
            throw new AllReduceException(where + " closed the control connection during the " + step + " of job '" +
                context.jobName() + "'");
        }
        if (line.chars().anyMatch(c -> c < 0x20 && c != '\t'))
        {
            // a TLS record (an alert: 0x15) or anything else that is not a line of the control protocol
            throw new AllReduceException(where + " did not answer the " + step + " of job '" + context.jobName() +
                "' in the control protocol" + (context.tlsCa() == null ? "; if its control endpoint uses TLS, give its " +
                "certificate with --tls-ca (or $SWITCHML_TLS_CA)" : ""));
        }
        final Map<String, String> reply = ControlProtocol.parse(line);
        if (!ControlProtocol.OK.equals(reply.get("")))
        {
            throw new AllReduceException(step + " of job '" + context.jobName() + "' as rank " + context.rank() + " refused: " +
                reply.getOrDefault("message", line));
        }
        return reply;
    }

    private static String readLine(final Socket socket) throws IOException
    {
        final StringBuilder builder = new StringBuilder();
        final var in = socket.getInputStream();
        int b;
        while ((b = in.read()) != -1)
        {
            if (b == '\n')
            {
                return builder.toString();
            }
            builder.append((char)b);
        }
        return builder.isEmpty() ? null : builder.toString();
    }

    static void closeQuietly(final Socket socket, final DatagramTransport[] transports)
    {
        try
        {
            if (socket != null)
            {
                socket.close();
            }
        }
        catch (final IOException ignore)
        {
            // closing anyway
        }
        for (final DatagramTransport transport : transports)
        {
            if (transport != null)
            {
                transport.close();
            }
        }
    }
}
