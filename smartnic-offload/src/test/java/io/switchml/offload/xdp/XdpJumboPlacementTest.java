package io.switchml.offload.xdp;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Jumbo frames: on a veth with MTU 9000 the program (xdp.frags) attaches in driver mode, takes jobs up to the
 * largest k one frame carries, (9000 - 68) / 4 = 2233, by default, and passes larger ones to software naming the
 * limit; {@code switchml.appliance.xdp.max-lanes} lowers it, and a value the MTU cannot carry (or the program
 * cannot take) leaves the backend not started with a message naming the option.
 */
final class XdpJumboPlacementTest
{
    @TempDir
    Path dir;

    private Veth veth;

    @BeforeEach
    void createInterface()
    {
        veth = new Veth("j", 9000);
    }

    @AfterEach
    void removeInterface()
    {
        veth.close();
    }

    private Appliance launch(final String maxLanes) throws Exception
    {
        final ApplianceContext context = new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .dir(dir.resolve("m" + maxLanes).toString()).backends("xdp,software").backendOption("xdp", "interface", veth.name)
            .backendOption("xdp", "slots", "64");
        if (maxLanes != null)
        {
            context.backendOption("xdp", "max-lanes", maxLanes);
        }
        return Appliance.launch(context);
    }

    @Test
    void jobUpToTheMtusLargestKGoesToXdpInDriverMode() throws Exception
    {
        try (Appliance appliance = launch(null))
        {
            final XdpAttachment.AttachedProgram attached = XdpAttachment.query(veth.name).orElseThrow();
            assertEquals(XdpMode.NATIVE, attached.mode());
            assertEquals(XdpLayout.PROGRAM_NAME, attached.name());
            final String fits = ControlLine.send(appliance.controlPort(), "CREATE name=jumbo world=4 type=float32 k=2233 s=16 mac=on");
            assertTrue(fits.startsWith("OK ") && fits.contains(" backend=xdp") && !fits.contains("fallback"), fits);
            final String ints = ControlLine.send(appliance.controlPort(), "CREATE name=ints world=4 type=int32 k=2233 s=16 mac=off");
            assertTrue(ints.contains(" backend=xdp") && !ints.contains("fallback"), ints);
            final String over = ControlLine.send(appliance.controlPort(), "CREATE name=over world=4 type=float32 k=2234 s=16");
            assertTrue(over.startsWith("OK ") && over.contains(" backend=software fallback=xdp: k=2234 exceeds 2233"), over);
        }
        assertTrue(XdpAttachment.query(veth.name).isEmpty(), "the program stays attached after the appliance closed");
    }

    @Test
    void configuredMaximumBelowTheMtusIsTheLimit() throws Exception
    {
        try (Appliance appliance = launch("512"))
        {
            final String fits = ControlLine.send(appliance.controlPort(), "CREATE name=fits world=2 type=int32 k=512 s=8");
            assertTrue(fits.contains(" backend=xdp") && !fits.contains("fallback"), fits);
            final String over = ControlLine.send(appliance.controlPort(), "CREATE name=over world=2 type=int32 k=1024 s=8");
            assertTrue(over.contains(" backend=software fallback=xdp: k=1024 exceeds 512"), over);
            final String explicit = ControlLine.send(appliance.controlPort(), "CREATE name=explicit world=2 type=int32 k=2233 s=8 backend=xdp");
            assertEquals("ERR message=backend xdp cannot take job 'explicit': k=2233 exceeds 512", explicit);
        }
    }

    @Test
    void maximumTheMtuCannotCarryLeavesTheBackendNotStartedNamingTheOption() throws Exception
    {
        try (Appliance appliance = launch("2234"))
        {
            assertTrue(XdpAttachment.query(veth.name).isEmpty(), "attached despite a refused option");
            final String reply = ControlLine.send(appliance.controlPort(), "CREATE name=j world=4 type=float32 k=2233 s=16");
            assertTrue(reply.contains(" backend=software fallback=xdp: not started: switchml.appliance.xdp.max-lanes=2234 exceeds " +
                "2233, the largest k whose update fits one frame of " + veth.name + "'s MTU 9000"), reply);
        }
        try (Appliance appliance = launch("5000"))
        {
            final String reply = ControlLine.send(appliance.controlPort(), "CREATE name=j world=4 type=float32 k=256 s=16");
            assertTrue(reply.contains(" backend=software fallback=xdp: not started: switchml.appliance.xdp.max-lanes must be " +
                "within 1.." + XdpLayout.MAX_LANES + ": 5000"), reply);
        }
    }
}
