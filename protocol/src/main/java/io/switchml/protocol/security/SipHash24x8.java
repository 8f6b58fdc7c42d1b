package io.switchml.protocol.security;

import io.switchml.protocol.DataHeaderFlyweight;
import jdk.incubator.vector.LongVector;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static io.switchml.protocol.security.SipHash24.FINAL_XOR;
import static io.switchml.protocol.security.SipHash24.INIT_V0;
import static io.switchml.protocol.security.SipHash24.INIT_V1;
import static io.switchml.protocol.security.SipHash24.INIT_V2;
import static io.switchml.protocol.security.SipHash24.INIT_V3;
import static jdk.incubator.vector.VectorOperators.ROL;
import static jdk.incubator.vector.VectorOperators.XOR;

/**
 * {@link PacketMac} of eight packets of one length at once: SipHash-2-4 with each of the four state words held in one
 * 512-bit vector of eight 64-bit lanes, lane j hashing packet j, through the JDK's Vector API
 * ({@code jdk.incubator.vector}, which the JIT turns into AVX-512 instructions, rotates included).
 * <p>
 * Why our own: no library offers a multi-message SipHash for the JVM, and the MAC is the largest part of a worker's
 * CPU per byte when it is on. One packet's SipHash is a chain of dependent 64-bit operations that keeps a core's
 * scalar units half idle (2.0-2.2 GB/s here); eight independent chains in vector lanes ran at 7.9 GB/s on the same
 * core (AMD EPYC with AVX-512, JDK 25).
 * <p>
 * The lanes need the packets' words side by side: eight words of each packet are loaded as one vector (eight
 * contiguous loads), and an 8 x 8 transpose of 64-bit words (three stages of two-vector selects, 24 in all) turns the
 * eight rows into eight columns, column x holding word w + x of every packet. Words past the last whole block of
 * eight, and the last word (0 to 7 trailing bytes and the length), are gathered one lane at a time. The MAC field
 * (word {@link DataHeaderFlyweight#MAC_OFFSET} / 8) is taken as zero, as {@link PacketMac#compute} takes it.
 * <p>
 * The SipRound is written out in each of the three loops (block, remaining words, finalization), as {@link SipHash24}
 * writes it out: a helper would have to hand back four vectors.
 * <p>
 * Only {@link PacketMacBatch} calls this class, and only once it has found the incubator module in the boot layer
 * (the JVM option {@code --add-modules=jdk.incubator.vector}) and a vector unit of 512 bits: without them the class is
 * never loaded. Addresses are native (off-heap) memory; nothing is allocated per call once compiled.
 */
final class SipHash24x8
{
    /** Packets hashed together. */
    static final int LANES = 8;
    /** Longs of scratch a call needs: v0..v3 of every lane, then a word of each. */
    static final int SCRATCH = 5 * LANES;
    private static final int V0 = 0;
    private static final int V1 = LANES;
    private static final int V2 = 2 * LANES;
    private static final int V3 = 3 * LANES;
    private static final int M = 4 * LANES;

    private static final VectorSpecies<Long> SPECIES = LongVector.SPECIES_512;
    private static final int MAC_WORD = DataHeaderFlyweight.MAC_OFFSET >>> 3;
    private static final MemorySegment MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfByte BYTE = ValueLayout.JAVA_BYTE;

    // transpose selectors: indexes 0..7 pick from the first vector, 8..15 from the second
    private static final LongVector EVEN_PAIRS = index(0, 8, 2, 10, 4, 12, 6, 14);
    private static final LongVector ODD_PAIRS = index(1, 9, 3, 11, 5, 13, 7, 15);
    private static final LongVector LOW_TWOS = index(0, 1, 8, 9, 4, 5, 12, 13);
    private static final LongVector HIGH_TWOS = index(2, 3, 10, 11, 6, 7, 14, 15);
    private static final LongVector LOW_FOURS = index(0, 1, 2, 3, 8, 9, 10, 11);
    private static final LongVector HIGH_FOURS = index(4, 5, 6, 7, 12, 13, 14, 15);

    private SipHash24x8()
    {
    }

    /**
     * @return whether this JVM runs 512-bit long vectors in hardware: {@code SPECIES_PREFERRED} is at least that wide.
     */
    static boolean hardwareSupported()
    {
        return LongVector.SPECIES_PREFERRED.vectorBitSize() >= SPECIES.vectorBitSize();
    }

