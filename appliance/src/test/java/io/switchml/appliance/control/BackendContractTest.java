package io.switchml.appliance.control;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendCapabilities;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.backend.SoftwareBackend;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.ElementType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The registry holds an offload backend to its word on where a job's slots live: quotas are checked by
 * {@link Backend#slotsInShards()} before the reservation and counted by the job's {@link BackendJob#slotsInShards()}
 * after it, so a backend whose job answers otherwise is passed over, its reservation released, and the job placed on
 * the next backend with that reason (or, asked for by name, refuses the job with it), instead of being counted against
 * the wrong budget.
 */
final class BackendContractTest
{
    @TempDir
    Path dir;

    @Test
    void aBackendWhoseJobDisagreesOnWhereItsSlotsLiveIsPassedOverWithTheReason() throws Exception
    {
        try (Appliance appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(dir.toString())))
        {
            final FakeBackend misdeclared = new FakeBackend("misdeclared", true);
            final FakeBackend honest = new FakeBackend("honest", false);
            final List<String> fallbacks = new ArrayList<>();
            final JobRegistry registry = appliance.registry();
            registry.placement(List.of(misdeclared, honest, new SoftwareBackend()), false,
                (backend, reason) -> fallbacks.add(backend + ": " + reason));
            final JobSpec spec = new JobSpec("default", "contract", 2, ElementType.INT32, 256, 8, false, 1_000, 10_000);

            final Job job = registry.create(spec, "token-contract-0", false);
            assertEquals("honest", job.backendName(), "placed on the next backend that keeps its word");
            assertEquals(1, misdeclared.released, "the disagreeing reservation released");
            assertEquals(0, honest.released);
            assertTrue(fallbacks.size() == 1 && fallbacks.get(0).startsWith("misdeclared: ") &&
                fallbacks.get(0).contains("slotsInShards()"), "the reason names the disagreement: " + fallbacks);
            assertTrue(job.fallback().contains("misdeclared"), "the job's fallback says why: " + job.fallback());

            // asked for by name, it refuses the job (nothing is moved), naming the disagreement
            final JobSpec named = new JobSpec("default", "contract-named", 2, ElementType.INT32, 256, 8, false, 1_000, 10_000);
            final JobRegistry.RefusedException refused = assertThrows(JobRegistry.RefusedException.class,
                () -> registry.create(named, "token-contract-1", false, "misdeclared"));
            assertTrue(refused.getMessage().contains("backend misdeclared cannot take job 'contract-named'") &&
                refused.getMessage().contains("slotsInShards()"), refused.getMessage());
            assertEquals(2, misdeclared.released, "the disagreeing reservation released again");
        }
    }

    /** An offload backend (its own {@code slotsInShards()} false) whose jobs answer {@code jobSlotsInShards}. */
    private static final class FakeBackend implements Backend
    {
        private final String name;
        private final boolean jobSlotsInShards;
        private int released;

        FakeBackend(final String name, final boolean jobSlotsInShards)
        {
            this.name = name;
            this.jobSlotsInShards = jobSlotsInShards;
        }

        public String name()
        {
            return name;
        }

        public BackendCapabilities capabilities()
        {
            return new BackendCapabilities(BackendCapabilities.typeSet(ElementType.INT32), 1, DataHeaderFlyweight.MAX_ELEMENTS,
                DataHeaderFlyweight.MAX_WORKERS, Long.MAX_VALUE, DataHeaderFlyweight.MAX_ELEMENTS, true, true);
        }

        public String refusal(final JobSpec spec)
        {
            return null;
        }

        public BackendJob reserve(final JobSpec spec, final int jobId)
        {
            return new BackendJob()
            {
                public void activate(final Job job)
                {
                }

                public String poll(final long nowNs)
                {
                    return null;
                }

                public boolean slotsInShards()
                {
                    return jobSlotsInShards;
                }

                public void release()
                {
                    released++;
                }
            };
        }

        public String health()
        {
            return null;
        }

        public String describe()
        {
            return name;
        }

        public void close()
        {
        }
    }
}
