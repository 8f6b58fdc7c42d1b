package io.switchml.appliance.journal;

import net.openhft.chronicle.queue.RollCycle;
import net.openhft.chronicle.queue.RollCycles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The cleanup routine on fake cycle files: the newest N of the roll cycle's files stay, anything else in
 * the directory is left alone. ({@code JournalTest} checks it on a real queue rolling every second.)
 */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class JournalRetentionTest
{
    private static final long START_MS = 1_790_000_000_000L;

    @TempDir
    Path directory;

    private List<Path> createCycleFiles(final RollCycle rollCycle, final int count) throws IOException
    {
        final DateTimeFormatter format = DateTimeFormatter.ofPattern(rollCycle.format()).withZone(ZoneOffset.UTC);
        final List<Path> files = new ArrayList<>();
        // created newest first, so neither creation order nor modification time gives the answer away
        for (int i = count - 1; i >= 0; i--)
        {
            final String name = format.format(Instant.ofEpochMilli(START_MS + (long)i * rollCycle.lengthInMillis()));
            files.add(0, Files.writeString(directory.resolve(name + ".cq4"), "cycle " + i));
        }
        return files;
    }

    @Test
    void keepsTheNewestDailyCyclesAndNothingElseIsTouched() throws IOException
    {
        final List<Path> cycles = createCycleFiles(RollCycles.FAST_DAILY, 10);
        final Path metadata = Files.writeString(directory.resolve("metadata.cq4t"), "m");
        final Path other = Files.writeString(directory.resolve("notes.cq4"), "not a cycle");
        final Path hourly = Files.writeString(directory.resolve("20260101-05V.cq4"), "another roll cycle");
        Files.createDirectory(directory.resolve("20200101F.cq4"));

        final List<Path> deleted = JournalRetention.deleteOldCycles(directory, RollCycles.FAST_DAILY, 7);

        assertEquals(cycles.subList(0, 3), deleted);
        assertEquals(cycles.subList(3, 10), JournalRetention.cycleFiles(directory, RollCycles.FAST_DAILY));
        assertTrue(Files.exists(metadata));
        assertTrue(Files.exists(other));
        assertTrue(Files.exists(hourly));
        assertTrue(Files.isDirectory(directory.resolve("20200101F.cq4")));

        assertEquals(List.of(), JournalRetention.deleteOldCycles(directory, RollCycles.FAST_DAILY, 7));
    }

    @Test
    void keepsTheNewestHourlyCyclesAcrossDays() throws IOException
    {
        final List<Path> cycles = createCycleFiles(RollCycles.FAST_HOURLY, 30);
        assertEquals(cycles.subList(0, 29), JournalRetention.deleteOldCycles(directory, RollCycles.FAST_HOURLY, 1));
        assertEquals(List.of(cycles.get(29)), JournalRetention.cycleFiles(directory, RollCycles.FAST_HOURLY));
    }

    @Test
    void fewerFilesThanRetainedDeletesNothing() throws IOException
    {
        final List<Path> cycles = createCycleFiles(RollCycles.FAST_DAILY, 3);
        assertEquals(List.of(), JournalRetention.deleteOldCycles(directory, RollCycles.FAST_DAILY, 7));
        assertEquals(cycles, JournalRetention.cycleFiles(directory, RollCycles.FAST_DAILY));
        assertThrows(IllegalArgumentException.class,
            () -> JournalRetention.deleteOldCycles(directory, RollCycles.FAST_DAILY, 0));
    }
}
