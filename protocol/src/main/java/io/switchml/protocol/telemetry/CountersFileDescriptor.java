package io.switchml.protocol.telemetry;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;

import java.nio.ByteBuffer;

/**
 * Layout of the appliance's memory-mapped counters file ({@value #FILENAME}), which other processes
 * (the ops CLI, a scraper) map and read live, the way Aeron's {@code AeronStat} reads {@code cnc.dat}.
 * <p>
 * The file is a header followed by three sections: the metadata and values buffers of an Agrona
 * {@link org.agrona.concurrent.status.CountersManager}, then the buffer of an Agrona
 * {@link org.agrona.concurrent.errors.DistinctErrorLog}. All fields are in the host's native byte order
 * (writer and readers share a host, as with {@code cnc.dat}).
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                      Magic 0x534D4C43                         |
 *  +---------------------------------------------------------------+
 *  |                 Layout Version (written last)                 |
 *  +---------------------------------------------------------------+
 *  |                                                               |
 *  +                     Writer Process Id                         +
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                                                               |
 *  +                 Start Timestamp (ms since epoch)              +
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |               Counters Metadata Buffer Length                 |
 *  +---------------------------------------------------------------+
 *  |                Counters Values Buffer Length                  |
 *  +---------------------------------------------------------------+
 *  |                    Error Log Buffer Length                    |
 *  +---------------------------------------------------------------+
 *  |              Reserved (zero) up to HEADER_LENGTH             ...
 *  +---------------------------------------------------------------+
 *  |                   Counters Metadata Buffer                   ...
 *  +---------------------------------------------------------------+
 *  |                    Counters Values Buffer                    ...
 *  +---------------------------------------------------------------+
 *  |                       Error Log Buffer                       ...
 *  +---------------------------------------------------------------+
 * </pre>
 * <ul>
 *   <li><b>Magic</b>: {@link #MAGIC}, the ASCII bytes "SMLC" read as a big-endian int.</li>
 *   <li><b>Layout Version</b>: {@link #LAYOUT_VERSION}. The writer stores it last with an ordered
 *   (release) write, after the header and the sections are initialised; a reader that sees 0 must wait,
 *   and one that sees another non-zero value must refuse the file.</li>
 *   <li><b>Section lengths</b>: each a positive multiple of {@link #SECTION_ALIGNMENT}; the metadata
 *   buffer is {@link CountersReader#METADATA_LENGTH} / {@link CountersReader#COUNTER_LENGTH} (= 4) times
 *   the values buffer, as the {@code CountersManager} requires.</li>
 * </ul>
 * Counter labels are UTF-8; counter keys follow {@link CounterTypes}.
 * <p>
 * Sections start at {@link #HEADER_LENGTH} and follow one another without gaps, so every section starts
 * on a 128-byte boundary of the page-aligned mapping.
 */
public final class CountersFileDescriptor
{
    /** Name of the counters file inside the appliance's telemetry directory. */
    public static final String FILENAME = "counters.dat";

    /** "SMLC" (SwitchML counters) read as a big-endian int. */
    public static final int MAGIC = 0x534D4C43;
    /** Version of this layout; bump it on any incompatible change. */
    public static final int LAYOUT_VERSION = 1;

    public static final int MAGIC_OFFSET = 0;
    public static final int LAYOUT_VERSION_OFFSET = 4;
    public static final int PID_OFFSET = 8;
    public static final int START_TIMESTAMP_OFFSET = 16;
    public static final int COUNTERS_METADATA_BUFFER_LENGTH_OFFSET = 24;
    public static final int COUNTERS_VALUES_BUFFER_LENGTH_OFFSET = 28;
    public static final int ERROR_LOG_BUFFER_LENGTH_OFFSET = 32;

    /** Length of the header, padded so that the first section is aligned like a counter record. */
    public static final int HEADER_LENGTH = 128;
    /** Every section length is a multiple of this (the length of one counter value record). */
    public static final int SECTION_ALIGNMENT = CountersReader.COUNTER_LENGTH;
    /** Offset of the counters metadata buffer. */
    public static final int COUNTERS_METADATA_BUFFER_OFFSET = HEADER_LENGTH;

    private static final int METADATA_TO_VALUES_RATIO = CountersReader.METADATA_LENGTH / CountersReader.COUNTER_LENGTH;

    private CountersFileDescriptor()
    {
    }

    /**
     * @param maxCounters number of counters the file can hold at once.
     * @return length of the counters values buffer for that many counters.
     */
    public static int valuesBufferLength(final int maxCounters)
    {
        if (maxCounters < 1 || maxCounters > Integer.MAX_VALUE / CountersReader.METADATA_LENGTH)
        {
            throw new IllegalArgumentException("maxCounters out of range: " + maxCounters);
        }
        return maxCounters * CountersReader.COUNTER_LENGTH;
    }

    /**
     * @param valuesBufferLength length of the counters values buffer.
     * @return length of the matching counters metadata buffer.
     */
    public static int metadataBufferLength(final int valuesBufferLength)
    {
        return valuesBufferLength * METADATA_TO_VALUES_RATIO;
    }

    /**
     * @param requestedLength wanted length of the error log in bytes.
     * @return that length rounded up to {@link #SECTION_ALIGNMENT}.
     */
    public static int errorLogBufferLength(final int requestedLength)
    {
        if (requestedLength < SECTION_ALIGNMENT || requestedLength > (1 << 30))
        {
            throw new IllegalArgumentException(
                "error log length out of range [" + SECTION_ALIGNMENT + ", 2^30]: " + requestedLength);
        }
        return (requestedLength + SECTION_ALIGNMENT - 1) & -SECTION_ALIGNMENT;
    }

