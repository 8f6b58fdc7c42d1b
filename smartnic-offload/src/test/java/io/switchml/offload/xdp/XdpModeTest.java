package io.switchml.offload.xdp;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Generic (skb) XDP is refused: there the kernel hands the program GSO and GRO super-packets, several updates in
 * one packet, which it cannot split (in the emulated rack such jobs stalled, missing a rank's updates, until the
 * workers turned GSO off). {@code mode=generic}, and {@code auto}, which fell back to it, leave the backend not
 * started with that reason, nothing is attached, and jobs go to software saying why.
 */
final class XdpModeTest
{
    @TempDir
    Path dir;

    private Veth veth;

    @BeforeEach
    void createInterface()
    {
        veth = new Veth("m");
    }

    @AfterEach
    void removeInterface()
    {
        veth.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"generic", "skb", "auto"})
    void genericModeIsRefusedAndJobsGoToSoftwareSayingWhy(final String mode) throws Exception
    {
        try (Appliance appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve(mode).toString()).backends("xdp,software").backendOption("xdp", "interface", veth.name)
            .backendOption("xdp", "mode", mode)))
        {
            assertTrue(XdpAttachment.query(veth.name).isEmpty(), "something was attached in mode " + mode);
            final String reply = ControlLine.send(appliance.controlPort(),
                "CREATE name=m world=4 type=float32 k=256 s=32 mac=on");
            assertTrue(reply.startsWith("OK ") && reply.contains(" backend=software fallback=xdp: not started: " +
                "switchml.appliance.xdp.mode=" + mode + " is not supported: in generic (skb) mode"), reply);
            assertTrue(reply.contains("GSO and GRO super-packets"), reply);
            // what an operator's alert and `switchml ops status` read
            final String metrics = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + appliance.httpPort() + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
            assertTrue(metrics.contains("switchml_backend_up{backend=\"xdp\"} 0.0") &&
                metrics.contains("switchml_backend_up{backend=\"software\"} 1.0"), metrics);
            final String health = ControlLine.send(appliance.controlPort(), "HEALTH");
            assertTrue(health.contains(" backends=xdp,software backendsDown=xdp "), health);
        }
    }

    @Test
    void aReattachValueThatIsNeitherOnNorOffLeavesTheBackendNotStartedNamingTheOption() throws Exception
    {
        try (Appliance appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.toString()).backends("xdp,software").backendOption("xdp", "interface", veth.name)
            .backendOption("xdp", "reattach", "maybe")))
        {
            assertTrue(XdpAttachment.query(veth.name).isEmpty());
            final String reply = ControlLine.send(appliance.controlPort(), "CREATE name=r world=4 type=float32 k=256 s=32");
            assertTrue(reply.contains(" backend=software fallback=xdp: not started: switchml.appliance.xdp.reattach must be " +
                "on or off: 'maybe'"), reply);
        }
    }
}
