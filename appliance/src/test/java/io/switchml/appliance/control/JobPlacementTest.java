package io.switchml.appliance.control;

import io.switchml.appliance.backend.Backend;
import io.switchml.appliance.backend.BackendCapabilities;
import io.switchml.appliance.backend.BackendException;
import io.switchml.appliance.backend.BackendJob;
import io.switchml.appliance.control.JobRegistry.RefusedException;
import io.switchml.protocol.ControlProtocol;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Placement and the tenants' accounts as logic, with backends that only declare limits and refuse or reserve as told
 * (the real backends' placement is tested end to end in FallbackReasonsTest, TofinoPlacementTest and the XDP tests).
 */
final class JobPlacementTest
{
    private final CountersManager counters = new CountersManager(
        new UnsafeBuffer(new byte[64 * CountersManager.METADATA_LENGTH]), new UnsafeBuffer(new byte[64 * CountersManager.COUNTER_LENGTH]));
    private final AtomicCounter refusals = counters.newCounter("admission refusals");
    private final List<String> fallbacks = new ArrayList<>();

    @Test
    void autoTakesTheFirstBackendThatFitsAndNamesEveryOnePassedOver() throws Exception
    {
        final FakeBackend small = new FakeBackend("xdp", 256, null, null);
        final FakeBackend down = new FakeBackend("tofino", 8192, "switch unreachable", null);
        final FakeBackend software = new FakeBackend("software", 8192, null, null);
        final JobPlacement placement = placement(0, small, down, software);

        final JobPlacement.Placement placed = placement.place(spec("a", 1024, 8), ControlProtocol.BACKEND_AUTO, 7, 0);

        assertSame(software, placed.backend());
        assertEquals("xdp: k=1024 exceeds 256; tofino: switch unreachable", placed.fallback());
        assertEquals(List.of("xdp=k=1024 exceeds 256", "tofino=switch unreachable"), fallbacks);
        assertEquals(List.of(7), software.reserved);
        assertEquals(0, refusals.get());
    }

    @Test
    void aFailedReservationIsPassedOverLikeALimit() throws Exception
    {
        final FakeBackend failing = new FakeBackend("tofino", 8192, null, "table write refused");
        final FakeBackend software = new FakeBackend("software", 8192, null, null);

        final JobPlacement.Placement placed = placement(0, failing, software).place(spec("a", 64, 8), null, 1, 0);

        assertSame(software, placed.backend());
        assertEquals("tofino: table write refused", placed.fallback());
    }

    @Test
    void aNamedBackendIsRefusedNotMovedAndAnUnknownOneListsTheChoices()
    {
        final JobPlacement placement = placement(0, new FakeBackend("xdp", 256, null, null), new FakeBackend("software", 8192, null, null));

        final RefusedException limit = assertThrows(RefusedException.class, () -> placement.place(spec("a", 1024, 8), "xdp", 1, 0));
        assertEquals("backend xdp cannot take job 'job-a': k=1024 exceeds 256", limit.getMessage());
        assertEquals(1, refusals.get());

        final RefusedException unknown = assertThrows(RefusedException.class, () -> placement.place(spec("a", 64, 8), "p4", 1, 0));
        assertEquals("unknown backend 'p4' (this appliance has: auto, xdp, software)", unknown.getMessage());
        assertTrue(fallbacks.isEmpty(), fallbacks.toString());
    }

    @Test
    void theTenantsOffloadQuotaCountsWhatItAlreadyHoldsAndSparesTheShards() throws Exception
    {
        final FakeBackend xdp = new FakeBackend("xdp", 8192, null, null);
        final FakeBackend software = new FakeBackend("software", 8192, null, null);
        software.inShards = true;
        final JobPlacement placement = placement(32, xdp, software);

        assertSame(xdp, placement.place(spec("a", 64, 16), null, 1, 0).backend());        // 32 versions: at the quota
        final JobPlacement.Placement over = placement.place(spec("a", 64, 16), null, 2, 1);
        assertSame(software, over.backend());
        assertEquals("xdp: tenant 'a' would hold 33 offload slot versions, over its quota of 32 " +
            "(switchml.appliance.tenant.offload.slots)", over.fallback());
        assertThrows(RefusedException.class, () -> placement(32, xdp).place(spec("a", 64, 16), null, 3, 1));
    }

    @Test
    void accountsRefuseOverTheBudgetAndTheTenantsQuotasAndFreeWhatEnds() throws Exception
    {
        final TenantAccounts accounts = new TenantAccounts(1000, 600, 2, refusals);
        accounts.check(spec("a", 64, 8), 600);
        accounts.add("a", 600, 16);
        assertEquals(16, accounts.offloadSlots("a"));
        assertEquals(0, accounts.offloadSlots("b"));

        assertEquals("tenant 'a' would use 601 bytes of aggregator memory, over its quota of 600",
            assertThrows(RefusedException.class, () -> accounts.check(spec("a", 64, 8), 1)).getMessage());
        assertEquals("job 'job-b' needs 401 bytes of aggregator memory but only 400 of 1000 are free",
            assertThrows(RefusedException.class, () -> accounts.check(spec("b", 64, 8), 401)).getMessage());
        accounts.add("a", 0, 0);
        assertEquals("tenant 'a' already runs 2 jobs, its limit",
            assertThrows(RefusedException.class, () -> accounts.check(spec("a", 64, 8), 0)).getMessage());
        assertEquals(3, refusals.get());

        accounts.remove("a", 600, 16);
        assertEquals(1, accounts.tenantCount());
        accounts.remove("a", 0, 0);
        assertEquals(0, accounts.tenantCount(), "a tenant without jobs leaves no entry behind");
        accounts.check(spec("a", 64, 8), 600);
        assertEquals(0, accounts.memoryUsedBytes());
        assertEquals(0, accounts.offloadSlots("a"));
    }

    private JobPlacement placement(final long tenantOffloadSlots, final Backend... backends)
    {
        final JobPlacement placement = new JobPlacement(refusals);
        placement.configure(List.of(backends), false, (backend, reason) -> fallbacks.add(backend + "=" + reason));
        placement.tenantOffloadSlots(tenantOffloadSlots);
        return placement;
    }

    private static JobSpec spec(final String tenant, final int lanes, final int slots)
    {
        return new JobSpec(tenant, "job-" + tenant, 4, ElementType.INT32, lanes, slots, false, 1000, 1000);
    }

    private static final class FakeBackend implements Backend
    {
        private final String name;
        private final BackendCapabilities capabilities;
        private final String refusal;
        private final String reserveFailure;
        private final List<Integer> reserved = new ArrayList<>();
        private boolean inShards;

        FakeBackend(final String name, final int maxLanes, final String refusal, final String reserveFailure)
        {
            this.name = name;
            this.capabilities = new BackendCapabilities(BackendCapabilities.typeSet(ElementType.INT32), 1, maxLanes, 64, 1 << 20, 0,
                true, true);
            this.refusal = refusal;
            this.reserveFailure = reserveFailure;
        }

        public String name()
        {
            return name;
        }

        public BackendCapabilities capabilities()
        {
            return capabilities;
        }

        public String refusal(final JobSpec spec)
        {
            return refusal;
        }

        public boolean slotsInShards()
        {
            return inShards;
        }

        public BackendJob reserve(final JobSpec spec, final int jobId) throws BackendException
        {
            if (reserveFailure != null)
            {
                throw new BackendException(reserveFailure);
            }
            reserved.add(jobId);
            return new BackendJob()
            {
                public void activate(final Job job)
                {
                }

                public String poll(final long nowNs)
                {
                    return null;
                }

                public void release()
                {
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
