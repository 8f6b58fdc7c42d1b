package io.switchml.protocol;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Seeded random mutation of valid messages for the two parsers a stranger reaches: the control-line parser and the
 * data-packet validator. Jazzer does not resolve here, so this is mutation fuzzing without coverage feedback, with a
 * fixed budget for CI ({@value #ITERATIONS} inputs each; {@code -Dswitchml.fuzz.iterations=N} runs longer). Each
 * input must be either accepted or refused the documented way: {@link ControlProtocol#parse} returns a map or throws
 * {@link IllegalArgumentException}, {@link DataHeaderFlyweight#validate} returns a {@link DropReason}; nothing else
 * may escape. Every failure names its seed.
 */
class ParserFuzzTest
{
    private static final int ITERATIONS = Integer.getInteger("switchml.fuzz.iterations", 200_000);
    private static final String[] LINES = {
        "CREATE name=train tenant=team-a world=4 type=float32 k=256 s=64 mac=on token=abcdefgh1234 ifAbsent=true auth=x",
        "JOIN job=7 rank=3 token=abcdefgh1234 ports=40001,40002",
        "ABORTJOB job=7 auth=secret-secret-123 reason=maintenance window",
        "OK job=7 world=4 type=float32 k=256 s=64 shards=2 dataPorts=7471,7472 mac=on key=00112233445566778899aabbccddeeff",
        "JOBS auth=0123456789abcdef", "HEALTH", "ERR message=something = odd", "ABORT job=3 reason=rank 2 lost"};
    private static final String ALPHABET = "= \t\u0000\u00e9\u4e2d,-_.0123456789azAZ\r\n\\\"'%$";
    private static final LineMutator MUTATOR = new LineMutator(ALPHABET, 1, 5,
        (text, at, random) -> text.insert(at, " k=" + (random.nextBoolean() ? Long.MAX_VALUE : "-" + random.nextInt())),
        (text, at, random) -> text.insert(at, "=".repeat(1 + random.nextInt(3))),
        (text, at, random) -> text.setLength(random.nextInt(text.length() + 1)));

    @Test
    void controlLinesAreParsedOrRefusedWithIllegalArgumentException()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        for (int i = 0; i < ITERATIONS; i++)
        {
            final String line = MUTATOR.mutate(LINES[random.nextInt(LINES.length)], random);
            try
            {
                final Map<String, String> fields = ControlProtocol.parse(line);
                assertNotNull(fields.get(""), "a parsed line has a verb");
            }
            catch (final IllegalArgumentException refused)
            {
                // the documented refusal
            }
            catch (final RuntimeException ex)
            {
                fail("parse(" + printable(line) + ") threw " + ex + "; " + TestSeed.describe(seed), ex);
            }
        }
    }

    @Test
    void dataPacketsAreValidatedWithoutEscapingExceptions()
    {
        final long seed = TestSeed.seed();
        final Random random = new Random(seed);
        final UnsafeBuffer valid = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(ElementType.FLOAT16, 64)]);
        final UnsafeBuffer packet = new UnsafeBuffer(new byte[valid.capacity() + 64]);
        final byte[] types = {ElementType.INT32, ElementType.FLOAT32, ElementType.FLOAT16, ElementType.BFLOAT16};
        final DataHeaderFlyweight header = new DataHeaderFlyweight();
        final java.util.EnumMap<DropReason, Integer> byReason = new java.util.EnumMap<>(DropReason.class);
        for (int i = 0; i < ITERATIONS; i++)
        {
            final byte type = types[random.nextInt(types.length)];
            final int count = random.nextInt(33);
            header.wrap(valid, 0).writeHeader(
                (byte)(1 + random.nextInt(5)), random.nextInt(8), random.nextInt(4), random.nextInt(8), type,
                random.nextInt(64), random.nextInt(1 << 20), count, random.nextInt(64) - 32, random.nextInt(64) - 32,
                random.nextInt());
            int length = DataHeaderFlyweight.packetLength(type, count);
            packet.putBytes(0, valid, 0, length);
            final int mutations = 1 + random.nextInt(4);
            for (int m = 0; m < mutations; m++)
            {
                switch (random.nextInt(4))
                {
                    case 0 -> packet.putByte(random.nextInt(Math.max(1, length)), (byte)random.nextInt(256));
                    case 1 -> length = random.nextInt(packet.capacity() + 1);
                    case 2 -> packet.putByte(random.nextInt(DataHeaderFlyweight.HEADER_LENGTH),
                        (byte)(packet.getByte(0) ^ (1 << random.nextInt(8))));
                    default -> length = Math.max(0, length - random.nextInt(8));
                }
            }
            try
            {
                byReason.merge(DataHeaderFlyweight.validate(packet, 0, length), 1, Integer::sum);
            }
            catch (final RuntimeException ex)
            {
                fail("validate threw " + ex + " on a " + length + "-byte packet; " + TestSeed.describe(seed), ex);
            }
        }
        // every input is accounted for under one reason, and the mutations reach several of the validator's checks
        assertEquals(ITERATIONS, byReason.values().stream().mapToInt(Integer::intValue).sum());
        assertTrue(byReason.size() >= 5, "reasons reached: " + byReason + "; " + TestSeed.describe(seed));
        assertTrue(byReason.getOrDefault(DropReason.NONE, 0) > 0, "some mutated packets stay valid: " + byReason);
    }

    private static String printable(final String text)
    {
        final StringBuilder out = new StringBuilder("\"");
        for (final char c : text.toCharArray())
        {
            out.append(c >= 32 && c < 127 ? String.valueOf(c) : String.format("\\u%04x", (int)c));
        }
        return out.append('"').toString();
    }
}
