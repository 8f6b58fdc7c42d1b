package io.switchml.offload.xdp;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The retry of removals that failed, on its own with entries that fail as often as the test says and times the test
 * chose. The kernel's refusal itself is tested in {@link XdpPlacementTest} (the job table frozen), where it cannot be
 * lifted again: this is where a retry that succeeds frees the entry.
 */
final class LeftoverEntriesTest
{
    private static final long S = 1_000_000_000L;

    private final List<String> log = new ArrayList<>();
    private final LeftoverEntries leftovers = new LeftoverEntries(log::add);

    /** An entry whose first {@code failures} removals fail. */
    private static final class Entry implements LeftoverEntries.Entry
    {
        private final int jobId;
        private int failures;
        private int tries;

        Entry(final int jobId, final int failures)
        {
            this.jobId = jobId;
            this.failures = failures;
        }

        public int jobId()
        {
            return jobId;
        }

        public String removeEntry()
        {
            tries++;
            return failures-- > 0 ? "Operation not permitted (errno 1)" : null;
        }
    }

    @Test
    void aFailedRemovalIsTriedAgainEveryRetryIntervalUntilItSucceeds()
    {
        final long t = System.nanoTime();
        final Entry twice = new Entry(7, 2);
        final Entry once = new Entry(9, 1);
        leftovers.add(twice);
        leftovers.add(once);
        assertEquals(List.of(7, 9), leftovers.jobIds());
        assertEquals("; released jobs still in the job table (their slots reserved, removal retried): [7, 9]",
            leftovers.describe());

        leftovers.retry(t + LeftoverEntries.RETRY_NS / 2);
        assertEquals(0, twice.tries + once.tries, "not before the interval");

        leftovers.retry(t + LeftoverEntries.RETRY_NS + S);
        assertEquals(1, twice.tries);
        assertEquals(1, once.tries);
        assertEquals(List.of(7, 9), leftovers.jobIds(), "both failed once more (their first failure was at release)");

        leftovers.retry(t + LeftoverEntries.RETRY_NS + 2 * S);
        assertEquals(1, twice.tries, "not again within the interval");

        leftovers.retry(t + 2 * LeftoverEntries.RETRY_NS + 2 * S);
        assertEquals(List.of(7), leftovers.jobIds(), "9 removed at its second retry");
        assertEquals(2, twice.tries);

        leftovers.retry(t + 3 * LeftoverEntries.RETRY_NS + 3 * S);
        assertEquals(List.of(), leftovers.jobIds());
        assertEquals("", leftovers.describe());
        assertEquals(3, twice.tries);
        assertEquals(List.of(
            "xdp: removing released job 7 from the program's job table failed again: Operation not permitted " +
                "(errno 1) (its slots stay reserved; tried again in 5 s)",
            "xdp: removing released job 9 from the program's job table failed again: Operation not permitted " +
                "(errno 1) (its slots stay reserved; tried again in 5 s)",
            "xdp: removing released job 7 from the program's job table failed again: Operation not permitted " +
                "(errno 1) (its slots stay reserved; tried again in 5 s)",
            "xdp: removed released job 9 from the program's job table at a retry; its slots are free",
            "xdp: removed released job 7 from the program's job table at a retry; its slots are free"), log);

        leftovers.retry(t + 10 * LeftoverEntries.RETRY_NS);
        assertEquals(5, log.size(), "nothing left to try");
    }
}
