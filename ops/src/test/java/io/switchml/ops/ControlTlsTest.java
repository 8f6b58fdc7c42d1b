package io.switchml.ops;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ControlTls;
import io.switchml.protocol.ElementType;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The control channel over TLS (JSSE), with a certificate made by the JDK's keytool as an operator would: a worker
 * and ops that trust it work, a client that trusts another certificate fails the handshake naming the file, and a
 * plain-TCP client gets nothing.
 */
@Timeout(60)
class ControlTlsTest
{
    @TempDir
    Path dir;

    private Appliance appliance;

    @AfterEach
    void stop()
    {
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private Path certificate(final String name) throws Exception
    {
        return certificate(name, null);
    }

    /**
     * @param startDate keytool's -startdate (e.g. "-3d" with a validity of 1 day: expired), or null for now.
     */
    private Path certificate(final String name, final String startDate) throws Exception
    {
        final String keytool = Path.of(ProcessHandle.current().info().command().orElseThrow()).resolveSibling("keytool").toString();
        final Path keystore = dir.resolve(name + ".p12");
        final Path pem = dir.resolve(name + ".pem");
        final java.util.List<String> generate = new java.util.ArrayList<>(java.util.List.of(keytool, "-genkeypair", "-alias",
            name, "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=" + name, "-ext", "SAN=ip:127.0.0.1,dns:localhost",
            "-validity", startDate == null ? "2" : "1", "-storetype", "PKCS12", "-keystore", keystore.toString(), "-storepass",
            "pass-" + name, "-keypass", "pass-" + name));
        if (startDate != null)
        {
            generate.addAll(java.util.List.of("-startdate", startDate));
        }
        run(generate.toArray(String[]::new));
        run(keytool, "-exportcert", "-rfc", "-alias", name, "-keystore", keystore.toString(), "-storepass", "pass-" + name,
            "-file", pem.toString());
        Files.writeString(dir.resolve(name + ".password"), "pass-" + name + "\n");
        privately(keystore, dir.resolve(name + ".password"));
        return pem;
    }

    /**
     * Mode 600, as the appliance and the workers require of a keystore and its password file.
     */
    private static void privately(final Path... files) throws java.io.IOException
    {
        for (final Path file : files)
        {
            Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        }
    }

    private static void run(final String... command) throws Exception
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, process.waitFor(), String.join(" ", command) + ": " + output);
    }

    private WorkerContext worker(final String job, final String tlsCa)
    {
        return new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token("token-" + job)
            .credential("team-a-secret-000000").tenant("team-a").tlsCa(tlsCa)
            .worldSize(1).rank(0).elementType(ElementType.INT32).lanes(64).slots(4);
    }

    @Test
    void workersAndOpsTrustTheAppliancesCertificateAndNothingElseGetsThrough() throws Exception
    {
        final Path trusted = certificate("appliance");
        final Path other = certificate("stranger");
        final Path credentials = dir.resolve("credentials");
        Files.writeString(credentials, "operator ops 0perator-secret-0000\ntenant team-a team-a-secret-000000\n");
        Files.setPosixFilePermissions(credentials, PosixFilePermissions.fromString("rw-------"));
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()).controlCredentialsFile(credentials.toString())
            .controlTls(dir.resolve("appliance.p12").toString(), dir.resolve("appliance.password").toString()));

        try (Socket socket = ControlTls.connect("127.0.0.1", appliance.controlPort(), 5_000, trusted))
        {
            socket.getOutputStream().write("HEALTH\n".getBytes(StandardCharsets.UTF_8));
            final String health = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)).readLine();
            assertTrue(health.startsWith("OK status=up") && health.contains(" tls=on "), health);
        }

        try (WorkerClient client = WorkerClient.connect(worker("secure", trusted.toString())))
        {
            final int[] tensor = {1, 2, 3};
            client.allReduce(tensor, tensor);
            assertArrayEquals(new int[] {1, 2, 3}, tensor, "a world of one sums to itself");

            final String[] base = {"--dir=" + dir.resolve("state"), "--control-port=" + appliance.controlPort(),
                "--credential-file=" + credentials};
            final OpsCli.Result listed = OpsCli.run("jobs", "list", base[0], base[1], base[2], "--tls-ca=" + trusted);
            assertEquals(0, listed.exitCode(), listed::toString);
            assertTrue(listed.out().contains("team-a/secure"), listed::toString);
            final OpsCli.Result status = OpsCli.run("status", base[0], base[1], base[2], "--tls-ca=" + trusted);
            assertEquals(0, status.exitCode(), status::toString);
            assertTrue(status.out().contains("control channel TLS, authorization on"), status::toString);
            final OpsCli.Result wrongCa = OpsCli.run("jobs", "list", base[0], base[1], base[2], "--tls-ca=" + other);
            assertNotEquals(0, wrongCa.exitCode(), wrongCa::toString);
            assertTrue(wrongCa.err().contains("TLS handshake with the control endpoint 127.0.0.1:" + appliance.controlPort() +
                " failed (trusting " + other + ")"), wrongCa::toString);
        }

        final AllReduceException stranger = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("mitm", other.toString())));
        assertTrue(stranger.getMessage().contains("TLS handshake with the control endpoint") &&
            stranger.getMessage().contains(other.toString()), stranger.getMessage());

        final AllReduceException plain = assertThrows(AllReduceException.class, () -> WorkerClient.connect(worker("plain", null)));
        assertTrue(plain.getMessage().contains("did not answer the create of job 'plain' in the control protocol; if its " +
            "control endpoint uses TLS, give its certificate with --tls-ca") || plain.getMessage().contains("closed the control " +
            "connection") || plain.getMessage().contains("Connection reset"), plain.getMessage());
        assertEquals(0, appliance.registry().jobCount(), "neither the stranger's nor the plain client's job was created");
    }

    @Test
    void aClientOverTheConnectionLimitThatTricklesAHandshakeHoldsUpNobody() throws Exception
    {
        final Path trusted = certificate("appliance");
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()).controlLimits(16, 2, 30_000)
            .controlTls(dir.resolve("appliance.p12").toString(), dir.resolve("appliance.password").toString()));
        final java.util.List<Socket> held = new java.util.ArrayList<>();
        try
        {
            for (int i = 0; i < 2; i++)
            {
                held.add(new Socket("127.0.0.1", appliance.controlPort()));
            }
            // over the per-address limit: refused at accept. A reply would run the TLS handshake on the accept thread,
            // which this client draws out a byte at a time
            final Socket trickler = new Socket("127.0.0.1", appliance.controlPort());
            held.add(trickler);
            final Thread trickle = Thread.ofVirtual().start(() ->
            {
                try
                {
                    for (final byte b : new byte[] {0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00})
                    {
                        trickler.getOutputStream().write(b);
                        trickler.getOutputStream().flush();
                        Thread.sleep(800);
                    }
                }
                catch (final IOException | InterruptedException closed)
                {
                    // refused
                }
            });
            Thread.sleep(300);
            held.removeFirst().close();
            Thread.sleep(200);
            final long startNs = System.nanoTime();
            try (Socket socket = ControlTls.connect("127.0.0.1", appliance.controlPort(), 5_000, trusted))
            {
                socket.setSoTimeout(5_000);
                socket.getOutputStream().write("HEALTH\n".getBytes(StandardCharsets.UTF_8));
                final String health = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)).readLine();
                assertTrue(health.startsWith("OK status=up"), health);
            }
            final long elapsedMs = (System.nanoTime() - startNs) / 1_000_000;
            assertTrue(elapsedMs < 2_000, "a new client waited " + elapsedMs + " ms behind the trickling one");
            assertEquals(-1, trickler.getInputStream().read(), "the refused connection was closed without a reply");
            trickle.join(10_000);
        }
        finally
        {
            for (final Socket socket : held)
            {
                socket.close();
            }
        }
    }

    @Test
    void aTlsPeerThatReadsNoRepliesIsCutOffAndHoldsUpNobody() throws Exception
    {
        // over TLS a close first sends close_notify, which waits for the write lock that the stuck send holds: the
        // cut-off must not wait for it
        final Path trusted = certificate("appliance");
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString())
            .controlTls(dir.resolve("appliance.p12").toString(), dir.resolve("appliance.password").toString()));
        final int requests = 80_000;
        try (Socket deaf = ControlTls.connect("127.0.0.1", appliance.controlPort(), 5_000, trusted);
            Socket other = ControlTls.connect("127.0.0.1", appliance.controlPort(), 5_000, trusted))
        {
            deaf.setSoTimeout(20_000);
            other.setSoTimeout(10_000);
            final BufferedReader otherReader = new BufferedReader(new InputStreamReader(other.getInputStream(), StandardCharsets.UTF_8));
            final Thread writer = Thread.ofVirtual().start(() ->
            {
                try
                {
                    deaf.getOutputStream().write("STATS\n".repeat(requests).getBytes(StandardCharsets.UTF_8));
                    deaf.getOutputStream().flush();
                }
                catch (final IOException closed)
                {
                    // cut off by the appliance
                }
            });
            Thread.sleep(1_000);
            other.getOutputStream().write("HEALTH\n".getBytes(StandardCharsets.UTF_8));
            assertTrue(otherReader.readLine().startsWith("OK status=up"), "another client is answered meanwhile");
            Thread.sleep(io.switchml.appliance.control.ControlServer.SEND_DEADLINE_MS + 2_000);
            int replies = 0;
            final BufferedReader deafReader = new BufferedReader(new InputStreamReader(deaf.getInputStream(), StandardCharsets.UTF_8));
            try
            {
                while (deafReader.readLine() != null)
                {
                    replies++;
                }
            }
            catch (final java.net.SocketTimeoutException stillOpen)
            {
                throw new AssertionError("the TLS connection is still open after " + replies + " replies", stillOpen);
            }
            catch (final IOException reset)
            {
                // cut off: a reset, or a TLS record broken off
            }
            assertTrue(replies < requests, "cut off after " + replies + " of " + requests + " replies");
            writer.join(5_000);
        }
    }

    @Test
    void withAClientCaOnlyClientsWithACertificateItAcceptsGetIn() throws Exception
    {
        final Path trusted = certificate("appliance");
        final Path clientCertificate = certificate("client");
        certificate("stranger");
        final Path credentials = dir.resolve("credentials");
        Files.writeString(credentials, "operator ops 0perator-secret-0000\ntenant team-a team-a-secret-000000\n");
        Files.setPosixFilePermissions(credentials, PosixFilePermissions.fromString("rw-------"));
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()).controlCredentialsFile(credentials.toString())
            .controlTls(dir.resolve("appliance.p12").toString(), dir.resolve("appliance.password").toString())
            .controlTlsClientCa(clientCertificate.toString()));

        try (WorkerClient client = WorkerClient.connect(worker("mutual", trusted.toString())
            .tlsClientCertificate(dir.resolve("client.p12").toString(), dir.resolve("client.password").toString())))
        {
            final int[] tensor = {4, 5};
            client.allReduce(tensor, tensor);
            assertArrayEquals(new int[] {4, 5}, tensor);
        }
        final AllReduceException anonymous = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("anonymous", trusted.toString())));
        assertTrue(anonymous.getMessage().contains("cannot join job 'anonymous'"), anonymous.getMessage());
        final AllReduceException stranger = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("stranger", trusted.toString())
                .tlsClientCertificate(dir.resolve("stranger.p12").toString(), dir.resolve("stranger.password").toString())));
        assertTrue(stranger.getMessage().contains("cannot join job 'stranger'"), stranger.getMessage());

        final String[] base = {"--dir=" + dir.resolve("state"), "--control-port=" + appliance.controlPort(),
            "--credential-file=" + credentials, "--tls-ca=" + trusted};
        final OpsCli.Result withCertificate = OpsCli.run("jobs", "list", "--all", base[0], base[1], base[2], base[3],
            "--tls-keystore=" + dir.resolve("client.p12"), "--tls-password-file=" + dir.resolve("client.password"));
        assertEquals(0, withCertificate.exitCode(), withCertificate::toString);
        final OpsCli.Result without = OpsCli.run("jobs", "list", base[0], base[1], base[2], base[3]);
        assertNotEquals(0, without.exitCode(), without::toString);
        assertEquals(0, appliance.registry().jobCount(), "only the certified worker's job ran, and it ended");
    }

    /**
     * A trust anchor's own dates are not checked (PKIX), so the expired certificate is one a trusted CA signed.
     */
    @Test
    void anExpiredCertificateFailsTheHandshake() throws Exception
    {
        final String keytool = Path.of(ProcessHandle.current().info().command().orElseThrow()).resolveSibling("keytool").toString();
        final String ca = dir.resolve("ca.p12").toString();
        final String server = dir.resolve("server.p12").toString();
        final Path caPem = dir.resolve("ca.pem");
        run(keytool, "-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=test-ca", "-ext",
            "bc:c", "-validity", "2", "-storetype", "PKCS12", "-keystore", ca, "-storepass", "pass-ca");
        run(keytool, "-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, "-storepass", "pass-ca", "-file", caPem.toString());
        run(keytool, "-genkeypair", "-alias", "server", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=server",
            "-validity", "2", "-storetype", "PKCS12", "-keystore", server, "-storepass", "pass-server");
        run(keytool, "-certreq", "-alias", "server", "-keystore", server, "-storepass", "pass-server", "-file",
            dir.resolve("server.csr").toString());
        run(keytool, "-gencert", "-alias", "ca", "-keystore", ca, "-storepass", "pass-ca", "-infile",
            dir.resolve("server.csr").toString(), "-outfile", dir.resolve("server.pem").toString(), "-rfc", "-startdate", "-3d",
            "-validity", "1", "-ext", "SAN=ip:127.0.0.1,dns:localhost");
        run(keytool, "-importcert", "-noprompt", "-alias", "ca", "-keystore", server, "-storepass", "pass-server", "-file",
            caPem.toString());
        run(keytool, "-importcert", "-alias", "server", "-keystore", server, "-storepass", "pass-server", "-file",
            dir.resolve("server.pem").toString());
        Files.writeString(dir.resolve("server.password"), "pass-server\n");
        privately(Path.of(server), dir.resolve("server.password"));
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()).controlTls(server, dir.resolve("server.password").toString()));

        final IOException refused = assertThrows(IOException.class,
            () -> ControlTls.connect("127.0.0.1", appliance.controlPort(), 5_000, caPem).close());
        assertTrue(refused.getMessage().startsWith("TLS handshake with the control endpoint 127.0.0.1:" + appliance.controlPort() +
            " failed (trusting " + caPem + ")"), refused.getMessage());
        final String cause = String.valueOf(refused.getMessage()).toLowerCase(java.util.Locale.ROOT);
        assertTrue(cause.contains("expired") || cause.contains("validity") || cause.contains("notafter"), refused.getMessage());
    }

    @Test
    void aWrongKeystorePasswordStopsTheStartNamingTheOption() throws Exception
    {
        certificate("appliance");
        Files.writeString(dir.resolve("appliance.password"), "not-the-password\n");
        final IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> Appliance.launch(
            new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.resolve("state").toString())
                .controlTls(dir.resolve("appliance.p12").toString(), dir.resolve("appliance.password").toString())));
        assertTrue(refused.getMessage().startsWith(ApplianceContext.CONTROL_TLS_KEYSTORE_PROP + ": cannot load the TLS keystore"),
            refused.getMessage());
    }

    @Test
    void aKeystoreOrPasswordFileOthersMayReadStopsTheStartNamingTheOptionAndTheFile() throws Exception
    {
        certificate("appliance");
        final Path keystore = dir.resolve("appliance.p12");
        final Path password = dir.resolve("appliance.password");
        final ApplianceContext context = new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("state").toString()).controlTls(keystore.toString(), password.toString());

        Files.setPosixFilePermissions(password, java.nio.file.attribute.PosixFilePermissions.fromString("rw-r-----"));
        final IllegalArgumentException groupReadable = assertThrows(IllegalArgumentException.class, () -> Appliance.launch(context));
        assertEquals(ApplianceContext.CONTROL_TLS_KEYSTORE_PROP + ": TLS password file " + password +
            " is readable or writable by other users [GROUP_READ]: chmod 600 it", groupReadable.getMessage());

        privately(password);
        Files.setPosixFilePermissions(keystore, java.nio.file.attribute.PosixFilePermissions.fromString("rw----rw-"));
        final IllegalArgumentException worldWritable = assertThrows(IllegalArgumentException.class, () -> Appliance.launch(context));
        assertEquals(ApplianceContext.CONTROL_TLS_KEYSTORE_PROP + ": TLS keystore " + keystore +
            " is readable or writable by other users [OTHERS_READ, OTHERS_WRITE]: chmod 600 it", worldWritable.getMessage());

        privately(keystore);
        appliance = Appliance.launch(context);
        assertTrue(appliance.controlPort() > 0);
    }
}
