package io.switchml.appliance.journal;

import io.switchml.journal.JournalSchema;
import net.openhft.chronicle.queue.RollCycle;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.ParsePosition;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Retention of the journal: keep the newest N cycle files, delete the older ones.
 * <p>
 * The writer runs this when it starts writing a new cycle (Chronicle rolls when the first event of a new
 * cycle is appended), not from a {@code StoreFileListener}: a directory scan also removes files left by
 * earlier runs, and is simple to test on fake files. Only files whose name is the roll cycle's format
 * followed by {@code .cq4} count; anything else in the directory is left alone. Cycle names are fixed-width
 * timestamps, most significant field first, so name order is time order. Counting files rather than
 * calendar cycles keeps the last N cycles that hold events, even across a long outage.
 * <p>
 * A reader that has a deleted file open keeps reading it (Linux frees it when the last mapping goes).
 */
final class JournalRetention
{
    private JournalRetention()
    {
    }

    /**
     * Delete all but the newest {@code retainedCycles} cycle files of {@code rollCycle} in {@code directory}.
     *
     * @return the files deleted, oldest first.
     * @throws IOException when the directory cannot be listed or a file cannot be deleted (the files after
     *                     it are still tried; the first failure is thrown, the others suppressed).
     */
    static List<Path> deleteOldCycles(final Path directory, final RollCycle rollCycle, final int retainedCycles)
        throws IOException
    {
        if (retainedCycles < 1)
        {
            throw new IllegalArgumentException("retainedCycles must be at least 1: " + retainedCycles);
        }
        final List<Path> cycles = cycleFiles(directory, rollCycle);
        final List<Path> deleted = new ArrayList<>();
        IOException failure = null;
        for (int i = 0, end = cycles.size() - retainedCycles; i < end; i++)
        {
            final Path file = cycles.get(i);
            try
            {
                if (Files.deleteIfExists(file))
                {
                    deleted.add(file);
                }
            }
            catch (final IOException ex)
            {
                if (null == failure)
                {
                    failure = ex;
                }
                else
                {
                    failure.addSuppressed(ex);
                }
            }
        }
        if (null != failure)
        {
            throw failure;
        }
        return deleted;
    }

    /**
     * @return the cycle files of {@code rollCycle} in {@code directory}, oldest first.
     */
    static List<Path> cycleFiles(final Path directory, final RollCycle rollCycle) throws IOException
    {
        final DateTimeFormatter format = DateTimeFormatter.ofPattern(rollCycle.format());
        final List<Path> cycles = new ArrayList<>();
        try (Stream<Path> files = Files.list(directory))
        {
            files.forEach(file ->
            {
                final String name = file.getFileName().toString();
                if (name.endsWith(JournalSchema.CYCLE_FILE_SUFFIX) && Files.isRegularFile(file) &&
                    isCycleName(format, name.substring(0, name.length() - JournalSchema.CYCLE_FILE_SUFFIX.length())))
                {
                    cycles.add(file);
                }
            });
        }
        cycles.sort((a, b) -> a.getFileName().toString().compareTo(b.getFileName().toString()));
        return cycles;
    }

    private static boolean isCycleName(final DateTimeFormatter format, final String name)
    {
        final ParsePosition position = new ParsePosition(0);
        return null != format.parseUnresolved(name, position) && position.getErrorIndex() < 0 &&
            position.getIndex() == name.length();
    }
}
