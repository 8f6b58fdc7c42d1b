package io.switchml.appliance;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.ConnectException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * A backend whose close throws must not leave the rest of the appliance running: the control port and every data
 * port are released (bound again here), the failure reaches the caller, and a second close does nothing. Before,
 * a throw from an earlier step skipped every step after it.
 */
@Timeout(60)
class ApplianceCloseTest
{
    @TempDir
    Path tempDir;

    @Test
    void aFailingBackendCloseStillClosesEverythingElse() throws Exception
    {
        final Appliance appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0)
            .shards(2).dir(tempDir.toString()).backends(BrittleBackendProvider.NAME + ",software"));
        final int controlPort = appliance.controlPort();
        final int[] dataPorts = appliance.dataPorts();
        final int closesBefore = BrittleBackendProvider.CLOSES.get();

        final IllegalStateException failure = assertThrows(IllegalStateException.class, appliance::close);
        assertEquals(BrittleBackendProvider.FAILURE, failure.getMessage());
        assertEquals(closesBefore + 1, BrittleBackendProvider.CLOSES.get());

        assertThrows(ConnectException.class, () ->
        {
            try (Socket socket = new Socket())
            {
                socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), controlPort), 2_000);
            }
        }, "the control server was closed after the backend's failure");
        for (final int port : dataPorts)
        {
            assertDoesNotThrow(() -> bindAndClose(port), "data port " + port + " released");
        }
        assertDoesNotThrow(() -> appliance.close(), "a second close does nothing");
        assertEquals(closesBefore + 1, BrittleBackendProvider.CLOSES.get());
    }

    private static void bindAndClose(final int port) throws IOException
    {
        try (DatagramSocket socket = new DatagramSocket(null))
        {
            socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        }
    }
}