    /**
     * The MACs of eight packets of one length.
     *
     * @param k0        key bytes 0..7 read little-endian.
     * @param k1        key bytes 8..15 read little-endian.
     * @param addresses native address of each packet, {@link #LANES} of them (repeat one to hash fewer).
     * @param length    of every packet, header included ({@link DataHeaderFlyweight#HEADER_LENGTH} at least).
     * @param macs      receives the MAC of packet j at index j.
     * @param scratch   {@link #SCRATCH} longs: the state between blocks, and the words gathered lane by lane.
     */
    static void hash(
        final long k0, final long k1, final long[] addresses, final int length, final long[] macs, final long[] scratch)
    {
        final int words = length >>> 3;
        LongVector.broadcast(SPECIES, k0 ^ INIT_V0).intoArray(scratch, V0);
        LongVector.broadcast(SPECIES, k1 ^ INIT_V1).intoArray(scratch, V1);
        LongVector.broadcast(SPECIES, k0 ^ INIT_V2).intoArray(scratch, V2);
        LongVector.broadcast(SPECIES, k1 ^ INIT_V3).intoArray(scratch, V3);
        int w = 0;
        for (; w + LANES <= words; w += LANES)
        {
            block(addresses, (long)w << 3, w == 0, scratch);
        }
        finish(addresses, w, words, length, macs, scratch);
    }

    /**
     * Absorb eight words of every packet, from byte {@code offset} on: the state comes from and goes back to the
     * scratch array. A method of its own, short enough for C2 to compile on its own early, instead of one compiled
     * twice over (on-stack replacement, then whole) while the interpreter runs it a hundred times slower.
     */
    private static void block(final long[] addresses, final long offset, final boolean first, final long[] scratch)
    {
        LongVector v0 = LongVector.fromArray(SPECIES, scratch, V0);
        LongVector v1 = LongVector.fromArray(SPECIES, scratch, V1);
        LongVector v2 = LongVector.fromArray(SPECIES, scratch, V2);
        LongVector v3 = LongVector.fromArray(SPECIES, scratch, V3);
        final LongVector r0 = row(addresses[0] + offset);
        final LongVector r1 = row(addresses[1] + offset);
        final LongVector r2 = row(addresses[2] + offset);
        final LongVector r3 = row(addresses[3] + offset);
        final LongVector r4 = row(addresses[4] + offset);
        final LongVector r5 = row(addresses[5] + offset);
        final LongVector r6 = row(addresses[6] + offset);
        final LongVector r7 = row(addresses[7] + offset);
        // pairs: t0 = r0[0] r1[0] r0[2] r1[2] ..., t1 = r0[1] r1[1] r0[3] r1[3] ...
        final LongVector t0 = EVEN_PAIRS.selectFrom(r0, r1);
        final LongVector t1 = ODD_PAIRS.selectFrom(r0, r1);
        final LongVector t2 = EVEN_PAIRS.selectFrom(r2, r3);
        final LongVector t3 = ODD_PAIRS.selectFrom(r2, r3);
        final LongVector t4 = EVEN_PAIRS.selectFrom(r4, r5);
        final LongVector t5 = ODD_PAIRS.selectFrom(r4, r5);
        final LongVector t6 = EVEN_PAIRS.selectFrom(r6, r7);
        final LongVector t7 = ODD_PAIRS.selectFrom(r6, r7);
        // fours: u0 = words 0 and 4 of rows 0..3, u2 = words 2 and 6, u1 = 1 and 5, u3 = 3 and 7; u4..u7 rows 4..7
        final LongVector u0 = LOW_TWOS.selectFrom(t0, t2);
        final LongVector u2 = HIGH_TWOS.selectFrom(t0, t2);
        final LongVector u1 = LOW_TWOS.selectFrom(t1, t3);
        final LongVector u3 = HIGH_TWOS.selectFrom(t1, t3);
        final LongVector u4 = LOW_TWOS.selectFrom(t4, t6);
        final LongVector u6 = HIGH_TWOS.selectFrom(t4, t6);
        final LongVector u5 = LOW_TWOS.selectFrom(t5, t7);
        final LongVector u7 = HIGH_TWOS.selectFrom(t5, t7);
        // columns: word x of the block of every packet; the MAC field (word 4 of the first block) taken as zero
        final LongVector c0 = LOW_FOURS.selectFrom(u0, u4);
        final LongVector c1 = LOW_FOURS.selectFrom(u1, u5);
        final LongVector c2 = LOW_FOURS.selectFrom(u2, u6);
        final LongVector c3 = LOW_FOURS.selectFrom(u3, u7);
        final LongVector c4 = first ? LongVector.zero(SPECIES) : HIGH_FOURS.selectFrom(u0, u4);
        final LongVector c5 = HIGH_FOURS.selectFrom(u1, u5);
        final LongVector c6 = HIGH_FOURS.selectFrom(u2, u6);
        final LongVector c7 = HIGH_FOURS.selectFrom(u3, u7);

        for (int x = 0; x < LANES; x++)
        {
            final LongVector m = switch (x)
            {
                case 0 -> c0;
                case 1 -> c1;
                case 2 -> c2;
                case 3 -> c3;
                case 4 -> c4;
                case 5 -> c5;
                case 6 -> c6;
                default -> c7;
            };
            v3 = v3.lanewise(XOR, m);
            for (int round = 0; round < 2; round++)
            {
                v0 = v0.add(v1);
                v1 = v1.lanewise(ROL, 13).lanewise(XOR, v0);
                v0 = v0.lanewise(ROL, 32);
                v2 = v2.add(v3);
                v3 = v3.lanewise(ROL, 16).lanewise(XOR, v2);
                v0 = v0.add(v3);
                v3 = v3.lanewise(ROL, 21).lanewise(XOR, v0);
                v2 = v2.add(v1);
                v1 = v1.lanewise(ROL, 17).lanewise(XOR, v2);
                v2 = v2.lanewise(ROL, 32);
            }
            v0 = v0.lanewise(XOR, m);
        }
        v0.intoArray(scratch, V0);
        v1.intoArray(scratch, V1);
        v2.intoArray(scratch, V2);
        v3.intoArray(scratch, V3);
    }

