package io.switchml.ops;

import io.switchml.protocol.ControlProtocol;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A short-lived connection to the appliance's control endpoint for operator queries (see
 * {@link ControlProtocol}): HEALTH, JOBS, STATS and ABORTJOB. An ERR reply becomes an
 * {@link OpsException} with exit code {@link OpsException#FAILED} and the appliance's message.
 */
final class ControlClient implements AutoCloseable
{
    private final String address;
    private final Socket socket;
    private final BufferedReader reader;
    private final OutputStream out;

    private final java.util.function.Supplier<String> credential;

    ControlClient(final String host, final int port, final int timeoutMs) throws IOException
    {
        this(host, port, timeoutMs, () -> null, () -> null, null, null);
    }

    ControlClient(final String host, final int port, final int timeoutMs, final java.util.function.Supplier<String> credential,
        final java.util.function.Supplier<java.nio.file.Path> tlsCa, final java.nio.file.Path tlsKeystore,
        final java.nio.file.Path tlsPasswordFile) throws IOException
    {
        this.credential = credential;
        address = host + ":" + port;
        socket = io.switchml.protocol.ControlTls.connect(host, port, timeoutMs, tlsCa.get(), tlsKeystore, tlsPasswordFile);
        try
        {
            socket.setSoTimeout(timeoutMs);
            reader = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            out = socket.getOutputStream();
        }
        catch (final IOException ex)
        {
            socket.close();
            throw ex;
        }
    }

    /**
     * @return the HEALTH reply's fields (status, uptimeMs, jobs, memoryUsedBytes, ...).
     */
    Map<String, String> health() throws IOException
    {
        return expectOk(request(ControlProtocol.HEALTH));
    }

    /**
     * @return the fields of each JOB line of the JOBS reply (job, name, tenant, state, world, ...).
     */
    List<Map<String, String>> jobs() throws IOException
    {
        final List<Map<String, String>> jobs = new ArrayList<>();
        for (final String line : requestUntilEnd(ControlProtocol.JOBS + auth(), ControlProtocol.END))
        {
            final Map<String, String> fields = ControlProtocol.parse(line);
            if (ControlProtocol.ERR.equals(fields.get("")))
            {
                expectOk(fields);
            }
            jobs.add(fields);
        }
        return jobs;
    }

    /**
     * @return why each backend that is down is down ({@code BACKENDS}, an operator's verb), by name; empty when the
     * appliance does not answer it (an older appliance, or a tenant's credential).
     */
    Map<String, String> backendFailures() throws IOException
    {
        final Map<String, String> failures = new java.util.LinkedHashMap<>();
        for (final String line : requestUntilEnd(ControlProtocol.BACKENDS + auth(), ControlProtocol.END))
        {
            final Map<String, String> fields = ControlProtocol.parse(line);
            if (ControlProtocol.ERR.equals(fields.get("")))
            {
                return Map.of();
            }
            if ("BACKEND".equals(fields.get("")) && "0".equals(fields.get("up")) && fields.containsKey("reason"))
            {
                failures.put(fields.get("name"), fields.get("reason"));
            }
        }
        return failures;
    }

    /**
     * Abort a job by id.
     *
     * @throws OpsException with the appliance's message when it refuses (no such job).
     */
    void abortJob(final int jobId, final String reason) throws IOException
    {
        expectOk(request(ControlProtocol.ABORT_JOB + " job=" + jobId + auth() + " reason=" + reason.replace('\n', ' ')));
    }

    /**
     * @return " auth=SECRET" when an operator credential is configured, else "" (before any field that runs to the end
     * of the line, such as reason).
     */
    private String auth()
    {
        final String secret = credential.get();
        return secret == null ? "" : " auth=" + secret;
    }

    private Map<String, String> request(final String line) throws IOException
    {
        send(line);
        final String reply = reader.readLine();
        if (reply == null)
        {
            throw new IOException("the appliance at " + address + " closed the connection");
        }
        return ControlProtocol.parse(reply);
    }

    private List<String> requestUntilEnd(final String verb, final String end) throws IOException
    {
        send(verb);
        final List<String> lines = new ArrayList<>();
        String line;
        while ((line = reader.readLine()) != null && !line.equals(end))
        {
            lines.add(line);
            if (line.startsWith(ControlProtocol.ERR))
            {
                break;
            }
        }
        if (line == null)
        {
            throw new IOException("the appliance at " + address + " closed the connection before " + end);
        }
        return lines;
    }

    private void send(final String line) throws IOException
    {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static Map<String, String> expectOk(final Map<String, String> reply)
    {
        if (ControlProtocol.ERR.equals(reply.get("")))
        {
            throw new OpsException(OpsException.FAILED, "the appliance refused: " + reply.getOrDefault("message", "(no message)"));
        }
        if (!ControlProtocol.OK.equals(reply.get("")))
        {
            throw new OpsException(OpsException.FAILED, "unexpected reply from the appliance: " + reply);
        }
        return reply;
    }

    public void close() throws IOException
    {
        socket.close();
    }
}
