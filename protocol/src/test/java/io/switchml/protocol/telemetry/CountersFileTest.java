package io.switchml.protocol.telemetry;

import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reader side of the counters file, over files written by hand with {@link CountersFileDescriptor}.
 */
class CountersFileTest
{
    private static final int VALUES_LENGTH = CountersFileDescriptor.valuesBufferLength(8);
    private static final int METADATA_LENGTH = CountersFileDescriptor.metadataBufferLength(VALUES_LENGTH);
    private static final int ERROR_LOG_LENGTH = CountersFileDescriptor.errorLogBufferLength(1024);

    @TempDir
    Path directory;

    @Test
    void missingFileFailsAtOnceNamingTheFile()
    {
        final long startNs = System.nanoTime();
        final IllegalStateException ex = assertThrows(
            IllegalStateException.class, () -> CountersFile.open(directory.resolve("counters.dat"), 5_000));
        assertTrue(
            ex.getMessage().contains("no counters file at " + directory.resolve("counters.dat")), ex.getMessage());
        assertTrue(System.nanoTime() - startNs < TimeUnit.SECONDS.toNanos(2));
    }

    @Test
    void unpublishedFileTimesOutWithAClearError()
    {
        final Path file = directory.resolve(CountersFileDescriptor.FILENAME);
        final MappedByteBuffer mapped = writeFile(file);

        final IllegalStateException ex = assertThrows(IllegalStateException.class, () -> CountersFile.open(file, 50));
        assertTrue(ex.getMessage().contains("not ready after 50 ms"), ex.getMessage());
        assertTrue(ex.getMessage().contains("layout version is 0"), ex.getMessage());
        IoUtil.unmap(mapped);
    }

    @Test
    void readerWaitsUntilTheWriterPublishes() throws Exception
    {
        final Path file = directory.resolve(CountersFileDescriptor.FILENAME);
        final MappedByteBuffer mapped = writeFile(file);
        final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, CountersFileDescriptor.HEADER_LENGTH);

        final CompletableFuture<CountersFileReader> opened =
            CompletableFuture.supplyAsync(() -> CountersFile.open(directory, 5_000));
        Thread.sleep(20);
        CountersFileDescriptor.signalReady(header);

        try (CountersFileReader reader = opened.get(5, TimeUnit.SECONDS))
        {
            assertEquals(file, reader.file());
            assertEquals(4242L, reader.pid());
            assertEquals(1_700_000_000_000L, reader.startTimestampMs());
            assertEquals(CountersFileDescriptor.LAYOUT_VERSION, reader.layoutVersion());
            assertEquals("first", reader.countersReader().getCounterLabel(0));
            assertEquals(7, reader.countersReader().maxCounterId());
            assertTrue(reader.readErrors().isEmpty());
        }
        IoUtil.unmap(mapped);
    }

    @Test
    void wrongMagicIsRefused()
    {
        final Path file = directory.resolve(CountersFileDescriptor.FILENAME);
        final MappedByteBuffer mapped = writeFile(file);
        final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, CountersFileDescriptor.HEADER_LENGTH);
        header.putInt(CountersFileDescriptor.MAGIC_OFFSET, 0x12345678);
        CountersFileDescriptor.signalReady(header);

        final IllegalStateException ex = assertThrows(IllegalStateException.class, () -> CountersFile.open(file, 50));
        assertTrue(ex.getMessage().contains("not a SwitchML counters file: magic 0x12345678"), ex.getMessage());
        IoUtil.unmap(mapped);
    }

    @Test
    void otherLayoutVersionIsRefused()
    {
        final Path file = directory.resolve(CountersFileDescriptor.FILENAME);
        final MappedByteBuffer mapped = writeFile(file);
        final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, CountersFileDescriptor.HEADER_LENGTH);
        header.putIntRelease(CountersFileDescriptor.LAYOUT_VERSION_OFFSET, CountersFileDescriptor.LAYOUT_VERSION + 1);

        final IllegalStateException ex = assertThrows(IllegalStateException.class, () -> CountersFile.open(file, 50));
        assertTrue(ex.getMessage().contains("layout version 2, this reader understands 1"), ex.getMessage());
        IoUtil.unmap(mapped);
    }

    @Test
    void truncatedFileIsRefused() throws Exception
    {
        final Path file = directory.resolve(CountersFileDescriptor.FILENAME);
        final MappedByteBuffer mapped = writeFile(file);
        CountersFileDescriptor.signalReady(new UnsafeBuffer(mapped, 0, CountersFileDescriptor.HEADER_LENGTH));
        IoUtil.unmap(mapped);
        try (var channel = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.WRITE))
        {
            channel.truncate(Files.size(file) - 128);
        }

        final IllegalStateException ex = assertThrows(IllegalStateException.class, () -> CountersFile.open(file, 50));
        assertTrue(ex.getMessage().contains("its header describes"), ex.getMessage());
    }

    private static MappedByteBuffer writeFile(final Path file)
    {
        final long length = CountersFileDescriptor.computeFileLength(METADATA_LENGTH, VALUES_LENGTH, ERROR_LOG_LENGTH);
        final MappedByteBuffer mapped = IoUtil.mapNewFile(file.toFile(), length, false);
        final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, CountersFileDescriptor.HEADER_LENGTH);
        CountersFileDescriptor.fillHeader(header, 4242, 1_700_000_000_000L, METADATA_LENGTH, VALUES_LENGTH,
            ERROR_LOG_LENGTH);
        final CountersManager manager = new CountersManager(
            CountersFileDescriptor.createCountersMetadataBuffer(mapped, header),
            CountersFileDescriptor.createCountersValuesBuffer(mapped, header));
        manager.allocate("first");
        return mapped;
    }
}
