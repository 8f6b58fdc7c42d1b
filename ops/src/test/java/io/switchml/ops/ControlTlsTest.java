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
        final String keytool = Path.of(ProcessHandle.current().info().command().orElseThrow()).resolveSibling("keytool").toString();
        final Path keystore = dir.resolve(name + ".p12");
        final Path pem = dir.resolve(name + ".pem");
        run(keytool, "-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=" + name,
            "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2", "-storetype", "PKCS12", "-keystore", keystore.toString(),
            "-storepass", "pass-" + name, "-keypass", "pass-" + name);
        run(keytool, "-exportcert", "-rfc", "-alias", name, "-keystore", keystore.toString(), "-storepass", "pass-" + name,
            "-file", pem.toString());
        Files.writeString(dir.resolve(name + ".password"), "pass-" + name + "\n");
        return pem;
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
}
