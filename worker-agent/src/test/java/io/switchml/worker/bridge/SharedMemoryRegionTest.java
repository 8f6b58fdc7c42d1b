package io.switchml.worker.bridge;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The shared memory on a small real tmpfs that other sessions have filled: a range the file system cannot back is an
 * exception naming the file, the directory and the bytes, not a SIGBUS (an {@code InternalError} in the JVM) in
 * whichever thread first touches it; a range is mapped into the agent when it is first reserved. Needs root to mount
 * the tmpfs.
 */
@Timeout(60)
class SharedMemoryRegionTest
{
    private static final long MIB = 1L << 20;

    @TempDir
    Path tempDir;

    private SmallTmpfs tmpfs;

    @BeforeEach
    void mount() throws Exception
    {
        tmpfs = new SmallTmpfs(tempDir.resolve("shm"), 8 * MIB);
    }

    @AfterEach
    void unmount() throws Exception
    {
        tmpfs.close();
    }

    @Test
    void aRangeTheFileSystemCannotBackIsAnExceptionNamingFileDirectoryAndBytes() throws Exception
    {
        try (SharedMemoryRegion region = SharedMemoryRegion.create(tmpfs.dir().resolve("rank0.shm"), 6 * MIB))
        {
            // another session's shared memory takes 5 MiB after this one was created (sparse, it took nothing)
            tmpfs.fill("other-session.shm", 5 * MIB);
            final MemorySegment backed = region.segment(0, MIB / 4, "float32");
            backed.fill((byte)1);

            final IllegalStateException ex = assertThrows(IllegalStateException.class, () ->
                region.segment(2 * MIB, 3 * MIB / 4, "float32").fill((byte)1));
            final String message = ex.getMessage();
            assertTrue(message.contains(region.path().toString()), message);
            assertTrue(message.contains("bytes free in " + tmpfs.dir()), message);
            assertTrue(message.contains("cannot reserve " + 4 * MIB + " bytes at offset " + 2 * MIB), message);
            assertTrue(message.contains("--shm-bytes") && message.contains("remount,size="), message);
            assertEquals(tmpfs.freeBytes(), freeIn(message), "the bytes free named are those free");

            assertEquals(1, backed.get(ValueLayout.JAVA_BYTE, MIB - 1), "the reserved range still works");
        }
    }

    @Test
    void aReservedRangeIsNotReservedAgainAndTheRestStaysSparse() throws Exception
    {
        try (SharedMemoryRegion region = SharedMemoryRegion.create(tmpfs.dir().resolve("rank0.shm"), 6 * MIB))
        {
            region.segment(4 * MIB + 8, 1, "float32");
            assertEquals(2 * MIB, tmpfs.usedBytes(), "only the granule of the range");
            tmpfs.fill("other-session.shm", 6 * MIB);
            // no system call, nothing to fail: the granule is reserved already
            region.segment(4 * MIB, MIB / 2, "float32").fill((byte)7);
            assertEquals(0, tmpfs.freeBytes());
        }
    }

    @Test
    void aNewlyReservedRangeIsMappedBeforeItIsTouchedAndKeepsWhatTheTrainingProcessWrote() throws Exception
    {
        final Path file = tmpfs.dir().resolve("rank0.shm");
        try (SharedMemoryRegion region = SharedMemoryRegion.create(file, 6 * MIB);
            FileChannel training = FileChannel.open(file, StandardOpenOption.WRITE))
        {
            // the training process writes its tensor (through the file here: no mapping of ours counts its pages)
            final ByteBuffer tensor = ByteBuffer.allocate((int)(2 * MIB)).order(ByteOrder.nativeOrder());
            for (int i = 0; i < tensor.capacity() / Float.BYTES; i++)
            {
                tensor.putFloat(i * 0.5f);
            }
            tensor.flip();
            assertEquals(2 * MIB, training.write(tensor, 0));
            assertEquals(0, residentKiB(file), "nothing of the region is mapped yet");

            final MemorySegment reduced = region.segment(0, 2 * MIB / Float.BYTES, "float32");
            assertEquals(2 * MIB, region.populatedBytes());
            assertEquals(2 * MIB / 1024, residentKiB(file), "the range is mapped before the all-reduce touches it");
            assertEquals(1234 * 0.5f, reduced.getAtIndex(ValueLayout.JAVA_FLOAT, 1234), "the data is the training process's");

            final MemorySegment unwritten = region.segment(4 * MIB, 16, "float32");
            assertEquals(4 * MIB, region.populatedBytes(), "a range is mapped once, when it is first reserved");
            assertEquals(0f, unwritten.getAtIndex(ValueLayout.JAVA_FLOAT, 15), "a page nobody wrote reads zeros");
            region.segment(0, 16, "float32");
            assertEquals(4 * MIB, region.populatedBytes());
        }
    }

    /**
     * @return the resident kibibytes of this process's mappings of {@code file} (/proc/self/smaps).
     */
    private static long residentKiB(final Path file) throws IOException
    {
        long kib = 0;
        boolean inFile = false;
        for (final String line : Files.readAllLines(Path.of("/proc/self/smaps")))
        {
            if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*"))
            {
                inFile = line.endsWith(" " + file) || line.endsWith(" " + file + " (deleted)");
            }
            else if (inFile && line.startsWith("Rss:"))
            {
                kib += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return kib;
    }

    private static long freeIn(final String message)
    {
        final java.util.regex.Matcher matcher = java.util.regex.Pattern.compile("only (\\d+) bytes free").matcher(message);
        assertTrue(matcher.find(), message);
        return Long.parseLong(matcher.group(1));
    }
}
