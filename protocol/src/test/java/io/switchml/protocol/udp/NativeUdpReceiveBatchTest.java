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
        assertEquals(4, NativeUdp.receiveBatchFor(32, 32, 32 * 32_744L, false), "k = 8176 on loopback");
        assertEquals(14, NativeUdp.receiveBatchFor(32, 32, 32 * 8_972L, false), "k = 2233, MTU 9000");
        assertEquals(32, NativeUdp.receiveBatchFor(32, 7, 7 * 1_064L, false), "k = 256: the configured batch");
        assertEquals(2, NativeUdp.receiveBatchFor(32, 2, 2 * 65_507L, false), "never fewer than 2");
        assertEquals(1, NativeUdp.receiveBatchFor(1, 1, 65_507L, false), "nor more than configured");
        assertEquals(32, NativeUdp.receiveBatchFor(32, 3, 0, false), "empty datagrams");
        assertEquals(8, NativeUdp.receiveBatchFor(32, 4, 4 * 32_744L, true), "k = 8176, MACs in lanes: 8 a call");
        assertEquals(29, NativeUdp.receiveBatchFor(32, 32, 32 * 8_972L, true), "k = 2233, MACs in lanes");
        assertEquals(32, NativeUdp.receiveBatchFor(32, 32, 32 * 1_064L, true), "k = 256, MACs in lanes");
    }
}
