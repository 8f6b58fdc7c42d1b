package io.switchml.protocol.telemetry;

import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CountersFileDescriptorTest
{
    @Test
    void headerFieldsSitAtTheirDocumentedOffsets()
    {
        final UnsafeBuffer header = new UnsafeBuffer(ByteBuffer.allocateDirect(CountersFileDescriptor.HEADER_LENGTH));
        CountersFileDescriptor.fillHeader(header, 0x0102030405060708L, 0x1112131415161718L, 4 * 256, 256, 384);

        final ByteBuffer bytes =
            ByteBuffer.allocate(CountersFileDescriptor.HEADER_LENGTH).order(ByteOrder.nativeOrder());
        header.getBytes(0, bytes, CountersFileDescriptor.HEADER_LENGTH);
        assertEquals(0x534D4C43, bytes.getInt(0));
        assertEquals(0, bytes.getInt(4), "layout version is written last, by signalReady");
        assertEquals(0x0102030405060708L, bytes.getLong(8));
        assertEquals(0x1112131415161718L, bytes.getLong(16));
        assertEquals(1024, bytes.getInt(24));
        assertEquals(256, bytes.getInt(28));
        assertEquals(384, bytes.getInt(32));
        for (int i = 36; i < CountersFileDescriptor.HEADER_LENGTH; i++)
        {
            assertEquals(0, bytes.get(i), "reserved byte " + i);
        }

        CountersFileDescriptor.signalReady(header);
        assertEquals(1, header.getInt(4));
        assertEquals(128, CountersFileDescriptor.COUNTERS_METADATA_BUFFER_OFFSET);
        assertEquals(128 + 1024, CountersFileDescriptor.valuesBufferOffset(header));
        assertEquals(128 + 1024 + 256, CountersFileDescriptor.errorLogBufferOffset(header));
        assertNull(CountersFileDescriptor.validate(header, 128 + 1024 + 256 + 384));
    }

    @Test
    void sectionLengthsFollowTheCountersManagerRatio()
    {
        assertEquals(10 * CountersReader.COUNTER_LENGTH, CountersFileDescriptor.valuesBufferLength(10));
        assertEquals(10 * CountersReader.METADATA_LENGTH,
            CountersFileDescriptor.metadataBufferLength(CountersFileDescriptor.valuesBufferLength(10)));
        assertEquals(256, CountersFileDescriptor.errorLogBufferLength(129));
        assertEquals(128 + 5120 + 1280 + 1024, CountersFileDescriptor.computeFileLength(5120, 1280, 1024));
        assertThrows(IllegalArgumentException.class, () -> CountersFileDescriptor.valuesBufferLength(0));
        assertThrows(IllegalArgumentException.class, () -> CountersFileDescriptor.errorLogBufferLength(64));
    }

    @Test
    void validateNamesWhatIsWrong()
    {
        final UnsafeBuffer header = new UnsafeBuffer(ByteBuffer.allocateDirect(CountersFileDescriptor.HEADER_LENGTH));
        CountersFileDescriptor.fillHeader(header, 1, 2, 4 * 256, 256, 384);
        CountersFileDescriptor.signalReady(header);

        assertTrue(CountersFileDescriptor.validate(header, 64).contains("shorter than the 128-byte header"));
        assertTrue(CountersFileDescriptor.validate(header, 128 + 1024).contains("its header describes 1792"));

        header.putInt(CountersFileDescriptor.LAYOUT_VERSION_OFFSET, 99);
        assertTrue(CountersFileDescriptor.validate(header, 1792).contains("layout version 99"));

        header.putInt(CountersFileDescriptor.LAYOUT_VERSION_OFFSET, CountersFileDescriptor.LAYOUT_VERSION);
        header.putInt(CountersFileDescriptor.COUNTERS_METADATA_BUFFER_LENGTH_OFFSET, 512);
        assertTrue(CountersFileDescriptor.validate(header, 1792).contains("inconsistent section lengths"));

        header.putInt(CountersFileDescriptor.MAGIC_OFFSET, 0xCAFEBABE);
        assertTrue(CountersFileDescriptor.validate(header, 1792).contains("not a SwitchML counters file"));
    }
}
