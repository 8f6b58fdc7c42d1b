package io.switchml.ops;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An appliance bound to one rack-facing address, as appliance.properties tells operators to set it, does not listen on
 * loopback: local {@code switchml ops} finds the address it announced in its journal, as it finds the port, instead
 * of saying "not running". The address is on a veth of the test's (root, as CI runs; without root this fails saying so).
 */
@Timeout(60)
final class OpsBindAddressTest
{
    private static final String INTERFACE = "sml-opsb";
    private static final String ADDRESS = "10.253.17.1";

    @TempDir
    Path dir;

    private Appliance appliance;

    @BeforeEach
    void addAddress() throws Exception
    {
        run("ip", "link", "del", INTERFACE);
        // a veth pair (this kernel has no dummy interfaces), the address on one end
        assertEquals(0, run("ip", "link", "add", INTERFACE, "type", "veth", "peer", "name", INTERFACE + "-p"),
            "cannot add a veth pair: this test needs root (CI runs as root)");
        assertEquals(0, run("ip", "addr", "add", ADDRESS + "/32", "dev", INTERFACE));
        assertEquals(0, run("ip", "link", "set", INTERFACE + "-p", "up"));
        assertEquals(0, run("ip", "link", "set", INTERFACE, "up"));
    }

    @AfterEach
    void removeAddress() throws Exception
    {
        if (appliance != null)
        {
            appliance.close();
        }
        run("ip", "link", "del", INTERFACE);
    }

    @Test
    void localOpsReachesAnApplianceBoundToARackAddress() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().bindAddress(ADDRESS).dataPort(0).controlPort(0).httpPort(-1)
            .dir(dir.toString()));

        final OpsCli.Result status = OpsCli.run("status", "--dir", dir.toString());
        assertEquals(0, status.exitCode(), status::toString);
        assertTrue(status.out().contains("control     " + ADDRESS + ":" + appliance.controlPort()), status::toString);
        final OpsCli.Result jobs = OpsCli.run("jobs", "--dir", dir.toString());
        assertEquals(0, jobs.exitCode(), jobs::toString);
    }

    private static int run(final String... command) throws Exception
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        assertTrue(process.waitFor(10, TimeUnit.SECONDS), String.join(" ", command));
        return process.exitValue();
    }
}