    /**
     * @return total file length for the given section lengths.
     */
    public static long computeFileLength(
        final int metadataBufferLength, final int valuesBufferLength, final int errorLogBufferLength)
    {
        return (long)HEADER_LENGTH + metadataBufferLength + valuesBufferLength + errorLogBufferLength;
    }

    /**
     * Write every header field except the layout version, which {@link #signalReady(AtomicBuffer)} writes
     * once the sections are initialised.
     *
     * @param header buffer over at least {@link #HEADER_LENGTH} bytes at the start of the file.
     */
    public static void fillHeader(
        final MutableDirectBuffer header,
        final long pid,
        final long startTimestampMs,
        final int metadataBufferLength,
        final int valuesBufferLength,
        final int errorLogBufferLength)
    {
        header.putInt(MAGIC_OFFSET, MAGIC);
        header.putLong(PID_OFFSET, pid);
        header.putLong(START_TIMESTAMP_OFFSET, startTimestampMs);
        header.putInt(COUNTERS_METADATA_BUFFER_LENGTH_OFFSET, metadataBufferLength);
        header.putInt(COUNTERS_VALUES_BUFFER_LENGTH_OFFSET, valuesBufferLength);
        header.putInt(ERROR_LOG_BUFFER_LENGTH_OFFSET, errorLogBufferLength);
    }

    /**
     * Publish the file: store {@link #LAYOUT_VERSION} with a release write, so a reader that sees it also
     * sees every earlier write to the header and sections.
     */
    public static void signalReady(final AtomicBuffer header)
    {
        header.putIntRelease(LAYOUT_VERSION_OFFSET, LAYOUT_VERSION);
    }

    /**
     * @return the layout version with an acquire read; 0 while the writer is still initialising.
     */
    public static int layoutVersionVolatile(final AtomicBuffer header)
    {
        return header.getIntVolatile(LAYOUT_VERSION_OFFSET);
    }

    /**
     * Check a published header (layout version already read as non-zero) against the file's length.
     *
     * @param header     buffer over the start of the file.
     * @param fileLength length of the file or of its mapping.
     * @return null when the layout is usable, otherwise why not.
     */
    public static String validate(final DirectBuffer header, final long fileLength)
    {
        if (fileLength < HEADER_LENGTH)
        {
            return "file is " + fileLength + " bytes, shorter than the " + HEADER_LENGTH + "-byte header";
        }
        final int magic = header.getInt(MAGIC_OFFSET);
        if (MAGIC != magic)
        {
            return String.format(
                "not a SwitchML counters file: magic 0x%08X, expected 0x%08X", magic, MAGIC);
        }
        final int version = header.getInt(LAYOUT_VERSION_OFFSET);
        if (LAYOUT_VERSION != version)
        {
            return "layout version " + version + ", this reader understands " + LAYOUT_VERSION +
                ": the writer and the reader come from different releases";
        }
        final int metadataLength = header.getInt(COUNTERS_METADATA_BUFFER_LENGTH_OFFSET);
        final int valuesLength = header.getInt(COUNTERS_VALUES_BUFFER_LENGTH_OFFSET);
        final int errorLogLength = header.getInt(ERROR_LOG_BUFFER_LENGTH_OFFSET);
        if (!isSectionLength(valuesLength) || !isSectionLength(errorLogLength) ||
            metadataLength != (long)valuesLength * METADATA_TO_VALUES_RATIO)
        {
            return "inconsistent section lengths: metadata " + metadataLength + ", values " + valuesLength +
                ", error log " + errorLogLength;
        }
        final long expectedLength = computeFileLength(metadataLength, valuesLength, errorLogLength);
        if (fileLength < expectedLength)
        {
            return "file is " + fileLength + " bytes, its header describes " + expectedLength;
        }
        return null;
    }

    /**
     * @return offset of the counters values buffer, from a validated header.
     */
    public static int valuesBufferOffset(final DirectBuffer header)
    {
        return COUNTERS_METADATA_BUFFER_OFFSET + header.getInt(COUNTERS_METADATA_BUFFER_LENGTH_OFFSET);
    }

    /**
     * @return offset of the error log buffer, from a validated header.
     */
    public static int errorLogBufferOffset(final DirectBuffer header)
    {
        return valuesBufferOffset(header) + header.getInt(COUNTERS_VALUES_BUFFER_LENGTH_OFFSET);
    }

    /**
     * @return a buffer over the counters metadata section of the mapped file.
     */
    public static UnsafeBuffer createCountersMetadataBuffer(final ByteBuffer file, final DirectBuffer header)
    {
        return new UnsafeBuffer(
            file, COUNTERS_METADATA_BUFFER_OFFSET, header.getInt(COUNTERS_METADATA_BUFFER_LENGTH_OFFSET));
    }

    /**
     * @return a buffer over the counters values section of the mapped file.
     */
    public static UnsafeBuffer createCountersValuesBuffer(final ByteBuffer file, final DirectBuffer header)
    {
        return new UnsafeBuffer(
            file, valuesBufferOffset(header), header.getInt(COUNTERS_VALUES_BUFFER_LENGTH_OFFSET));
    }

    /**
     * @return a buffer over the error log section of the mapped file.
     */
    public static UnsafeBuffer createErrorLogBuffer(final ByteBuffer file, final DirectBuffer header)
    {
        return new UnsafeBuffer(file, errorLogBufferOffset(header), header.getInt(ERROR_LOG_BUFFER_LENGTH_OFFSET));
    }

    private static boolean isSectionLength(final int length)
    {
        return length > 0 && 0 == (length & (SECTION_ALIGNMENT - 1));
    }
}
