package io.switchml.protocol.udp;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The receive batch rule that the appliance's shards and the worker's transport share
 * ({@link NativeUdp#receiveBatchFor}), alone; each side's use of it is tested with real sockets there
 * (NativeShardAgentTest, NativeDatagramTransportTest).
 */
class NativeUdpReceiveBatchTest
{
    @Test
    void theReceiveBatchHoldsAboutAFixedNumberOfBytes()
    {
        assertEquals(4, NativeUdp.receiveBatchFor(32, 32, 32 * 32_744L), "k = 8176 on loopback");
        assertEquals(14, NativeUdp.receiveBatchFor(32, 32, 32 * 8_972L), "k = 2233, MTU 9000");
        assertEquals(32, NativeUdp.receiveBatchFor(32, 7, 7 * 1_064L), "k = 256: the configured batch");
        assertEquals(2, NativeUdp.receiveBatchFor(32, 2, 2 * 65_507L), "never fewer than 2");
        assertEquals(1, NativeUdp.receiveBatchFor(1, 1, 65_507L), "nor more than configured");
        assertEquals(32, NativeUdp.receiveBatchFor(32, 3, 0), "empty datagrams");
    }
}
