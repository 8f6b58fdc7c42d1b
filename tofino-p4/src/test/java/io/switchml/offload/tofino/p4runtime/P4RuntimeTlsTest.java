package io.switchml.offload.tofino.p4runtime;

import io.grpc.ServerCredentials;
import io.grpc.TlsServerCredentials;
import io.switchml.offload.tofino.JobInstaller;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.model.P4Names;
import io.switchml.offload.tofino.model.TofinoModel;
import io.switchml.protocol.ControlTls;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetSocketAddress;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The P4Runtime session over TLS (grpc-java, the model behind a TLS server as Stratum runs with
 * {@code -server_cert_file}): the controller verifies the switch's certificate, presents its own where the server
 * requires one, and a session that cannot be trusted fails naming the switch, not a hang.
 */
final class P4RuntimeTlsTest
{
    @TempDir
    Path dir;

    private final Object lock = new Object();

    private static JobInstaller.JobImage job()
    {
        return new JobInstaller.JobImage(3, 2, ElementType.INT32, 64, 2, 10, 1, new int[] {0x0A00_0001, 0x0A00_0002},
            new int[] {41000, 41001}, new int[] {1, 2});
    }

    @Test
    void theControllerTrustsTheSwitchsCertificateAndNothingElse() throws Exception
    {
        final Path switchPem = SwitchCertificates.create(dir, "switch");
        final Path otherPem = SwitchCertificates.create(dir, "other");
        final ServerCredentials tls = TlsServerCredentials.newBuilder()
            .keyManager(ControlTls.keyManagers(SwitchCertificates.keystore(dir, "switch"), SwitchCertificates.password(dir, "switch")))
            .build();
        final TofinoModel model = new TofinoModel(7471);
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(),
            model, lock, tls))
        {
            try (P4RuntimeSwitch session = P4RuntimeSwitch.connect("127.0.0.1", server.port(), P4RuntimeSwitch.tls(switchPem, null, null),
                1, 10, 2000, P4InfoIndex.switchml(), null))
            {
                assertTrue(session.target().endsWith(" (TLS)"), session.target());
                JobInstaller.install(session, job());
                synchronized (lock)
                {
                    assertEquals(1, model.tableEntries(P4Names.JOB_TABLE), "installed over TLS");
                }
            }
            final PipelineException plaintext = assertThrows(PipelineException.class,
                () -> P4RuntimeSwitch.connect("127.0.0.1", server.port(), 1, 11, 2000, P4InfoIndex.switchml(), null));
            assertEquals("UNAVAILABLE", plaintext.code());
            assertTrue(plaintext.getMessage().contains("switch 127.0.0.1:" + server.port() + " not reachable: UNAVAILABLE"),
                plaintext.getMessage());
            final PipelineException untrusted = assertThrows(PipelineException.class, () -> P4RuntimeSwitch.connect("127.0.0.1",
                server.port(), P4RuntimeSwitch.tls(otherPem, null, null), 1, 12, 2000, P4InfoIndex.switchml(), null));
            assertEquals("UNAVAILABLE", untrusted.code());
            assertTrue(untrusted.getMessage().contains("switch 127.0.0.1:" + server.port() + " (TLS) not reachable: ") &&
                untrusted.getMessage().contains("TLS handshake failed: ") &&
                untrusted.getMessage().contains("unable to find valid certification path"), untrusted.getMessage());
            assertTrue(!untrusted.getMessage().contains("\n"), "one line: it may end up in a control reply");
        }
    }

    @Test
    void aCertificateThatDoesNotNameTheSwitchIsRefused() throws Exception
    {
        final Path elsewhere = SwitchCertificates.create(dir, "elsewhere", "dns:switch.example");
        final ServerCredentials tls = TlsServerCredentials.newBuilder().keyManager(ControlTls.keyManagers(
            SwitchCertificates.keystore(dir, "elsewhere"), SwitchCertificates.password(dir, "elsewhere"))).build();
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(),
            new TofinoModel(7471), lock, tls))
        {
            final PipelineException wrongName = assertThrows(PipelineException.class, () -> P4RuntimeSwitch.connect("127.0.0.1",
                server.port(), P4RuntimeSwitch.tls(elsewhere, null, null), 1, 10, 2000, P4InfoIndex.switchml(), null));
            assertTrue(wrongName.getMessage().contains("TLS handshake failed: ") &&
                wrongName.getMessage().contains("No subject alternative names matching IP address 127.0.0.1"), wrongName.getMessage());
        }
    }

    @Test
    void aSwitchThatRequiresAClientCertificateTakesOnlyTheControllersOwn() throws Exception
    {
        final Path switchPem = SwitchCertificates.create(dir, "switch");
        final Path controllerPem = SwitchCertificates.create(dir, "controller");
        SwitchCertificates.create(dir, "stranger");
        final ServerCredentials mutual = TlsServerCredentials.newBuilder()
            .keyManager(ControlTls.keyManagers(SwitchCertificates.keystore(dir, "switch"), SwitchCertificates.password(dir, "switch")))
            .trustManager(ControlTls.trustManagers(controllerPem)).clientAuth(TlsServerCredentials.ClientAuth.REQUIRE).build();
        final TofinoModel model = new TofinoModel(7471);
        try (ModelP4RuntimeServer server = ModelP4RuntimeServer.tcp(new InetSocketAddress("127.0.0.1", 0), 1, P4InfoIndex.switchml(),
            model, lock, mutual))
        {
            final PipelineException anonymous = assertThrows(PipelineException.class, () -> P4RuntimeSwitch.connect("127.0.0.1",
                server.port(), P4RuntimeSwitch.tls(switchPem, null, null), 1, 10, 2000, P4InfoIndex.switchml(), null));
            assertTrue(anonymous.getMessage().contains("TLS handshake failed: ") &&
                anonymous.getMessage().contains("CERTIFICATE_REQUIRED"), anonymous.getMessage());
            final PipelineException stranger = assertThrows(PipelineException.class, () -> P4RuntimeSwitch.connect("127.0.0.1",
                server.port(), P4RuntimeSwitch.tls(switchPem, SwitchCertificates.keystore(dir, "stranger"),
                    SwitchCertificates.password(dir, "stranger")), 1, 11, 2000, P4InfoIndex.switchml(), null));
            assertTrue(stranger.getMessage().contains("TLS handshake failed: ") &&
                stranger.getMessage().contains("CERTIFICATE_REQUIRED"), "a certificate the switch does not trust is not offered: " +
                stranger.getMessage());
            try (P4RuntimeSwitch session = P4RuntimeSwitch.connect("127.0.0.1", server.port(), P4RuntimeSwitch.tls(switchPem,
                SwitchCertificates.keystore(dir, "controller"), SwitchCertificates.password(dir, "controller")), 1, 12, 2000,
                P4InfoIndex.switchml(), null))
            {
                JobInstaller.install(session, job());
                synchronized (lock)
                {
                    assertEquals(1, model.tableEntries(P4Names.JOB_TABLE), "installed by the controller the switch trusts");
                }
            }
        }
    }
}
