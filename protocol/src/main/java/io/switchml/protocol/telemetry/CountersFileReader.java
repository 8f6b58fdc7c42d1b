package io.switchml.protocol.telemetry;

import org.agrona.IoUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.errors.ErrorLogReader;
import org.agrona.concurrent.status.CountersReader;

import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A read-only view of a published counters file, obtained from {@link CountersFile#open(Path)}.
 * Values are read live from the shared mapping: each read sees the writer's latest published value.
 * <p>
 * Not thread-safe to close: {@link #close()} unmaps the file, after which neither this reader nor the
 * {@link CountersReader} it handed out may be used.
 */
public final class CountersFileReader implements AutoCloseable
{
    private final Path file;
    private final MappedByteBuffer mappedFile;
    private final UnsafeBuffer header;
    private final CountersReader countersReader;
    private final AtomicBuffer errorLogBuffer;
    private boolean closed;

    CountersFileReader(final Path file, final MappedByteBuffer mappedFile, final UnsafeBuffer header)
    {
        this.file = file;
        this.mappedFile = mappedFile;
        this.header = header;
        this.countersReader = new CountersReader(
            CountersFileDescriptor.createCountersMetadataBuffer(mappedFile, header),
            CountersFileDescriptor.createCountersValuesBuffer(mappedFile, header),
            StandardCharsets.UTF_8);
        this.errorLogBuffer = CountersFileDescriptor.createErrorLogBuffer(mappedFile, header);
    }

    /**
     * @return the counters file that is mapped.
     */
    public Path file()
    {
        return file;
    }

    /**
     * @return id of the process that wrote the file.
     */
    public long pid()
    {
        return header.getLong(CountersFileDescriptor.PID_OFFSET);
    }

    /**
     * @return epoch ms at which the writer created the file.
     */
    public long startTimestampMs()
    {
        return header.getLong(CountersFileDescriptor.START_TIMESTAMP_OFFSET);
    }

    /**
     * @return the layout version the file was published with.
     */
    public int layoutVersion()
    {
        return header.getIntVolatile(CountersFileDescriptor.LAYOUT_VERSION_OFFSET);
    }

    /**
     * @return whether the writing process is still alive on this host (a file left by a dead appliance
     * keeps its last values).
     */
    public boolean isWriterAlive()
    {
        return ProcessHandle.of(pid()).map(ProcessHandle::isAlive).orElse(false);
    }

    /**
     * @return a reader of the counters: iterate with {@link CountersReader#forEach(CountersReader.MetaData)},
     * read values with {@link CountersReader#getCounterValue(int)}; see {@link CounterTypes} for keys.
     */
    public CountersReader countersReader()
    {
        return countersReader;
    }

    /**
     * @return the error log section, for {@link ErrorLogReader}.
     */
    public AtomicBuffer errorLogBuffer()
    {
        return errorLogBuffer;
    }

    /**
     * @return every distinct error recorded so far, in the order first observed.
     */
    public List<ErrorRecord> readErrors()
    {
        return readErrors(0);
    }

    /**
     * @param sinceTimestampMs only errors last observed at or after this epoch ms.
     * @return the distinct errors, in the order first observed.
     */
    public List<ErrorRecord> readErrors(final long sinceTimestampMs)
    {
        final List<ErrorRecord> records = new ArrayList<>();
        ErrorLogReader.read(
            errorLogBuffer,
            (count, firstMs, lastMs, encodedException) ->
                records.add(new ErrorRecord(count, firstMs, lastMs, encodedException)),
            sinceTimestampMs);
        return records;
    }

    /**
     * Unmap the file. Idempotent.
     */
    public void close()
    {
        if (!closed)
        {
            closed = true;
            IoUtil.unmap(mappedFile);
        }
    }
}
