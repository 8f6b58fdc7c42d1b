package io.switchml.protocol.telemetry;

import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Reader-side helpers for the counters file laid out by {@link CountersFileDescriptor}: map it read-only
 * from another process (or another part of this one) and wait until the writer has published it.
 */
public final class CountersFile
{
    /** How long {@link #open(Path)} waits for a file that exists but is not yet published. */
    public static final long DEFAULT_OPEN_TIMEOUT_MS = 2_000;

    private static final long POLL_INTERVAL_MS = 1;

    private CountersFile()
    {
    }

    /**
     * {@link #open(Path, long)} with {@link #DEFAULT_OPEN_TIMEOUT_MS}.
     */
    public static CountersFileReader open(final Path path)
    {
        return open(path, DEFAULT_OPEN_TIMEOUT_MS);
    }

    /**
     * Map a counters file read-only. A missing file fails at once; a file that is still being created
     * (shorter than its header, or layout version 0) is polled until it is published or the timeout passes.
     *
     * @param path      the counters file, or the directory holding {@value CountersFileDescriptor#FILENAME}.
     * @param timeoutMs how long to wait for the writer to publish the file.
     * @return a reader over the mapped file; close it to unmap.
     * @throws IllegalStateException naming the file and the cause when it is missing, never published
     *                               within the timeout, not a counters file, or of another layout version.
     */
    public static CountersFileReader open(final Path path, final long timeoutMs)
    {
        final Path file = Files.isDirectory(path) ? path.resolve(CountersFileDescriptor.FILENAME) : path;
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        String notReady;
        do
        {
            final long fileLength = fileLength(file);
            if (fileLength < CountersFileDescriptor.HEADER_LENGTH)
            {
                notReady = "file is " + fileLength + " bytes, shorter than its header";
            }
            else
            {
                final MappedByteBuffer mapped = IoUtil.mapExistingFile(
                    file.toFile(), FileChannel.MapMode.READ_ONLY, "counters file");
                final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, CountersFileDescriptor.HEADER_LENGTH);
                final int version = CountersFileDescriptor.layoutVersionVolatile(header);
                if (0 != version)
                {
                    final String error = CountersFileDescriptor.validate(header, mapped.capacity());
                    if (null != error)
                    {
                        IoUtil.unmap(mapped);
                        throw new IllegalStateException("counters file " + file + ": " + error);
                    }
                    return new CountersFileReader(file, mapped, header);
                }
                IoUtil.unmap(mapped);
                notReady = "layout version is 0 (the writer has not published it yet, or died creating it)";
            }
            sleep(file);
        }
        while (System.nanoTime() - deadlineNs < 0);

        throw new IllegalStateException(
            "counters file " + file + " not ready after " + timeoutMs + " ms: " + notReady);
    }

    private static long fileLength(final Path file)
    {
        try
        {
            return Files.size(file);
        }
        catch (final NoSuchFileException ex)
        {
            throw new IllegalStateException("no counters file at " + file + ": is the appliance running?", ex);
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("cannot read counters file " + file + ": " + ex, ex);
        }
    }

    private static void sleep(final Path file)
    {
        try
        {
            Thread.sleep(POLL_INTERVAL_MS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for counters file " + file, ex);
        }
    }
}
