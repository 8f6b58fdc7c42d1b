package io.switchml.dist;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.protocol.ElementType;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a worker is told of its job's placement, against an appliance whose first backend is the Tofino pipeline
 * model (an offload that needs no root): the backend the job runs on, what was passed over and why, and a named
 * backend that cannot take the job refused with the appliance's reason. Real TCP and UDP on loopback.
 */
final class WorkerPlacementTest
{
    @TempDir
    Path dir;

    private Appliance appliance;

    @BeforeEach
    void start() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .backends("tofino-model,software").macEnabled(false));
    }

    @AfterEach
    void stop()
    {
        appliance.close();
    }

    private WorkerContext worker(final String job, final int lanes)
    {
        return new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token("token-" + job).worldSize(1).rank(0)
            .elementType(ElementType.INT32).lanes(lanes).slots(4).macEnabled(false).retransmitTimeoutMs(20);
    }

    @Test
    void theWorkerSaysWhereItsJobRunsAndWhatWasPassedOver() throws Exception
    {
        try (WorkerClient offloaded = WorkerClient.connect(worker("fits", 64)))
        {
            assertEquals("tofino-model", offloaded.placementDescription());
            final int[] tensor = {1, -2, 3, 1 << 20};
            final int[] sum = tensor.clone();
            offloaded.allReduce(sum, sum);
            assertArrayEquals(tensor, sum, "one rank's sum through the switch model is its own tensor");
            assertEquals(0, appliance.counter("slots_completed"), "no software shard aggregated it");
        }
        try (WorkerClient software = WorkerClient.connect(worker("wide", 1024)))
        {
            assertEquals("software (passed over: tofino-model: k=1024 exceeds 256)", software.placementDescription());
            assertEquals("software", software.backend());
            final int[] tensor = {5, 6};
            software.allReduce(tensor, tensor);
            assertTrue(appliance.counter("slots_completed") > 0, "the shards count what they aggregate");
        }
        final AllReduceException refused = assertThrows(AllReduceException.class,
            () -> WorkerClient.connect(worker("named", 1024).backend("tofino-model")));
        assertTrue(refused.getMessage().contains("backend tofino-model cannot take job 'named': k=1024 exceeds 256"),
            refused.getMessage());
    }
}