    /**
     * The words from {@code from} on, gathered a lane at a time (the last holding the trailing bytes and the length),
     * then finalization and the MACs.
     */
    private static void finish(
        final long[] addresses, final int from, final int words, final int length, final long[] macs, final long[] scratch)
    {
        LongVector v0 = LongVector.fromArray(SPECIES, scratch, V0);
        LongVector v1 = LongVector.fromArray(SPECIES, scratch, V1);
        LongVector v2 = LongVector.fromArray(SPECIES, scratch, V2);
        LongVector v3 = LongVector.fromArray(SPECIES, scratch, V3);
        for (int w = from; w <= words; w++)
        {
            final LongVector m;
            if (w == MAC_WORD)
            {
                m = LongVector.zero(SPECIES);
            }
            else
            {
                for (int j = 0; j < LANES; j++)
                {
                    scratch[M + j] = w < words ? MEMORY.get(WORD, addresses[j] + ((long)w << 3)) : last(addresses[j], w, length);
                }
                m = LongVector.fromArray(SPECIES, scratch, M);
            }
            v3 = v3.lanewise(XOR, m);
            for (int round = 0; round < 2; round++)
            {
                v0 = v0.add(v1);
                v1 = v1.lanewise(ROL, 13).lanewise(XOR, v0);
                v0 = v0.lanewise(ROL, 32);
                v2 = v2.add(v3);
                v3 = v3.lanewise(ROL, 16).lanewise(XOR, v2);
                v0 = v0.add(v3);
                v3 = v3.lanewise(ROL, 21).lanewise(XOR, v0);
                v2 = v2.add(v1);
                v1 = v1.lanewise(ROL, 17).lanewise(XOR, v2);
                v2 = v2.lanewise(ROL, 32);
            }
            v0 = v0.lanewise(XOR, m);
        }

        v2 = v2.lanewise(XOR, FINAL_XOR);
        for (int round = 0; round < 4; round++)
        {
            v0 = v0.add(v1);
            v1 = v1.lanewise(ROL, 13).lanewise(XOR, v0);
            v0 = v0.lanewise(ROL, 32);
            v2 = v2.add(v3);
            v3 = v3.lanewise(ROL, 16).lanewise(XOR, v2);
            v0 = v0.add(v3);
            v3 = v3.lanewise(ROL, 21).lanewise(XOR, v0);
            v2 = v2.add(v1);
            v1 = v1.lanewise(ROL, 17).lanewise(XOR, v2);
            v2 = v2.lanewise(ROL, 32);
        }
        v0.lanewise(XOR, v1).lanewise(XOR, v2).lanewise(XOR, v3).intoArray(macs, 0);
    }

    private static LongVector row(final long address)
    {
        return LongVector.fromMemorySegment(SPECIES, MEMORY, address, ByteOrder.LITTLE_ENDIAN);
    }

    /** SipHash's last word: the 0 to 7 bytes after the last whole word, and the length in the top byte. */
    private static long last(final long address, final int words, final int length)
    {
        long last = ((long)length) << 56;
        final long tail = address + ((long)words << 3);
        for (int i = (length & 7) - 1; i >= 0; i--)
        {
            last |= (MEMORY.get(BYTE, tail + i) & 0xFFL) << (i << 3);
        }
        return last;
    }

    private static LongVector index(final long... lanes)
    {
        return LongVector.fromArray(SPECIES, lanes, 0);
    }
}
