package io.switchml.appliance.engine;

import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import io.switchml.protocol.quant.HalfFloats;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.SplittableRandom;

import static io.switchml.appliance.engine.SlotPool.ABSORBED;
import static io.switchml.appliance.engine.SlotPool.COMPLETED;
import static io.switchml.appliance.engine.SlotPool.DUPLICATE;
import static io.switchml.appliance.engine.SlotPool.MISMATCH;
import static io.switchml.appliance.engine.SlotPool.NACK;
import static io.switchml.appliance.engine.SlotPool.PROBE_PENDING;
import static io.switchml.appliance.engine.SlotPool.STALE;
import static io.switchml.appliance.engine.SlotPool.SHADOW_RESULT;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_EXPONENT_ONLY;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_POOL_VERSION;
import static io.switchml.protocol.DataHeaderFlyweight.FLAG_RETRANSMIT;
import static io.switchml.protocol.DataHeaderFlyweight.NO_EXPONENT;
import static io.switchml.protocol.DataHeaderFlyweight.TYPE_RESULT;
import static io.switchml.protocol.DataHeaderFlyweight.TYPE_UPDATE;
import static io.switchml.protocol.DataHeaderFlyweight.packetLength;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Algorithm 3 of the SwitchML paper (switch logic with packet loss recovery) as implemented by
 * {@link SlotPool}: the example execution of Appendix A step by step, unit cases for duplicates,
 * consistency checks, world sizes, wrap-around, exponent-only and partial chunks, and seeded
 * randomized schedules of n workers running Algorithm 4 over a lossy, duplicating, reordering
 * network.
 * <p>
 * The randomized test prints its seed on failure; replay one schedule with
 * {@code -Dswitchml.test.seed=N}. With {@code -Dswitchml.test.unorderedUplink=true} the uplink also
 * reorders packets of one worker on one slot across rounds, so stale updates reach the pool; it must
 * then drop them (STALE, or DUPLICATE where the sender's seen bit is still set) and still produce exact
 * sums. Algorithm 3 as written does not (see {@link #shouldNotLetStaleUpdateRestartCompletedVersion()}
 * and {@link #shouldNotCountRetransmissionTwiceAfterStaleUpdate()}); the pool's chunk sequence check
 * does.
 */
class SlotPoolTest
{
    private static final String SEED_PROPERTY = "switchml.test.seed";
    private static final String UNORDERED_UPLINK_PROPERTY = "switchml.test.unorderedUplink";
    private static final int RANDOM_SCHEDULES = 1_000;
    private static final int[] WORLD_SIZES = { 1, 2, 3, 4, 7, 16 };
    private static final long MAX_STEPS_WITHOUT_PROGRESS = 200_000;

    private static final int JOB_ID = 0x0A0B0C0D;
    private static final int RESULT_OFFSET = 8;
    private static final int GUARD_BYTES = 32;
    private static final byte SENTINEL = (byte)0xA5;

    private static final int W1 = 0;
    private static final int W2 = 1;
    private static final int W3 = 2;

    @Test
    void shouldFollowAppendixExampleExecutionAndFlipSlotBack()
    {
        final int slotCount = 4;
        final int x = 2;
        final Harness harness = new Harness(3, slotCount, 4);

        // Chunk sequence numbers of the chunks at offsets off, off + k*s, off + 2*k*s on slot x.
        final long off = x;
        final long offNext = off + slotCount;
        final long offAfter = off + 2L * slotCount;
        final int scaleA = 7;

        final DataHeaderFlyweight a1 = update(W1, 0, x, off, scaleA, 3, 10, 20, 30, 40);
        final DataHeaderFlyweight a2 = update(W2, 0, x, off, scaleA, 5, 1, 2, 3, 4);
        final DataHeaderFlyweight a3 = update(W3, 0, x, off, scaleA, -1, 100, 200, 300, Integer.MAX_VALUE);
        final int[] sumA = { 111, 222, 333, Integer.MAX_VALUE + 44 };
        final int lookaheadA = 5;

        // Chunk off + k*s: its scale exponent is the look-ahead maximum piggy-backed on A's result.
        final DataHeaderFlyweight b1 = update(W1, 1, x, offNext, lookaheadA, NO_EXPONENT, -1, -2, -3, -4);
        final DataHeaderFlyweight b2 = update(W2, 1, x, offNext, lookaheadA, 2, 5, 6, 7, 8);
        final DataHeaderFlyweight b3 = update(W3, 1, x, offNext, lookaheadA, 9, 1000, 0, -1000, 1);
        final int[] sumB = { 1004, 4, -996, 5 };
        final int lookaheadB = 9;

        final DataHeaderFlyweight c1 = update(W1, 0, x, offAfter, lookaheadB, 0, 1, 1, 1, 1);
        final DataHeaderFlyweight c2 = update(W2, 0, x, offAfter, lookaheadB, 0, 2, 2, 2, 2);
        final DataHeaderFlyweight c3 = update(W3, 0, x, offAfter, lookaheadB, 0, 3, 3, 3, 3);

        harness.nowNs = 0;
        assertCode("t0: w1 sends its update for slot x, offset off", ABSORBED, harness.apply("t0", a1));
        harness.nowNs = 1_000;
        assertCode("t1: w2 sends its update for slot x, offset off", ABSORBED, harness.apply("t1", a2));
        // t2: w3 sends its update, lost on the upstream path at t3: the switch sees nothing.
        harness.nowNs = 4_000;
        assertCode("t4: w1's retransmission is ignored", DUPLICATE, harness.apply("t4", a1));
        harness.nowNs = 5_000;
        assertCode("t5: w2's retransmission is ignored", DUPLICATE, harness.apply("t5", a2));
        harness.nowNs = 6_000;
        assertCode("t6: w3's retransmission completes slot x", COMPLETED, harness.apply("t6", a3));
        assertResult("t6: multicast result", harness.result, x, 0, off, scaleA, lookaheadA, sumA);
        assertEquals(6_000, harness.pool.lastCompletionLatencyNs(), "t6: latency from t0 to t6");

        // t7: the multicast copy for w1 is lost on the downstream path.
        harness.nowNs = 8_000;
        assertCode("t8: w1's second retransmission hits the completed slot", SHADOW_RESULT, harness.apply("t8", a1));
        assertResult(
            "t8: unicast result to w1", harness.result, x, FLAG_RETRANSMIT, off, scaleA, lookaheadA, sumA);
        assertEquals(W1, harness.result.workerRank(), "t8: unicast result goes back to the sender w1");

        // t9, t10: w2 and w3 receive the result; t11: w1 receives the unicast result.
        harness.nowNs = 12_000;
        assertCode("t12: w2 reuses slot x in pool version 1", ABSORBED, harness.apply("t12", b2));
        harness.nowNs = 13_000;
        assertCode("t13: w3 reuses slot x in pool version 1", ABSORBED, harness.apply("t13", b3));

        // A retransmission w1 sent before t11 arrives late: version 0 is still the intact shadow copy.
        assertCode("t13+: w1's late retransmission of off", SHADOW_RESULT, harness.apply("t13+", a1));
        assertResult(
            "t13+: shadow copy still holds off", harness.result, x, FLAG_RETRANSMIT, off, scaleA, lookaheadA, sumA);
        assertCode("t13+: w2's retransmission of off + k*s", DUPLICATE, harness.apply("t13+", b2));

        harness.nowNs = 15_000;
        assertCode("t14/t15: w1's update for off + k*s completes the slot", COMPLETED, harness.apply("t15", b1));
        assertResult(
            "t15: multicast result", harness.result, x, FLAG_POOL_VERSION, offNext, lookaheadA, lookaheadB, sumB);
        assertEquals(3_000, harness.pool.lastCompletionLatencyNs(), "t15: latency from t12 to t15");

        // Past t15: the multicast copy of off + k*s for w3 is lost; w1 and w2 flip back to version 0.
        harness.nowNs = 17_000;
        assertCode("t17: w1 overwrites the version 0 shadow copy", ABSORBED, harness.apply("t17", c1));
        assertCode("t18: w2 adds to version 0", ABSORBED, harness.apply("t18", c2));
        assertCode("t19: w3's retransmission of off + k*s", SHADOW_RESULT, harness.apply("t19", b3));
        assertResult(
            "t19: version 1 is now the shadow copy",
            harness.result, x, FLAG_POOL_VERSION | FLAG_RETRANSMIT, offNext, lookaheadA, lookaheadB, sumB);
        harness.nowNs = 20_000;
        assertCode("t20: w3 completes off + 2*k*s", COMPLETED, harness.apply("t20", c3));
        assertResult("t20: no trace of off in version 0", harness.result, x, 0, offAfter, lookaheadB, 0, 6, 6, 6, 6);
        assertEquals(3_000, harness.pool.lastCompletionLatencyNs(), "t20: latency from t17 to t20");
    }

    @Test
    void shouldDropDuplicateWhileIncompleteWithoutChangingSum()
    {
        final Harness harness = new Harness(3, 2, 3);
        final DataHeaderFlyweight first = update(0, 0, 1, 1, NO_EXPONENT, 4, 5, 6, 7);
        final DataHeaderFlyweight second = update(1, 0, 1, 1, NO_EXPONENT, 2, 10, 20, 30);

        assertCode("first", ABSORBED, harness.apply("first", first));
        assertCode("duplicate of first", DUPLICATE, harness.apply("dup", first));
        first.flags(FLAG_RETRANSMIT);
        assertCode("retransmission of first", DUPLICATE, harness.apply("retransmit", first));
        assertCode("second", ABSORBED, harness.apply("second", second));
        assertCode("duplicate of first after second", DUPLICATE, harness.apply("dup", first));
        assertCode("duplicate of second", DUPLICATE, harness.apply("dup", second));
        assertCode(
            "third", COMPLETED, harness.apply("third", update(2, 0, 1, 1, NO_EXPONENT, 3, 100, 200, 300)));
        assertResult("sum counts each worker once", harness.result, 1, 0, 1, NO_EXPONENT, 4, 115, 226, 337);
    }

    @ParameterizedTest
    @ValueSource(strings = { "sequence", "elementCount", "scaleExponent", "exponentOnlyFlag", "dataAfterExponentOnly" })
    void shouldRejectMismatchingContributionWithoutStateChange(final String field)
    {
        final Harness harness = new Harness(3, 2, 4);
        final boolean exponentOnlyRound = field.equals("dataAfterExponentOnly");
        final DataHeaderFlyweight good0 = exponentOnlyRound ?
            exponentOnly(0, 0, 1, 9, 4, 1) : update(0, 0, 1, 9, 4, 1, 1, 2, 3, 4);
        final DataHeaderFlyweight good1 = exponentOnlyRound ?
            exponentOnly(1, 0, 1, 9, 4, 2) : update(1, 0, 1, 9, 4, 2, 10, 20, 30, 40);
        final DataHeaderFlyweight good2 = exponentOnlyRound ?
            exponentOnly(2, 0, 1, 9, 4, 3) : update(2, 0, 1, 9, 4, 3, 100, 200, 300, 400);
        // validate() ties the exponent-only flag to a zero element count, so a flag mismatch also
        // differs in count: "exponentOnlyFlag" and "dataAfterExponentOnly" cover both directions.
        final DataHeaderFlyweight bad = switch (field)
        {
            case "sequence" -> update(1, 0, 1, 11, 4, 100, 7, 7, 7, 7);
            case "elementCount" -> update(1, 0, 1, 9, 4, 100, 7, 7, 7);
            case "scaleExponent" -> update(1, 0, 1, 9, 5, 100, 7, 7, 7, 7);
            case "exponentOnlyFlag" -> exponentOnly(1, 0, 1, 9, 4, 100);
            case "dataAfterExponentOnly" -> update(1, 0, 1, 9, 4, 100, 7, 7, 7, 7);
            default -> throw new IllegalArgumentException(field);
        };

        assertCode(field + ": first", ABSORBED, harness.apply(field, good0));
        assertCode(field + ": mismatching second worker", MISMATCH, harness.apply(field, bad));
        assertCode(field + ": mismatching again", MISMATCH, harness.apply(field, bad));
        assertCode(field + ": second worker, correct: its seen bit was not set", ABSORBED, harness.apply(field, good1));
        assertCode(field + ": first worker again", DUPLICATE, harness.apply(field, good0));
        assertCode(field + ": third worker completes", COMPLETED, harness.apply(field, good2));
        if (exponentOnlyRound)
        {
            assertResult(field, harness.result, 1, FLAG_EXPONENT_ONLY, 9, 4, 3);
        }
        else
        {
            assertResult(field + ": no trace of the mismatch", harness.result, 1, 0, 9, 4, 3, 111, 222, 333, 444);
        }
        if (!field.equals("elementCount") && !field.equals("scaleExponent"))
        {
            // A retransmission into a completed version is only checked for sequence and exponent-only flag.
            assertCode(field + ": mismatch into the completed slot", MISMATCH, harness.apply(field, bad));
        }
        assertCode(field + ": retransmission still served", SHADOW_RESULT, harness.apply(field, good1));
    }

    @Test
    void shouldRejectMismatchingRetransmissionIntoCompletedSlotWithoutStateChange()
    {
        final Harness harness = new Harness(2, 1, 2);
        final DataHeaderFlyweight a0 = update(0, 0, 0, 3, NO_EXPONENT, 1, 1, 2);
        final DataHeaderFlyweight a1 = update(1, 0, 0, 3, NO_EXPONENT, 2, 3, 4);
        assertCode("a0", ABSORBED, harness.apply("a0", a0));
        assertCode("a1", COMPLETED, harness.apply("a1", a1));

        assertCode(
            "newer sequence into completed version 0", MISMATCH,
            harness.apply("seq", update(1, 0, 0, 4, NO_EXPONENT, 2, 3, 4)));
        assertCode(
            "older sequence into completed version 0", STALE,
            harness.apply("old seq", update(1, 0, 0, 2, NO_EXPONENT, 2, 3, 4)));
        assertCode(
            "exponent-only into completed data version 0", MISMATCH,
            harness.apply("exp", exponentOnly(1, 0, 0, 3, NO_EXPONENT, 2)));

        assertCode("w0 moves on to version 1", ABSORBED, harness.apply("b0", update(0, 1, 0, 4, NO_EXPONENT, 0, 5, 5)));
        assertCode(
            "w1 sends a mismatching chunk to version 1", MISMATCH,
            harness.apply("bad b1", update(1, 1, 0, 5, NO_EXPONENT, 0, 9, 9)));
        assertCode("w1's version 0 seen bit survived the mismatch", SHADOW_RESULT, harness.apply("a1 again", a1));
        assertResult("shadow result", harness.result, 0, FLAG_RETRANSMIT, 3, NO_EXPONENT, 2, 4, 6);
        assertCode("b1", COMPLETED, harness.apply("b1", update(1, 1, 0, 4, NO_EXPONENT, 0, 6, 6)));
        assertResult("version 1", harness.result, 0, FLAG_POOL_VERSION, 4, NO_EXPONENT, 0, 11, 11);
    }

    @Test
    void shouldCompleteEveryPacketWithSingleWorker()
    {
        final Harness harness = new Harness(1, 3, 2);
        for (int round = 0; round < 6; round++)
        {
            for (int slot = 0; slot < 3; slot++)
            {
                final int version = round & 1;
                final long sequence = round * 3L + slot;
                final DataHeaderFlyweight packet = update(0, version, slot, sequence, NO_EXPONENT, round, round, -slot);
                final String step = "round " + round + " slot " + slot;
                assertCode(step, COMPLETED, harness.apply(step, packet));
                assertResult(step, harness.result, slot, version, sequence, NO_EXPONENT, round, round, -slot);
                assertCode(step + " retransmission", SHADOW_RESULT, harness.apply(step, packet));
                assertResult(
                    step, harness.result, slot, version | FLAG_RETRANSMIT, sequence, NO_EXPONENT, round, round, -slot);
            }
        }
    }

    @Test
    void shouldAggregate256WorkersAcrossBitmapWords()
    {
        final int n = DataHeaderFlyweight.MAX_WORKERS;
        final Harness harness = new Harness(n, 2, 3);
        final SplittableRandom random = new SplittableRandom(256);
        final int[] order = shuffledRanks(n, random);
        final int[] boundaryRanks = { 0, 63, 64, 127, 128, 191, 192, 255 };

        final DataHeaderFlyweight[] round0 = new DataHeaderFlyweight[n];
        final DataHeaderFlyweight[] round1 = new DataHeaderFlyweight[n];
        final int[] sum0 = new int[3];
        final int[] sum1 = new int[3];
        for (int rank = 0; rank < n; rank++)
        {
            round0[rank] = update(rank, 0, 1, 41, NO_EXPONENT, rank % 100, rank, -rank, rank * 1_000_003);
            round1[rank] = update(rank, 1, 1, 43, NO_EXPONENT, -(rank % 100), 1, rank * rank, Integer.MIN_VALUE + rank);
            sum0[0] += rank;
            sum0[1] -= rank;
            sum0[2] += rank * 1_000_003;
            sum1[0] += 1;
            sum1[1] += rank * rank;
            sum1[2] += Integer.MIN_VALUE + rank;
        }

        for (int i = 0; i < n - 1; i++)
        {
            final int rank = order[i];
            assertCode("round 0 rank " + rank, ABSORBED, harness.apply("r0", round0[rank]));
            for (final int boundary : boundaryRanks)
            {
                if (boundary == rank)
                {
                    assertCode("round 0 duplicate of rank " + rank, DUPLICATE, harness.apply("dup", round0[rank]));
                }
            }
        }
        assertCode("round 0 last rank " + order[n - 1], COMPLETED, harness.apply("r0", round0[order[n - 1]]));
        assertResult("round 0", harness.result, 1, 0, 41, NO_EXPONENT, 99, sum0);

        final int[] order1 = shuffledRanks(n, random);
        final int laggard = order1[n - 1];
        for (int i = 0; i < n - 1; i++)
        {
            assertCode("round 1 rank " + order1[i], ABSORBED, harness.apply("r1", round1[order1[i]]));
            assertCode(
                "round 0 retransmission of laggard " + laggard, SHADOW_RESULT, harness.apply("shadow", round0[laggard]));
            assertResult("round 0 shadow", harness.result, 1, FLAG_RETRANSMIT, 41, NO_EXPONENT, 99, sum0);
        }
        for (final int boundary : boundaryRanks)
        {
            if (boundary != laggard)
            {
                assertCode("round 1 duplicate of rank " + boundary, DUPLICATE, harness.apply("dup", round1[boundary]));
            }
        }
        assertCode("round 1 laggard " + laggard, COMPLETED, harness.apply("r1", round1[laggard]));
        assertResult("round 1", harness.result, 1, FLAG_POOL_VERSION, 43, NO_EXPONENT, 0, sum1);
        assertCode("round 1 retransmission", SHADOW_RESULT, harness.apply("shadow", round1[0]));
    }

    @Test
    void shouldWrapAroundLikeJavaIntAddition()
    {
        final Harness harness = new Harness(3, 1, 6);
        final int[][] lanes = {
            { Integer.MAX_VALUE, Integer.MIN_VALUE, -1, Integer.MAX_VALUE, 0x4000_0000, Integer.MIN_VALUE },
            { 1, Integer.MIN_VALUE, 1, Integer.MAX_VALUE, 0x4000_0000, -1 },
            { 0, 0, Integer.MIN_VALUE, Integer.MAX_VALUE, 0x4000_0000, Integer.MIN_VALUE },
        };
        final int[] expected = new int[6];
        for (final int[] worker : lanes)
        {
            for (int i = 0; i < expected.length; i++)
            {
                expected[i] += worker[i];
            }
        }
        assertArrayEquals(new int[]{ Integer.MIN_VALUE, 0, Integer.MIN_VALUE, 0x7FFF_FFFD, 0xC000_0000, -1 }, expected);

        for (int rank = 0; rank < 3; rank++)
        {
            final int code = harness.apply("wrap", intUpdate(rank, 0, 0, 0, lanes[rank]));
            assertCode("rank " + rank, rank < 2 ? ABSORBED : COMPLETED, code);
        }
        assertResult("wrap-around", harness.result, 0, 0, 0, NO_EXPONENT, NO_EXPONENT, expected);
    }

    @Test
    void shouldCompleteExponentOnlyRoundWithMaxLookahead()
    {
        final Harness harness = new Harness(4, 2, 8);
        assertCode("w0", ABSORBED, harness.apply("w0", exponentOnly(0, 0, 0, 0, NO_EXPONENT, 3)));
        assertCode("w1", ABSORBED, harness.apply("w1", exponentOnly(1, 0, 0, 0, NO_EXPONENT, NO_EXPONENT)));
        assertCode("w1 duplicate", DUPLICATE, harness.apply("w1", exponentOnly(1, 0, 0, 0, NO_EXPONENT, NO_EXPONENT)));
        assertCode("w2", ABSORBED, harness.apply("w2", exponentOnly(2, 0, 0, 0, NO_EXPONENT, 17)));
        assertCode("w3", COMPLETED, harness.apply("w3", exponentOnly(3, 0, 0, 0, NO_EXPONENT, -20)));
        assertResult("exponent-only result", harness.result, 0, FLAG_EXPONENT_ONLY, 0, NO_EXPONENT, 17);
        assertCode("w0 retransmission", SHADOW_RESULT, harness.apply("w0", exponentOnly(0, 0, 0, 0, NO_EXPONENT, 3)));
        assertResult(
            "exponent-only shadow result",
            harness.result, 0, FLAG_EXPONENT_ONLY | FLAG_RETRANSMIT, 0, NO_EXPONENT, 17);

        // The data round that follows on the same slot uses the agreed exponent in version 1.
        for (int rank = 0; rank < 4; rank++)
        {
            final int[] lanes = { rank, rank, rank, rank, rank, rank, rank, rank };
            final int code = harness.apply("data", update(rank, 1, 0, 2, 17, NO_EXPONENT, lanes));
            assertCode("data rank " + rank, rank < 3 ? ABSORBED : COMPLETED, code);
        }
        assertResult(
            "data after exponent round", harness.result, 0, FLAG_POOL_VERSION, 2, 17, NO_EXPONENT, 6, 6, 6, 6, 6, 6, 6, 6);

        final Harness all = new Harness(2, 1, 4);
        assertCode("first absent", ABSORBED, all.apply("none", exponentOnly(0, 0, 0, 0, NO_EXPONENT, NO_EXPONENT)));
        assertCode("all absent", COMPLETED, all.apply("none", exponentOnly(1, 0, 0, 0, NO_EXPONENT, NO_EXPONENT)));
        assertResult("no look-ahead anywhere", all.result, 0, FLAG_EXPONENT_ONLY, 0, NO_EXPONENT, NO_EXPONENT);
    }

    @Test
    void shouldAggregatePartialLastChunk()
    {
        final Harness harness = new Harness(2, 1, 8);
        harness.apply("full", update(0, 0, 0, 0, NO_EXPONENT, 0, 1, 2, 3, 4, 5, 6, 7, 8));
        assertCode("full", COMPLETED, harness.apply("full", update(1, 0, 0, 0, NO_EXPONENT, 0, 1, 2, 3, 4, 5, 6, 7, 8)));
        assertResult("full chunk", harness.result, 0, 0, 0, NO_EXPONENT, 0, 2, 4, 6, 8, 10, 12, 14, 16);

        assertCode("partial w0", ABSORBED, harness.apply("partial", update(0, 1, 0, 1, NO_EXPONENT, 0, 100, 200, 300)));
        assertCode(
            "partial w1 with a different count", MISMATCH,
            harness.apply("partial", update(1, 1, 0, 1, NO_EXPONENT, 0, 100, 200, 300, 400)));
        assertCode("partial w1", COMPLETED, harness.apply("partial", update(1, 1, 0, 1, NO_EXPONENT, 0, 1, 2, 3)));
        assertResult("partial chunk of 3 lanes", harness.result, 0, FLAG_POOL_VERSION, 1, NO_EXPONENT, 0, 101, 202, 303);

        // Versions reused with fewer lanes than their previous round, then with more: no stale lane leaks.
        harness.apply("partial", update(0, 0, 0, 2, NO_EXPONENT, 0, 1, 1, 1, 1, 1));
        assertCode("5 lanes", COMPLETED, harness.apply("partial", update(1, 0, 0, 2, NO_EXPONENT, 0, 1, 1, 1, 1, 1)));
        assertResult("partial chunk of 5 lanes", harness.result, 0, 0, 2, NO_EXPONENT, 0, 2, 2, 2, 2, 2);
        harness.apply("full", update(0, 1, 0, 3, NO_EXPONENT, 0, 0, 0, 0, 0, 0, 0, 0, 0));
        assertCode(
            "full again", COMPLETED, harness.apply("full", update(1, 1, 0, 3, NO_EXPONENT, 0, 0, 0, 0, 0, 0, 0, 0, 9)));
        assertResult(
            "full chunk after partial", harness.result, 0, FLAG_POOL_VERSION, 3, NO_EXPONENT, 0, 0, 0, 0, 0, 0, 0, 0, 9);
    }

    /**
     * float16 and bfloat16 lanes: decoded, scaled to 32-bit fixed point with the packet's exponent,
     * summed, and encoded back, every element within the bound of {@link HalfFloats#errorBound} against
     * the exact sum of the float32 inputs; the result carries 2-byte lanes, and a shadow copy returns the
     * same bytes.
     */
    @ParameterizedTest
    @ValueSource(bytes = { ElementType.FLOAT16, ElementType.BFLOAT16 })
    void shouldAggregateSixteenBitLanesInFixedPointWithinTheBound(final byte type)
    {
        final String replay = System.getProperty(SEED_PROPERTY);
        final long seed = replay != null && !replay.isEmpty() ? Long.parseLong(replay) : System.nanoTime();
        final SplittableRandom random = new SplittableRandom(seed);
        for (final int n : new int[]{ 1, 2, 3, 7, 16 })
        {
            final int k = 1 + random.nextInt(64);
            final Harness harness = new Harness(n, 2, k);
            for (int round = 0; round < 20; round++)
            {
                final int count = 1 + random.nextInt(k);
                final int scaleOfChunk = random.nextInt(-30, type == ElementType.FLOAT16 ? 12 : 60);
                final float[][] inputs = new float[n][count];
                int maxBits = 0;
                for (int r = 0; r < n; r++)
                {
                    for (int i = 0; i < count; i++)
                    {
                        final double unit = random.nextInt(8) == 0 ? 0.0 : random.nextDouble() * 2 - 1;
                        inputs[r][i] = (float)Math.scalb(unit, scaleOfChunk - random.nextInt(12));
                        maxBits = Math.max(maxBits, Float.floatToRawIntBits(inputs[r][i]) & 0x7FFF_FFFF);
                    }
                }
                final int m = HalfFloats.blockExponent(type, maxBits);
                final int version = round & 1;
                final DataHeaderFlyweight[] updates = new DataHeaderFlyweight[n];
                for (int r = 0; r < n; r++)
                {
                    final short[] lanes = new short[count];
                    HalfFloats.encode(type, inputs[r], 0, count, lanes);
                    updates[r] = halfUpdate(type, r, version, 1, round, m, lanes);
                    final int code = harness.apply("round " + round + " rank " + r, updates[r]);
                    assertCode("rank " + r, r < n - 1 ? ABSORBED : COMPLETED, code);
                }
                final String what = ElementType.name(type) + " n=" + n + " round " + round + " m=" + m + " seed=" + seed +
                    " (replay with -D" + SEED_PROPERTY + "=" + seed + ")";
                assertEquals(type, harness.result.elementType(), what);
                assertEquals(count, harness.result.elementCount(), what);
                assertEquals(DataHeaderFlyweight.HEADER_LENGTH + 2 * count, SlotPool.resultLength(harness.result), what);
                assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(
                    harness.result.buffer(), harness.result.offset(), SlotPool.resultLength(harness.result)), what);
                assertEquals((short)m, harness.result.scaleExponent(), what);
                final short[] first = new short[count];
                for (int i = 0; i < count; i++)
                {
                    double exact = 0;
                    double sumOfAbs = 0;
                    for (int r = 0; r < n; r++)
                    {
                        exact += inputs[r][i];
                        sumOfAbs += Math.abs(inputs[r][i]);
                    }
                    first[i] = harness.result.halfLane(i);
                    final float value = HalfFloats.decode(type, first[i]);
                    final double bound = HalfFloats.errorBound(type, n, m, sumOfAbs, Math.abs(exact));
                    assertTrue(Math.abs(value - exact) <= bound,
                        what + " element " + i + ": " + value + " vs exact " + exact + ", bound " + bound);
                }
                assertCode("retransmission", SHADOW_RESULT, harness.apply("shadow", updates[0]));
                for (int i = 0; i < count; i++)
                {
                    assertEquals(first[i], harness.result.halfLane(i), what + " shadow copy lane " + i);
                }
            }
        }
    }

    @Test
    void shouldRejectAContributionOfAnotherElementType()
    {
        final Harness harness = new Harness(2, 1, 2);
        assertCode("float16 first", ABSORBED,
            harness.apply("f16", halfUpdate(ElementType.FLOAT16, 0, 0, 0, 0, 1, new short[]{ 0x3C00, 0x3C00 })));
        assertCode("bfloat16 second", MISMATCH,
            harness.apply("bf16", halfUpdate(ElementType.BFLOAT16, 1, 0, 0, 0, 1, new short[]{ 0x3F80, 0x3F80 })));
        assertCode("float16 second", COMPLETED,
            harness.apply("f16", halfUpdate(ElementType.FLOAT16, 1, 0, 0, 0, 1, new short[]{ 0x3C00, 0x4000 })));
        assertEquals(2.0f, HalfFloats.decode(ElementType.FLOAT16, harness.result.halfLane(0)));
        assertEquals(3.0f, HalfFloats.decode(ElementType.FLOAT16, harness.result.halfLane(1)));
    }

    /**
     * The check field is aggregated, not compared: the result carries the byte-wise maximum, which equals a
     * worker's own check only when every worker sent the same one. A shadow copy carries it too.
     */
    @Test
    void shouldReturnTheByteWiseMaximumOfTheChecks()
    {
        final Harness harness = new Harness(3, 1, 1);
        final int agreed = DataHeaderFlyweight.tensorCheckOf(0x5A);
        for (int rank = 0; rank < 3; rank++)
        {
            final DataHeaderFlyweight update = intUpdate(rank, 0, 0, 0, rank);
            update.tensorCheck(agreed);
            assertCode("agreeing rank " + rank, rank < 2 ? ABSORBED : COMPLETED, harness.apply("agree", update));
        }
        assertEquals(agreed, harness.result.tensorCheck(), "all agree");

        final int[] digests = { 0x10, 0x80, 0x10 };
        DataHeaderFlyweight last = null;
        for (int rank = 0; rank < 3; rank++)
        {
            last = intUpdate(rank, 1, 0, 1, rank);
            last.tensorCheck(DataHeaderFlyweight.tensorCheckOf(digests[rank]));
            assertCode("disagreeing rank " + rank, rank < 2 ? ABSORBED : COMPLETED, harness.apply("disagree", last));
        }
        assertEquals((0x80 << 8) | (0xFF - 0x10), harness.result.tensorCheck(), "max of checks, max of complements");
        for (final int digest : digests)
        {
            assertNotEquals(DataHeaderFlyweight.tensorCheckOf(digest), harness.result.tensorCheck(),
                "every rank sees the disagreement");
        }
        assertCode("shadow", SHADOW_RESULT, harness.apply("shadow", last));
        assertEquals((0x80 << 8) | (0xFF - 0x10), harness.result.tensorCheck(), "shadow copy");
    }

    /**
     * A look-ahead of {@link DataHeaderFlyweight#NON_FINITE_EXPONENT} (a rank's next chunk holds a NaN or an infinity)
     * wins the maximum over every block exponent, so every rank learns it from the result; {@link
     * DataHeaderFlyweight#UNKNOWN_EXPONENT} wins over it, and the exponent-only round that follows resolves it.
     */
    @Test
    void shouldCarryANonFiniteLookAheadThroughTheMaximum()
    {
        final Harness harness = new Harness(3, 1, 2);
        final int[][] lookaheads = {
            { DataHeaderFlyweight.MAX_EXPONENT, DataHeaderFlyweight.NON_FINITE_EXPONENT, NO_EXPONENT },
            { DataHeaderFlyweight.NON_FINITE_EXPONENT, DataHeaderFlyweight.UNKNOWN_EXPONENT, -3 },
            { -126, 5, DataHeaderFlyweight.NON_FINITE_EXPONENT },
        };
        final int[] expected = {
            DataHeaderFlyweight.NON_FINITE_EXPONENT, DataHeaderFlyweight.UNKNOWN_EXPONENT,
            DataHeaderFlyweight.NON_FINITE_EXPONENT,
        };
        for (int round = 0; round < lookaheads.length; round++)
        {
            for (int rank = 0; rank < 3; rank++)
            {
                final DataHeaderFlyweight update = update(rank, round & 1, 0, round, 0, lookaheads[round][rank], 1, 2);
                assertCode("round " + round + " rank " + rank, rank < 2 ? ABSORBED : COMPLETED,
                    harness.apply("round " + round, update));
            }
            assertEquals((short)expected[round], harness.result.lookaheadExponent(), "round " + round);
            assertEquals(6, harness.result.lane(1), "round " + round + ": the lanes are summed as usual");
        }
    }

    @Test
    void shouldRejectInvalidSizes()
    {
        assertThrows(IllegalArgumentException.class, () -> new SlotPool(0, 1, 1));
        assertThrows(IllegalArgumentException.class, () -> new SlotPool(DataHeaderFlyweight.MAX_WORKERS + 1, 1, 1));
        assertThrows(IllegalArgumentException.class, () -> new SlotPool(1, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new SlotPool(1, 1, 0));
        assertThrows(IllegalArgumentException.class, () -> new SlotPool(1, 1, DataHeaderFlyweight.MAX_ELEMENTS + 1));
        final SlotPool pool = new SlotPool(DataHeaderFlyweight.MAX_WORKERS, 3, DataHeaderFlyweight.MAX_ELEMENTS);
        assertEquals(DataHeaderFlyweight.MAX_WORKERS, pool.worldSize());
        assertEquals(3, pool.slotCount());
        assertEquals(DataHeaderFlyweight.MAX_ELEMENTS, pool.lanesPerSlot());
    }

    /**
     * A delayed copy of an update (a network duplicate, or a retransmission overtaken by the result)
     * that arrives after its sender already moved the slot to the other version finds its seen bit
     * cleared and the version's count at 0. Algorithm 3 then treats it as the first contribution of a
     * new round: it overwrites the shadow copy that a lagging worker still needs, and that worker's
     * retransmissions become DUPLICATE forever, so the job deadlocks. The chunk sequence the pool keeps
     * could tell the stale copy from a new round (a new round on a version always has a greater
     * sequence than the last one). See also {@link #shouldNotCountRetransmissionTwiceAfterStaleUpdate()}.
     */
    @Test
    void shouldNotLetStaleUpdateRestartCompletedVersion()
    {
        final Harness harness = new Harness(3, 1, 2);
        final DataHeaderFlyweight a0 = update(0, 0, 0, 0, NO_EXPONENT, 0, 1, 1);
        final DataHeaderFlyweight a1 = update(1, 0, 0, 0, NO_EXPONENT, 0, 2, 2);
        final DataHeaderFlyweight a2 = update(2, 0, 0, 0, NO_EXPONENT, 0, 4, 4);
        assertCode("a0", ABSORBED, harness.apply("a0", a0));
        assertCode("a1", ABSORBED, harness.apply("a1", a1));
        assertCode("a2", COMPLETED, harness.apply("a2", a2));
        // The result is lost towards worker 2; workers 0 and 1 move to version 1.
        assertCode("b0", ABSORBED, harness.apply("b0", update(0, 1, 0, 1, NO_EXPONENT, 0, 8, 8)));
        assertCode("b1", ABSORBED, harness.apply("b1", update(1, 1, 0, 1, NO_EXPONENT, 0, 16, 16)));

        assertCode("a stale copy of a0 must not start a new round", STALE, harness.apply("stale a0", a0));
        assertCode("worker 2 retransmits a2", SHADOW_RESULT, harness.apply("a2 again", a2));
        assertResult("worker 2 gets the result", harness.result, 0, FLAG_RETRANSMIT, 0, NO_EXPONENT, 0, 7, 7);
    }

    /**
     * Worse than the deadlock above: the stale update also clears its sender's seen bit in the version
     * the sender is working on, so the sender's retransmission of its current chunk is absorbed a
     * second time and completes the chunk without the other worker: a wrong sum under the right chunk
     * sequence, which no worker can detect. Found by the randomized schedule with
     * {@code -Dswitchml.test.unorderedUplink=true}.
     */
    @Test
    void shouldNotCountRetransmissionTwiceAfterStaleUpdate()
    {
        final Harness harness = new Harness(2, 1, 1);
        final DataHeaderFlyweight a0 = update(0, 0, 0, 0, NO_EXPONENT, 0, 1);
        final DataHeaderFlyweight b0 = update(0, 1, 0, 1, NO_EXPONENT, 0, 10);
        assertCode("a0", ABSORBED, harness.apply("a0", a0));
        assertCode("a1", COMPLETED, harness.apply("a1", update(1, 0, 0, 0, NO_EXPONENT, 0, 2)));
        assertCode("b0", ABSORBED, harness.apply("b0", b0));
        assertCode("stale a0", STALE, harness.apply("stale a0", a0));
        assertCode("retransmission of b0", DUPLICATE, harness.apply("b0 again", b0));
        assertCode("b1", COMPLETED, harness.apply("b1", update(1, 1, 0, 1, NO_EXPONENT, 0, 100)));
        assertResult("b", harness.result, 0, FLAG_POOL_VERSION, 1, NO_EXPONENT, 0, 110);
    }

    @Test
    void shouldAggregateBitExactUnderRandomLossDuplicationReorderingAndSpuriousTimeouts()
    {
        runSchedules(Boolean.getBoolean(UNORDERED_UPLINK_PROPERTY));
    }

    /**
     * The same schedules with every uplink packet reordered freely, so late copies of earlier rounds
     * reach the pool: they must come back STALE and leave the sums exact.
     */
    @Test
    void shouldAggregateBitExactWhenStaleUpdatesArriveAfterTheirRound()
    {
        runSchedules(true);
    }

    private static void runSchedules(final boolean unorderedUplink)
    {
        final String replay = System.getProperty(SEED_PROPERTY);
        if (replay != null && !replay.isEmpty())
        {
            runSchedule(Long.parseLong(replay), unorderedUplink);
            return;
        }

        final SplittableRandom seeds = new SplittableRandom(System.nanoTime());
        for (int i = 0; i < RANDOM_SCHEDULES; i++)
        {
            final long draw = seeds.nextLong() >>> 8;
            final long seed = draw - draw % WORLD_SIZES.length + i % WORLD_SIZES.length;
            runSchedule(seed, unorderedUplink);
        }
    }

    private static void runSchedule(final long seed, final boolean unorderedUplink)
    {
        final Simulation simulation = new Simulation(seed, unorderedUplink);
        try
        {
            simulation.run();
        }
        catch (final AssertionError | RuntimeException ex)
        {
            throw new AssertionError(
                "seed=" + seed + " (replay with -D" + SEED_PROPERTY + "=" + seed + ") " + simulation + ": " +
                ex.getMessage(), ex);
        }
    }

    /**
     * n workers running Algorithm 4 over several tensors back to back, one {@link SlotPool}, and a
     * network driven by one seeded generator. Updates of one worker to one slot stay in order (packets
     * of one round may be duplicated, and rounds never overtake each other, as on one path); all other
     * updates and all results are delivered in random order. A {@link Round} per chunk is the
     * reference model the pool's return codes are checked against.
     */
    private static final class Simulation
    {
        private final long seed;
        private final boolean unorderedUplink;
        private final SplittableRandom random;
        private final int n;
        private final int s;
        private final int k;
        private final int[] lengths;
        private final int[] chunkBase;
        private final int[] chunkTensor;
        private final int[] chunkIndex;
        private final int[][] expectedSums;
        private final double upLoss;
        private final double downLoss;
        private final double duplicateRate;
        private final double timeoutRate;
        private final byte elementType;

        private final SlotPool pool;
        private final UnsafeBuffer resultBuffer;
        private final DataHeaderFlyweight resultHeader = new DataHeaderFlyweight();
        private final DataHeaderFlyweight updateHeader = new DataHeaderFlyweight();
        private final ArrayList<ArrayDeque<byte[]>> uplink = new ArrayList<>();
        private final ArrayList<byte[]> downlinkPackets = new ArrayList<>();
        private final ArrayList<Worker> downlinkTargets = new ArrayList<>();
        private final Round[] rounds;
        private final Worker[] workers;
        private final long[] codeCounts = new long[6];
        private int uplinkPackets;
        private int workersDone;
        private long step;
        private long lastProgressStep;

        Simulation(final long seed, final boolean unorderedUplink)
        {
            this.seed = seed;
            this.unorderedUplink = unorderedUplink;
            random = new SplittableRandom(seed);
            n = WORLD_SIZES[(int)Math.floorMod(seed, (long)WORLD_SIZES.length)];
            s = 1 + random.nextInt(8);
            k = 1 + random.nextInt(16);
            final int tensorCount = 1 + random.nextInt(4);
            lengths = new int[tensorCount];
            chunkBase = new int[tensorCount + 1];
            for (int t = 0; t < tensorCount; t++)
            {
                final int window = k * s;
                lengths[t] = switch (random.nextInt(3))
                {
                    case 0 -> window > 1 ? 1 + random.nextInt(window - 1) : 1;
                    case 1 -> window * (4 + random.nextInt(30)) + random.nextInt(k);
                    default -> k * (1 + random.nextInt(3 * s));
                };
                chunkBase[t + 1] = chunkBase[t] + (lengths[t] + k - 1) / k;
            }
            final int totalChunks = chunkBase[tensorCount];
            chunkTensor = new int[totalChunks];
            chunkIndex = new int[totalChunks];
            rounds = new Round[totalChunks];
            for (int t = 0; t < tensorCount; t++)
            {
                for (int sequence = chunkBase[t]; sequence < chunkBase[t + 1]; sequence++)
                {
                    chunkTensor[sequence] = t;
                    chunkIndex[sequence] = sequence - chunkBase[t];
                    rounds[sequence] = new Round(n);
                }
            }

            upLoss = lossRate();
            downLoss = lossRate();
            duplicateRate = random.nextInt(4) == 0 ? 0.0 : random.nextDouble() * 0.2;
            timeoutRate = 0.001 + random.nextDouble() * 0.05;
            elementType = random.nextBoolean() ? ElementType.INT32 : ElementType.FLOAT32;

            workers = new Worker[n];
            expectedSums = new int[tensorCount][];
            for (int t = 0; t < tensorCount; t++)
            {
                expectedSums[t] = new int[lengths[t]];
            }
            for (int rank = 0; rank < n; rank++)
            {
                final int[][] tensors = new int[tensorCount][];
                for (int t = 0; t < tensorCount; t++)
                {
                    tensors[t] = new int[lengths[t]];
                    for (int e = 0; e < lengths[t]; e++)
                    {
                        final int value = random.nextInt();
                        tensors[t][e] = value;
                        expectedSums[t][e] += value;
                    }
                }
                workers[rank] = new Worker(rank, tensors);
            }

            pool = new SlotPool(n, s, k);
            resultBuffer = new UnsafeBuffer(new byte[packetLength(k)]);
            resultHeader.wrap(resultBuffer, 0);
            final int queues = unorderedUplink ? 1 : n * s;
            for (int q = 0; q < queues; q++)
            {
                uplink.add(new ArrayDeque<>());
            }
        }

        private double lossRate()
        {
            return random.nextInt(5) == 0 ? 0.0 : random.nextDouble() * 0.3;
        }

        void run()
        {
            for (final Worker worker : workers)
            {
                worker.startTensor();
            }

            while (workersDone < n)
            {
                if (++step - lastProgressStep > MAX_STEPS_WITHOUT_PROGRESS)
                {
                    fail("no worker received a new result for " + MAX_STEPS_WITHOUT_PROGRESS + " steps: " + progress());
                }
                final int inFlight = uplinkPackets + downlinkPackets.size();
                if (inFlight == 0 || random.nextDouble() < timeoutRate)
                {
                    fireTimeout();
                }
                else if (random.nextInt(inFlight) < uplinkPackets)
                {
                    deliverUpdate();
                }
                else
                {
                    deliverResult();
                }
            }

            // Stragglers still in flight must be harmless too.
            while (uplinkPackets + downlinkPackets.size() > 0)
            {
                step++;
                if (random.nextInt(uplinkPackets + downlinkPackets.size()) < uplinkPackets)
                {
                    deliverUpdate();
                }
                else
                {
                    deliverResult();
                }
            }

            assertEquals(0, codeCounts[MISMATCH], "MISMATCH in a correct protocol run: " + progress());
            for (int sequence = 0; sequence < rounds.length; sequence++)
            {
                assertTrue(rounds[sequence].completed, "chunk " + sequence + " never completed");
            }
            for (final Worker worker : workers)
            {
                for (int t = 0; t < lengths.length; t++)
                {
                    assertArrayEquals(
                        expectedSums[t], worker.results[t], "worker " + worker.rank + " tensor " + t + " sum");
                }
            }
        }

        private void fireTimeout()
        {
            final int start = random.nextInt(n);
            for (int i = 0; i < n; i++)
            {
                final Worker worker = workers[(start + i) % n];
                if (worker.outstandingCount > 0)
                {
                    worker.onTimeout();
                    return;
                }
            }
        }

        private void sendUpdate(final int rank, final int slot, final byte[] packet)
        {
            if (random.nextDouble() < upLoss)
            {
                return;
            }
            final ArrayDeque<byte[]> queue = uplink.get(unorderedUplink ? 0 : rank * s + slot);
            queue.add(packet);
            uplinkPackets++;
            if (random.nextDouble() < duplicateRate)
            {
                queue.add(packet);
                uplinkPackets++;
            }
        }

        private void sendResult(final Worker target, final int length)
        {
            if (random.nextDouble() < downLoss)
            {
                return;
            }
            final byte[] packet = new byte[length];
            resultBuffer.getBytes(0, packet);
            downlinkPackets.add(packet);
            downlinkTargets.add(target);
            if (random.nextDouble() < duplicateRate)
            {
                downlinkPackets.add(packet.clone());
                downlinkTargets.add(target);
            }
        }

        private void deliverUpdate()
        {
            final byte[] packet;
            if (unorderedUplink)
            {
                final ArrayDeque<byte[]> bag = uplink.get(0);
                final int pick = random.nextInt(bag.size());
                for (int i = 0; i < pick; i++)
                {
                    bag.add(bag.poll());
                }
                packet = bag.poll();
            }
            else
            {
                int q = random.nextInt(uplink.size());
                while (uplink.get(q).isEmpty())
                {
                    q = (q + 1) % uplink.size();
                }
                packet = uplink.get(q).poll();
            }
            uplinkPackets--;

            updateHeader.wrap(new UnsafeBuffer(packet), 0);
            final int rank = updateHeader.workerRank();
            final int sequence = (int)updateHeader.chunkSequence();
            final int version = updateHeader.poolVersion();
            final Round round = rounds[sequence];
            final String what = "step " + step + ": update rank " + rank + " chunk " + sequence + " version " + version;

            final int code = pool.onUpdate(updateHeader, resultBuffer, 0, step);
            codeCounts[code]++;
            switch (code)
            {
                case ABSORBED ->
                {
                    round.absorb(rank, what);
                    assertTrue(round.absorbedCount < n, what + ": ABSORBED although every worker contributed");
                }
                case COMPLETED ->
                {
                    round.absorb(rank, what);
                    assertEquals(n, round.absorbedCount, what + ": COMPLETED before every worker contributed");
                    round.completed = true;
                    checkResult(what, sequence, version, 0);
                    final int length = packetLength(resultHeader.elementCount());
                    for (final Worker worker : workers)
                    {
                        sendResult(worker, length);
                    }
                }
                case SHADOW_RESULT ->
                {
                    assertTrue(round.completed, what + ": SHADOW_RESULT for an incomplete chunk");
                    assertTrue(round.absorbed[rank], what + ": SHADOW_RESULT to a worker that did not contribute");
                    checkResult(what, sequence, version, FLAG_RETRANSMIT);
                    sendResult(workers[rank], packetLength(resultHeader.elementCount()));
                }
                case DUPLICATE ->
                {
                    assertTrue(round.absorbed[rank], what + ": DUPLICATE of an update never absorbed");
                    assertTrue(unorderedUplink || !round.completed, what + ": DUPLICATE for a completed chunk");
                }
                case MISMATCH -> fail(what + ": MISMATCH in a correct protocol run: " + progress());
                case STALE -> assertTrue(unorderedUplink, what + ": STALE with in-order uplinks: " + progress());
                default -> fail(what + ": unknown code " + code);
            }
        }

        private void checkResult(final String what, final int sequence, final int version, final int retransmit)
        {
            final int t = chunkTensor[sequence];
            final int offset = chunkIndex[sequence] * k;
            final int count = Math.min(k, lengths[t] - offset);
            assertEquals(TYPE_RESULT, resultHeader.type(), what + ": type");
            assertEquals(elementType, resultHeader.elementType(), what + ": element type");
            assertEquals(
                DropReason.NONE, DataHeaderFlyweight.validate(resultBuffer, 0, packetLength(count)), what + ": valid");
            assertEquals(version | retransmit, resultHeader.flags(), what + ": flags");
            assertEquals(chunkIndex[sequence] % s, resultHeader.slotIndex(), what + ": slot");
            assertEquals(sequence, resultHeader.chunkSequence(), what + ": sequence");
            assertEquals(count, resultHeader.elementCount(), what + ": element count");
            assertEquals(scaleOf(sequence), resultHeader.scaleExponent(), what + ": scale exponent");
            assertEquals(maxLookaheadOf(sequence), resultHeader.lookaheadExponent(), what + ": look-ahead exponent");
            for (int i = 0; i < count; i++)
            {
                if (expectedSums[t][offset + i] != resultHeader.lane(i))
                {
                    assertEquals(expectedSums[t][offset + i], resultHeader.lane(i), what + ": lane " + i);
                }
            }
        }

        private void deliverResult()
        {
            final int pick = random.nextInt(downlinkPackets.size());
            final int last = downlinkPackets.size() - 1;
            final byte[] packet = downlinkPackets.get(pick);
            final Worker target = downlinkTargets.get(pick);
            downlinkPackets.set(pick, downlinkPackets.get(last));
            downlinkTargets.set(pick, downlinkTargets.get(last));
            downlinkPackets.remove(last);
            downlinkTargets.remove(last);
            target.onResult(packet);
        }

        private short scaleOf(final int sequence)
        {
            if (elementType == ElementType.INT32)
            {
                return NO_EXPONENT;
            }
            final long h = mix(seed ^ (sequence * 0x9E3779B97F4A7C15L));
            return (h & 7) == 0 ? NO_EXPONENT : (short)((h >>> 8) % 61 - 30);
        }

        private short lookaheadOf(final int rank, final int sequence)
        {
            if (elementType == ElementType.INT32)
            {
                return NO_EXPONENT;
            }
            final long h = mix(seed + rank * 0xC2B2AE3D27D4EB4FL + sequence * 0x165667B19E3779F9L);
            return (h & 7) == 0 ? NO_EXPONENT : (short)((h >>> 8) % 61 - 30);
        }

        private short maxLookaheadOf(final int sequence)
        {
            short max = Short.MIN_VALUE;
            for (int rank = 0; rank < n; rank++)
            {
                max = (short)Math.max(max, lookaheadOf(rank, sequence));
            }
            return max;
        }

        private String progress()
        {
            final StringBuilder sb = new StringBuilder("step=").append(step)
                .append(" absorbed=").append(codeCounts[ABSORBED])
                .append(" completed=").append(codeCounts[COMPLETED])
                .append(" shadow=").append(codeCounts[SHADOW_RESULT])
                .append(" duplicate=").append(codeCounts[DUPLICATE])
                .append(" mismatch=").append(codeCounts[MISMATCH])
                .append(" workers(tensor/done chunks)=");
            for (final Worker worker : workers)
            {
                sb.append(worker.tensor).append('/').append(worker.chunksDone).append(' ');
            }
            return sb.toString();
        }

        @Override
        public String toString()
        {
            return "n=" + n + " s=" + s + " k=" + k + " " + ElementType.name(elementType) +
                " lengths=" + Arrays.toString(lengths) + " upLoss=" + upLoss + " downLoss=" + downLoss +
                " duplicateRate=" + duplicateRate +
                " timeoutRate=" + timeoutRate + " unorderedUplink=" + unorderedUplink;
        }

        /**
         * Algorithm 4: chunk j of tensor t goes to slot j mod s; a slot's version flips each time the
         * worker reuses it, across tensors too; a timeout resends the same packet.
         */
        private final class Worker
        {
            private final int rank;
            private final int[][] tensors;
            private final int[][] results;
            private final boolean[][] received;
            private final int[] nextVersion = new int[s];
            private final byte[][] outstanding = new byte[s][];
            private final int[] outstandingSequence = new int[s];
            private int outstandingCount;
            private int tensor;
            private int chunksDone;

            Worker(final int rank, final int[][] tensors)
            {
                this.rank = rank;
                this.tensors = tensors;
                results = new int[tensors.length][];
                received = new boolean[tensors.length][];
                for (int t = 0; t < tensors.length; t++)
                {
                    results[t] = new int[tensors[t].length];
                    received[t] = new boolean[chunkBase[t + 1] - chunkBase[t]];
                }
            }

            void startTensor()
            {
                final int chunks = chunkBase[tensor + 1] - chunkBase[tensor];
                for (int j = 0; j < Math.min(s, chunks); j++)
                {
                    sendChunk(j);
                }
            }

            private void sendChunk(final int j)
            {
                final int slot = j % s;
                final int sequence = chunkBase[tensor] + j;
                final int offset = j * k;
                final int count = Math.min(k, lengths[tensor] - offset);
                final byte[] packet = new byte[packetLength(count)];
                final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(packet), 0);
                header.writeHeader(
                    TYPE_UPDATE, JOB_ID, rank, nextVersion[slot], elementType, slot, sequence, count,
                    scaleOf(sequence), lookaheadOf(rank, sequence));
                for (int i = 0; i < count; i++)
                {
                    header.lane(i, tensors[tensor][offset + i]);
                }
                assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(header.buffer(), 0, packet.length));

                assertNull(outstanding[slot], "worker " + rank + " reuses slot " + slot + " too early");
                outstanding[slot] = packet;
                outstandingSequence[slot] = sequence;
                outstandingCount++;
                sendUpdate(rank, slot, packet);
            }

            void onTimeout()
            {
                int slot = random.nextInt(s);
                while (outstanding[slot] == null)
                {
                    slot = (slot + 1) % s;
                }
                byte[] packet = outstanding[slot];
                if (random.nextBoolean())
                {
                    packet = packet.clone();
                    packet[DataHeaderFlyweight.FLAGS_OFFSET] |= (byte)FLAG_RETRANSMIT;
                }
                sendUpdate(rank, slot, packet);
            }

            void onResult(final byte[] packet)
            {
                final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(new UnsafeBuffer(packet), 0);
                final int slot = header.slotIndex();
                final int sequence = (int)header.chunkSequence();
                if (outstanding[slot] == null || outstandingSequence[slot] != sequence)
                {
                    return;
                }
                final String what = "step " + step + ": worker " + rank + " result chunk " + sequence;
                assertEquals(nextVersion[slot], header.poolVersion(), what + ": version");
                assertEquals(maxLookaheadOf(sequence), header.lookaheadExponent(), what + ": look-ahead exponent");

                final int j = chunkIndex[sequence];
                final int offset = j * k;
                final int count = header.elementCount();
                assertEquals(Math.min(k, lengths[tensor] - offset), count, what + ": element count");
                for (int i = 0; i < count; i++)
                {
                    results[tensor][offset + i] = header.lane(i);
                }
                assertFalse(received[tensor][j], what + ": received twice");
                received[tensor][j] = true;
                lastProgressStep = step;
                outstanding[slot] = null;
                outstandingCount--;
                nextVersion[slot] ^= 1;
                chunksDone++;

                final int chunks = chunkBase[tensor + 1] - chunkBase[tensor];
                if (j + s < chunks)
                {
                    sendChunk(j + s);
                }
                else if (chunksDone == chunks)
                {
                    tensor++;
                    chunksDone = 0;
                    if (tensor < lengths.length)
                    {
                        startTensor();
                    }
                    else
                    {
                        workersDone++;
                    }
                }
            }
        }
    }

    /**
     * Reference model of one chunk: which workers the pool absorbed, and whether it completed.
     */
    private static final class Round
    {
        private final boolean[] absorbed;
        private int absorbedCount;
        private boolean completed;

        Round(final int n)
        {
            absorbed = new boolean[n];
        }

        void absorb(final int rank, final String what)
        {
            assertFalse(completed, what + ": absorbed into a completed chunk");
            assertFalse(absorbed[rank], what + ": absorbed twice");
            absorbed[rank] = true;
            absorbedCount++;
        }
    }

    /**
     * A pool with a result buffer at a non-zero offset, filled with a sentinel before each update so
     * that writes outside the result packet, or any write when no result is due, are caught.
     */
    private static final class Harness
    {
        private final SlotPool pool;
        private final UnsafeBuffer resultBuffer;
        private final DataHeaderFlyweight result = new DataHeaderFlyweight();
        private long nowNs;

        Harness(final int n, final int s, final int k)
        {
            pool = new SlotPool(n, s, k);
            resultBuffer = new UnsafeBuffer(new byte[RESULT_OFFSET + packetLength(k) + GUARD_BYTES]);
            result.wrap(resultBuffer, RESULT_OFFSET);
        }

        int probe(final String step, final DataHeaderFlyweight update)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.HEADER_LENGTH]);
            buffer.putBytes(0, update.buffer(), update.offset(), DataHeaderFlyweight.HEADER_LENGTH);
            buffer.putByte(DataHeaderFlyweight.TYPE_OFFSET, DataHeaderFlyweight.TYPE_PROBE);
            buffer.putShort(DataHeaderFlyweight.ELEMENT_COUNT_OFFSET, (short)0, java.nio.ByteOrder.BIG_ENDIAN);
            assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, buffer.capacity()), step + ": probe");
            final DataHeaderFlyweight probe = new DataHeaderFlyweight().wrap(buffer, 0);
            resultBuffer.setMemory(0, resultBuffer.capacity(), SENTINEL);
            final int code = pool.onProbe(probe, resultBuffer, RESULT_OFFSET);
            final int end = code == SHADOW_RESULT ? RESULT_OFFSET + SlotPool.resultLength(result) :
                code == NACK || code == PROBE_PENDING ? RESULT_OFFSET + DataHeaderFlyweight.HEADER_LENGTH : RESULT_OFFSET;
            for (int i = 0; i < resultBuffer.capacity(); i++)
            {
                if ((i < RESULT_OFFSET || i >= end) && resultBuffer.getByte(i) != SENTINEL)
                {
                    fail(step + ": result buffer byte " + i + " written although the code was " + codeName(code));
                }
            }
            if (code == NACK || code == PROBE_PENDING)
            {
                final String what = code == NACK ? "NACK" : "PENDING";
                assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(resultBuffer, RESULT_OFFSET,
                    DataHeaderFlyweight.HEADER_LENGTH), step + ": " + what + " is well formed");
                final byte type = code == NACK ? DataHeaderFlyweight.TYPE_NACK : DataHeaderFlyweight.TYPE_PENDING;
                assertEquals(type, result.type(), step + ": " + what + " type");
                assertEquals(update.workerRank(), result.workerRank(), step + ": " + what + " names the prober");
                assertEquals(update.slotIndex(), result.slotIndex(), step + ": " + what + " slot");
                assertEquals(update.chunkSequence(), result.chunkSequence(), step + ": " + what + " chunk");
                assertEquals(update.flags() & FLAG_POOL_VERSION, result.flags() & FLAG_POOL_VERSION, step + ": version");
                assertEquals(update.isExponentOnly(), result.isExponentOnly(), step + ": " + what + " round kind");
                assertEquals(0, result.elementCount(), step + ": " + what + " is header only");
                for (int i = 0; i < DataHeaderFlyweight.HEADER_LENGTH; i++)
                {
                    final boolean macByte = i >= DataHeaderFlyweight.MAC_OFFSET && i < DataHeaderFlyweight.MAC_OFFSET + 8;
                    final byte expected = i == DataHeaderFlyweight.TYPE_OFFSET ? type : macByte ? 0 :
                        buffer.getByte(i);
                    assertEquals(expected, resultBuffer.getByte(RESULT_OFFSET + i),
                        step + ": " + what + " is the probe's header but its type and a zero MAC, byte " + i);
                }
            }
            return code;
        }

        int apply(final String step, final DataHeaderFlyweight update)
        {
            resultBuffer.setMemory(0, resultBuffer.capacity(), SENTINEL);
            final byte[] before = new byte[update.buffer().capacity()];
            update.buffer().getBytes(0, before);

            final int code = pool.onUpdate(update, resultBuffer, RESULT_OFFSET, nowNs);

            final byte[] after = new byte[before.length];
            update.buffer().getBytes(0, after);
            assertArrayEquals(before, after, step + ": the update packet was modified");
            final boolean hasResult = code == COMPLETED || code == SHADOW_RESULT;
            if (hasResult)
            {
                assertEquals(update.elementType(), result.elementType(), step + ": result element type");
                assertEquals(update.jobId(), result.jobId(), step + ": result job id");
            }
            final int end = hasResult ? RESULT_OFFSET + SlotPool.resultLength(result) : RESULT_OFFSET;
            for (int i = 0; i < resultBuffer.capacity(); i++)
            {
                if ((i < RESULT_OFFSET || i >= end) && resultBuffer.getByte(i) != SENTINEL)
                {
                    fail(step + ": result buffer byte " + i + " written although the code was " + codeName(code));
                }
            }
            return code;
        }
    }

    /**
     * A float32 update: lanes are block fixed point, exponents are carried.
     */
    /**
     * Probes (not in the paper) over the appendix's scenario: each answer follows from the slot's state
     * alone, and no probe changes it.
     */
    @Test
    void probesAreAnsweredFromTheSlotStateWithoutChangingIt()
    {
        final int x = 1;
        final Harness harness = new Harness(3, 4, 4);
        final DataHeaderFlyweight a1 = update(W1, 0, x, x, 7, 3, 10, 20, 30, 40);
        final DataHeaderFlyweight a2 = update(W2, 0, x, x, 7, 5, 1, 2, 3, 4);
        final DataHeaderFlyweight a3 = update(W3, 0, x, x, 7, -1, 100, 200, 300, 400);
        final DataHeaderFlyweight b1 = update(W1, 1, x, x + 4, 5, 0, 1, 1, 1, 1);

        assertCode("nothing arrived yet: resend", NACK, harness.probe("p0", a1));
        assertCode("w1's update arrives", ABSORBED, harness.apply("u1", a1));
        assertCode("w1 has contributed: wait", PROBE_PENDING, harness.probe("p1", a1));
        assertCode("w2's was lost: resend", NACK, harness.probe("p2", a2));
        assertCode("the probes changed nothing: w2 then w3", ABSORBED, harness.apply("u2", a2));
        assertCode("w3 completes the slot", COMPLETED, harness.apply("u3", a3));
        assertCode("w1 lost the result: the shadow copy answers", SHADOW_RESULT, harness.probe("p3", a1));
        assertResult("p3: result by unicast", harness.result, x, FLAG_RETRANSMIT, x, 7, 5, 111, 222, 333, 444);
        assertEquals(W1, harness.result.workerRank(), "p3: to the prober");
        assertCode("w1 moves on to version 1", ABSORBED, harness.apply("u4", b1));
        assertCode("a late probe of version 0's chunk still gets the shadow copy", SHADOW_RESULT, harness.probe("p4", a2));
        assertCode("version 1 has w1", PROBE_PENDING, harness.probe("p5", b1));
        assertCode("w3 has not sent chunk x + s to version 1: resend", NACK,
            harness.probe("p6", update(W3, 1, x, x + 4, 5, 0, 1, 1, 1, 1)));
        assertCode("a probe for a chunk older than version 1 holds is stale", STALE,
            harness.probe("p7", update(W3, 1, x, x, 7, 3, 1, 1, 1, 1)));
        assertCode("and the probes left version 1 waiting for w2 and w3", ABSORBED,
            harness.apply("u5", update(W2, 1, x, x + 4, 5, 0, 2, 2, 2, 2)));
        assertCode("w3 completes version 1", COMPLETED, harness.apply("u6", update(W3, 1, x, x + 4, 5, 0, 3, 3, 3, 3)));
        assertResult("u6: version 1's sum", harness.result, x, FLAG_POOL_VERSION, x + 4, 5, 0, 6, 6, 6, 6);
    }

    private static DataHeaderFlyweight update(
        final int rank,
        final int flags,
        final int slot,
        final long sequence,
        final int scaleExponent,
        final int lookaheadExponent,
        final int... lanes)
    {
        return update(ElementType.FLOAT32, rank, flags, slot, sequence, scaleExponent, lookaheadExponent, lanes);
    }

    /**
     * An int32 update: no exponents on the wire.
     */
    private static DataHeaderFlyweight intUpdate(
        final int rank, final int flags, final int slot, final long sequence, final int... lanes)
    {
        return update(ElementType.INT32, rank, flags, slot, sequence, NO_EXPONENT, NO_EXPONENT, lanes);
    }

    private static DataHeaderFlyweight update(
        final byte elementType,
        final int rank,
        final int flags,
        final int slot,
        final long sequence,
        final int scaleExponent,
        final int lookaheadExponent,
        final int... lanes)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[packetLength(lanes.length)]);
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
        header.writeHeader(
            TYPE_UPDATE, JOB_ID, rank, flags, elementType, slot, sequence, lanes.length, scaleExponent,
            lookaheadExponent);
        for (int i = 0; i < lanes.length; i++)
        {
            header.lane(i, lanes[i]);
        }
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, buffer.capacity()), "test packet");
        return header;
    }

    /**
     * A float16 or bfloat16 update: 2-byte lanes holding the values, the block exponent in the header.
     */
    private static DataHeaderFlyweight halfUpdate(
        final byte type,
        final int rank,
        final int flags,
        final int slot,
        final long sequence,
        final int scaleExponent,
        final short[] lanes)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[DataHeaderFlyweight.packetLength(type, lanes.length)]);
        final DataHeaderFlyweight header = new DataHeaderFlyweight().wrap(buffer, 0);
        header.writeHeader(
            TYPE_UPDATE, JOB_ID, rank, flags, type, slot, sequence, lanes.length, scaleExponent, NO_EXPONENT,
            DataHeaderFlyweight.tensorCheckOf(3));
        for (int i = 0; i < lanes.length; i++)
        {
            header.halfLane(i, lanes[i]);
        }
        assertEquals(DropReason.NONE, DataHeaderFlyweight.validate(buffer, 0, buffer.capacity()), "test packet");
        return header;
    }

    private static DataHeaderFlyweight exponentOnly(
        final int rank,
        final int version,
        final int slot,
        final long sequence,
        final int scaleExponent,
        final int lookaheadExponent)
    {
        return update(rank, version | FLAG_EXPONENT_ONLY, slot, sequence, scaleExponent, lookaheadExponent);
    }

    private static void assertResult(
        final String step,
        final DataHeaderFlyweight result,
        final int slot,
        final int flags,
        final long sequence,
        final int scaleExponent,
        final int lookaheadExponent,
        final int... lanes)
    {
        assertEquals(
            DropReason.NONE,
            DataHeaderFlyweight.validate(result.buffer(), result.offset(), packetLength(lanes.length)),
            step + ": result packet is well formed");
        assertEquals(TYPE_RESULT, result.type(), step + ": type");
        assertEquals(JOB_ID, result.jobId(), step + ": job id");
        assertEquals(flags, result.flags(), step + ": flags (version, exponent-only, retransmit)");
        assertEquals(slot, result.slotIndex(), step + ": slot");
        assertEquals(sequence, result.chunkSequence(), step + ": chunk sequence");
        assertEquals(lanes.length, result.elementCount(), step + ": element count");
        assertEquals((short)scaleExponent, result.scaleExponent(), step + ": scale exponent");
        assertEquals((short)lookaheadExponent, result.lookaheadExponent(), step + ": max look-ahead exponent");
        assertEquals(0L, result.mac(), step + ": MAC");
        final int[] actual = new int[lanes.length];
        for (int i = 0; i < lanes.length; i++)
        {
            actual[i] = result.lane(i);
        }
        assertArrayEquals(lanes, actual, step + ": lanes");
    }

    private static void assertCode(final String step, final int expected, final int actual)
    {
        assertEquals(codeName(expected), codeName(actual), step);
    }

    private static String codeName(final int code)
    {
        return switch (code)
        {
            case ABSORBED -> "ABSORBED";
            case COMPLETED -> "COMPLETED";
            case SHADOW_RESULT -> "SHADOW_RESULT";
            case DUPLICATE -> "DUPLICATE";
            case MISMATCH -> "MISMATCH";
            case STALE -> "STALE";
            case PROBE_PENDING -> "PROBE_PENDING";
            case NACK -> "NACK";
            default -> "UNKNOWN(" + code + ")";
        };
    }

    private static int[] shuffledRanks(final int n, final SplittableRandom random)
    {
        final int[] ranks = new int[n];
        for (int i = 0; i < n; i++)
        {
            ranks[i] = i;
        }
        for (int i = n - 1; i > 0; i--)
        {
            final int j = random.nextInt(i + 1);
            final int tmp = ranks[i];
            ranks[i] = ranks[j];
            ranks[j] = tmp;
        }
        return ranks;
    }

    private static long mix(final long z)
    {
        long x = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
        return x ^ (x >>> 31);
    }
}
