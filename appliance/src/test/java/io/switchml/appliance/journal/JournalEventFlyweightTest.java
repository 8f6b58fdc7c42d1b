package io.switchml.appliance.journal;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class JournalEventFlyweightTest
{
    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[1 << 16]);
    private final StringBuilder decoded = new StringBuilder();

    private String roundTrip(final String text, final int maxBytes)
    {
        final int length = JournalEventFlyweight.utf8Length(text, maxBytes);
        JournalEventFlyweight.putUtf8(buffer, 8, text, length);
        JournalEventFlyweight.getUtf8(buffer, 8, length, decoded);
        return decoded.toString();
    }

    @Test
    void encodesLikeTheJdk()
    {
        for (final String text : new String[]{"", "ascii", "résumé", "日本語", "emoji 😀 pair", "mixed é日😀a"})
        {
            final byte[] expected = text.getBytes(StandardCharsets.UTF_8);
            final int length = JournalEventFlyweight.utf8Length(text, 1 << 12);
            assertEquals(expected.length, length, text);
            JournalEventFlyweight.putUtf8(buffer, 0, text, length);
            final byte[] actual = new byte[length];
            buffer.getBytes(0, actual);
            assertArrayEquals(expected, actual, text);
            assertEquals(text, roundTrip(text, 1 << 12));
        }
    }

    @Test
    void truncatesAtACodePointAndReplacesLoneSurrogates()
    {
        assertEquals(-1, JournalEventFlyweight.utf8Length(null, 10));
        assertEquals("ab", roundTrip("ab😀", 5));
        assertEquals("ab😀", roundTrip("ab😀", 6));
        assertEquals("é", roundTrip("éé", 3));
        assertEquals("日", roundTrip("日本", 5));
        assertEquals("a?b", roundTrip("a\uD83Db", 10));
        assertEquals("a?", roundTrip("a\uDE00", 10));
    }

    @Test
    void randomTextsRoundTrip()
    {
        final long seed = System.nanoTime();
        final Random random = new Random(seed);
        for (int i = 0; i < 2_000; i++)
        {
            final StringBuilder text = new StringBuilder();
            for (int j = random.nextInt(40); j > 0; j--)
            {
                switch (random.nextInt(4))
                {
                    case 0 -> text.append((char)(0x20 + random.nextInt(0x5F)));
                    case 1 -> text.append((char)(0x80 + random.nextInt(0x780)));
                    case 2 -> text.append((char)(0x800 + random.nextInt(0xD000 - 0x800)));
                    default -> text.appendCodePoint(0x10000 + random.nextInt(0x100000 - 0x10000));
                }
            }
            final String expected = text.toString();
            assertEquals(expected, roundTrip(expected, 1 << 12), "seed " + seed);
        }
    }
}
