package io.switchml.protocol;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;

/**
 * Flyweight over a SwitchML v1 data packet: a fixed 40-byte header followed by the payload.
 * <p>
 * Every field has a fixed size and offset so that a switch pipeline (Tofino) can parse the header
 * without variable-length logic. All fields and payload lanes are in network byte order.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +-------------------------------+---------------+---------------+
 *  |         Magic 0x534D          |    Version    |     Type      |
 *  +-------------------------------+---------------+---------------+
 *  |                            Job Id                             |
 *  +-------------------------------+---------------+---------------+
 *  |          Worker Rank          |     Flags     | Element Type  |
 *  +-------------------------------+---------------+---------------+
 *  |                          Slot Index                           |
 *  +---------------------------------------------------------------+
 *  |                                                               |
 *  +                     Chunk Sequence Number                     +
 *  |                                                               |
 *  +-------------------------------+-------------------------------+
 *  |         Element Count         |     Check     |  Check Compl. |
 *  +-------------------------------+---------------+---------------+
 *  |        Scale Exponent         |     Look-ahead Exponent       |
 *  +-------------------------------+-------------------------------+
 *  |                                                               |
 *  +                  MAC (SipHash-2-4, 0 when off)                +
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |   Payload: Element Count lanes of 4 bytes (int32, float32)   ...
 *  |            or of 2 bytes (float16, bfloat16), no padding      |
 *  +---------------------------------------------------------------+
 * </pre>
 * <ul>
 *   <li><b>Type</b>: {@link #TYPE_UPDATE} from a worker, {@link #TYPE_RESULT} from the aggregator;
 *   {@link #TYPE_PROBE} from a worker, {@link #TYPE_NACK} and {@link #TYPE_PENDING} from the aggregator are
 *   header-only loss-recovery packets (not in the paper): a probe names the update the worker suspects lost
 *   (its slot, pool version, chunk and exponent-only flag) and asks what the aggregator has, and is answered by
 *   the result from the shadow copy when the slot is complete, by a NACK (the probe's header with type NACK:
 *   "resend that update") when the aggregator has not got the worker's update, and by a PENDING (the probe's
 *   header with type PENDING: "I hold your update; other workers have not sent theirs") when it has it and
 *   waits for other workers. A probe costs 40 bytes where resending a suspected update costs a full packet, and
 *   a PENDING tells a worker that waits for a slow peer that there is nothing to resend.</li>
 *   <li><b>Flags</b>: bit 0 is the pool version (shadow copy selector), bit 1 marks an exponent-only
 *   packet (no payload, used for the first look-ahead round of a tensor), bit 2 marks a
 *   retransmission (informational).</li>
 *   <li><b>Chunk Sequence Number</b>: position of the chunk in the job's stream; it must agree among
 *   all contributions to a slot version.</li>
 *   <li><b>Scale Exponent</b>: the block exponent m the payload was quantized with
 *   (f = (2^31-1)/(n*2^m)), within [-126, 128], or {@link #NO_EXPONENT} for integer data or an all-zero
 *   block.</li>
 *   <li><b>Look-ahead Exponent</b>: in an update, the sender's exponent of the next chunk that will use
 *   the same slot; in a result, the maximum of those over all workers. {@link #NO_EXPONENT} for an
 *   all-zero next chunk; {@link #UNKNOWN_EXPONENT} when the sender does not know the next chunk yet (its
 *   stream ran dry): being the largest value, it wins the maximum, and every worker then opens that chunk
 *   with an exponent-only round. {@link #NON_FINITE_EXPONENT} when the sender's next chunk holds a NaN or an
 *   infinity: above every block exponent and below {@link #UNKNOWN_EXPONENT}, it wins the maximum over finite
 *   chunks, so every worker learns that the chunk's sum is not finite; each then sends that chunk as zeros with
 *   {@link #NO_EXPONENT} as its scale (a lane cannot carry the value, and the aggregator needs no new rule) and
 *   writes NaN into the whole chunk of its result (Gloo's sum is not finite there either, though only at the
 *   elements concerned). Never a scale exponent. Always {@link #NO_EXPONENT} for integer data.</li>
 *   <li><b>Check</b> and <b>Check Complement</b>: in an update, an 8-bit digest c of the chunk's place in
 *   its tensor (tensor length, chunk index, reduce operation) and 255 - c; in a result, the maximum of
 *   each byte over the contributions. A result carries (c, 255 - c) exactly when every contribution
 *   carried c, so each worker sees on its own, from the result, whether the ranks put the same tensor at
 *   that point of the stream (see {@link #tensorCheckOf(int)}). A switch computes both with byte-wide max
 *   registers, like the look-ahead exponent. Not judged by {@link #validate}.</li>
 * </ul>
 * The payload is {@code elementCount} lanes with no padding: int32 and float32 lanes are 4 bytes
 * ({@code 4 * elementCount} bytes), float16 and bfloat16 lanes 2 bytes ({@code 2 * elementCount}),
 * all big-endian. {@link #MAX_ELEMENTS} is the same for every type.
 */
public final class DataHeaderFlyweight
{
    public static final short MAGIC = 0x534D;
    public static final byte CURRENT_VERSION = 1;

    public static final byte TYPE_UPDATE = 1;
    public static final byte TYPE_RESULT = 2;
    /** Header-only question from a worker: what does the aggregator have for this update of mine? */
    public static final byte TYPE_PROBE = 3;
    /** Header-only answer to a probe: the aggregator has not got the update; resend it. */
    public static final byte TYPE_NACK = 4;
    /**
     * Header-only answer to a probe: the aggregator holds the update and waits for other workers' updates to the
     * slot; nothing to resend (the result follows when they arrive).
     */
    public static final byte TYPE_PENDING = 5;

    public static final int FLAG_POOL_VERSION = 0x01;
    public static final int FLAG_EXPONENT_ONLY = 0x02;
    public static final int FLAG_RETRANSMIT = 0x04;
    public static final int KNOWN_FLAGS = FLAG_POOL_VERSION | FLAG_EXPONENT_ONLY | FLAG_RETRANSMIT;

    /** Exponent value meaning "none": an all-zero block or integer data. */
    public static final short NO_EXPONENT = Short.MIN_VALUE;
    /**
     * Look-ahead value meaning "the sender does not know the next chunk on this slot yet". It is the
     * largest short, so it survives the maximum and the result tells every worker to open that chunk
     * with an exponent-only round. Never a scale exponent.
     */
    public static final short UNKNOWN_EXPONENT = Short.MAX_VALUE;
    /**
     * Look-ahead value meaning "the sender's next chunk on this slot holds a NaN or an infinity". Above every block
     * exponent and below {@link #UNKNOWN_EXPONENT}, so the maximum keeps it over finite chunks' exponents and an
     * exponent-only round resolves it when another rank did not know the chunk yet. Never a scale exponent.
     */
    public static final short NON_FINITE_EXPONENT = Short.MAX_VALUE - 1;
    /** Smallest block exponent of a float32 chunk (subnormals). */
    public static final short MIN_EXPONENT = -126;
    /** Largest block exponent of a float32 chunk (values up to Float.MAX_VALUE &lt; 2^128). */
    public static final short MAX_EXPONENT = 128;

    public static final int MAGIC_OFFSET = 0;
    public static final int VERSION_OFFSET = 2;
    public static final int TYPE_OFFSET = 3;
    public static final int JOB_ID_OFFSET = 4;
    public static final int WORKER_RANK_OFFSET = 8;
    public static final int FLAGS_OFFSET = 10;
    public static final int ELEMENT_TYPE_OFFSET = 11;
    public static final int SLOT_INDEX_OFFSET = 12;
    public static final int CHUNK_SEQUENCE_OFFSET = 16;
    public static final int ELEMENT_COUNT_OFFSET = 24;
    /** Offset of the check byte; the check complement byte follows it. */
    public static final int TENSOR_CHECK_OFFSET = 26;
    public static final int SCALE_EXPONENT_OFFSET = 28;
    public static final int LOOKAHEAD_EXPONENT_OFFSET = 30;
    public static final int MAC_OFFSET = 32;
    public static final int HEADER_LENGTH = 40;
    public static final int PAYLOAD_OFFSET = HEADER_LENGTH;

    /** Bytes of an int32 or float32 lane on the wire; see {@link ElementType#laneBytes(byte)} for all types. */
    public static final int LANE_BYTES = 4;

    /** Largest UDP payload over IPv4. */
    public static final int MAX_UDP_PAYLOAD = 65_507;
    /** Largest element count that fits one UDP datagram (loopback: MTU 65536). */
    public static final int MAX_ELEMENTS = (MAX_UDP_PAYLOAD - HEADER_LENGTH) / LANE_BYTES;
    /** Largest element count that fits a 9000-byte jumbo frame (IPv4 20 + UDP 8). */
    public static final int MAX_ELEMENTS_JUMBO = (9000 - 28 - HEADER_LENGTH) / LANE_BYTES;
    /** Largest element count that fits a 1500-byte frame. */
    public static final int MAX_ELEMENTS_STANDARD = (1500 - 28 - HEADER_LENGTH) / LANE_BYTES;

    /** Highest number of workers in one job; ranks are 0 .. MAX_WORKERS-1. */
    public static final int MAX_WORKERS = 256;

    private static final ByteOrder ORDER = ByteOrder.BIG_ENDIAN;

    private MutableDirectBuffer buffer;
    private int offset;

    /**
     * Wrap a buffer at an offset for reading and writing.
     *
     * @param buffer to wrap.
     * @param offset of the header in the buffer.
     * @return this for a fluent API.
     */
    public DataHeaderFlyweight wrap(final MutableDirectBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    public MutableDirectBuffer buffer()
    {
        return buffer;
    }

    public int offset()
    {
        return offset;
    }

    /**
     * Check a received packet before any field is trusted.
     *
     * @param buffer holding the packet.
     * @param offset of the packet in the buffer.
     * @param length of the packet in bytes.
     * @return {@link DropReason#NONE} when the packet is well formed, else the reason to drop it.
     */
    public static DropReason validate(final DirectBuffer buffer, final int offset, final int length)
    {
        if (length < HEADER_LENGTH || buffer.capacity() - offset < length)
        {
            return DropReason.TRUNCATED;
        }
        if (buffer.getShort(offset + MAGIC_OFFSET, ORDER) != MAGIC)
        {
            return DropReason.BAD_MAGIC;
        }
        if (buffer.getByte(offset + VERSION_OFFSET) != CURRENT_VERSION)
        {
            return DropReason.BAD_VERSION;
        }
        final byte type = buffer.getByte(offset + TYPE_OFFSET);
        if (type < TYPE_UPDATE || type > TYPE_PENDING)
        {
            return DropReason.BAD_TYPE;
        }
        final int flags = buffer.getByte(offset + FLAGS_OFFSET) & 0xFF;
        if ((flags & ~KNOWN_FLAGS) != 0)
        {
            return DropReason.BAD_FLAGS;
        }
        if ((buffer.getShort(offset + WORKER_RANK_OFFSET, ORDER) & 0xFFFF) >= MAX_WORKERS)
        {
            return DropReason.BAD_RANK;
        }
        final byte elementType = buffer.getByte(offset + ELEMENT_TYPE_OFFSET);
        if (!ElementType.isValid(elementType))
        {
            return DropReason.BAD_ELEMENT_TYPE;
        }
        final int elementCount = buffer.getShort(offset + ELEMENT_COUNT_OFFSET, ORDER) & 0xFFFF;
        final boolean headerOnly = (flags & FLAG_EXPONENT_ONLY) != 0 || type == TYPE_PROBE || type == TYPE_NACK ||
            type == TYPE_PENDING;
        if (headerOnly ? elementCount != 0 : (elementCount == 0 || elementCount > MAX_ELEMENTS))
        {
            return DropReason.BAD_ELEMENT_COUNT;
        }
        if (length != HEADER_LENGTH + elementCount * ElementType.laneBytes(elementType))
        {
            return DropReason.LENGTH_MISMATCH;
        }
        final short scaleExponent = buffer.getShort(offset + SCALE_EXPONENT_OFFSET, ORDER);
        final short lookaheadExponent = buffer.getShort(offset + LOOKAHEAD_EXPONENT_OFFSET, ORDER);
        if (!isValidExponent(scaleExponent) ||
            !(isValidExponent(lookaheadExponent) || lookaheadExponent == UNKNOWN_EXPONENT ||
                lookaheadExponent == NON_FINITE_EXPONENT) ||
            (elementType == ElementType.INT32 && (scaleExponent != NO_EXPONENT || lookaheadExponent != NO_EXPONENT)))
        {
            return DropReason.BAD_EXPONENT;
        }
        if (buffer.getInt(offset + SLOT_INDEX_OFFSET, ORDER) < 0 || buffer.getLong(offset + CHUNK_SEQUENCE_OFFSET, ORDER) < 0)
        {
            return DropReason.BAD_SLOT;
        }
        return DropReason.NONE;
    }

    /**
     * A block exponent on the wire is {@link #NO_EXPONENT} or within the range of float32 block
     * exponents, [{@link #MIN_EXPONENT}, {@link #MAX_EXPONENT}].
     *
     * @param exponent from a scale or look-ahead field.
     * @return true when the value may be trusted.
     */
    public static boolean isValidExponent(final short exponent)
    {
        return exponent == NO_EXPONENT || (exponent >= MIN_EXPONENT && exponent <= MAX_EXPONENT);
    }

    /**
     * Length in bytes of a packet carrying a number of 4-byte (int32 or float32) lanes.
     *
     * @param elementCount lanes in the payload.
     * @return header plus payload length.
     */
    public static int packetLength(final int elementCount)
    {
        return HEADER_LENGTH + elementCount * LANE_BYTES;
    }

    /**
     * Length in bytes of a packet carrying a number of elements of a type.
     *
     * @param elementType  a valid {@link ElementType} code.
     * @param elementCount lanes in the payload.
     * @return header plus payload length.
     */
    public static int packetLength(final byte elementType, final int elementCount)
    {
        return HEADER_LENGTH + elementCount * ElementType.laneBytes(elementType);
    }

    /**
     * The check field of an update: the digest in the first byte, its complement to 255 in the second.
     *
     * @param digest an 8-bit digest of the chunk's place in its tensor (only the low 8 bits are used).
     * @return the 16-bit field value.
     */
    public static int tensorCheckOf(final int digest)
    {
        final int c = digest & 0xFF;
        return (c << 8) | (0xFF - c);
    }

    /**
     * Combine the check fields of two contributions to a slot as the aggregator does: the maximum of
     * each byte.
     *
     * @return the combined 16-bit field.
     */
    public static int combineTensorChecks(final int a, final int b)
    {
        return (Math.max(a & 0xFF00, b & 0xFF00)) | Math.max(a & 0xFF, b & 0xFF);
    }

    /**
     * Write the fixed fields of a header with magic and version, a zero check field and a zero MAC.
     *
     * @return this for a fluent API.
     */
    public DataHeaderFlyweight writeHeader(
        final byte type,
        final int jobId,
        final int workerRank,
        final int flags,
        final byte elementType,
        final int slotIndex,
        final long chunkSequence,
        final int elementCount,
        final int scaleExponent,
        final int lookaheadExponent)
    {
        return writeHeader(
            type, jobId, workerRank, flags, elementType, slotIndex, chunkSequence, elementCount, scaleExponent,
            lookaheadExponent, 0);
    }

    /**
     * Write the fixed fields of a header with magic and version and a zero MAC.
     *
     * @param tensorCheck the check field, from {@link #tensorCheckOf(int)}.
     * @return this for a fluent API.
     */
    public DataHeaderFlyweight writeHeader(
        final byte type,
        final int jobId,
        final int workerRank,
        final int flags,
        final byte elementType,
        final int slotIndex,
        final long chunkSequence,
        final int elementCount,
        final int scaleExponent,
        final int lookaheadExponent,
        final int tensorCheck)
    {
        buffer.putShort(offset + MAGIC_OFFSET, MAGIC, ORDER);
        buffer.putByte(offset + VERSION_OFFSET, CURRENT_VERSION);
        buffer.putByte(offset + TYPE_OFFSET, type);
        buffer.putInt(offset + JOB_ID_OFFSET, jobId, ORDER);
        buffer.putShort(offset + WORKER_RANK_OFFSET, (short)workerRank, ORDER);
        buffer.putByte(offset + FLAGS_OFFSET, (byte)flags);
        buffer.putByte(offset + ELEMENT_TYPE_OFFSET, elementType);
        buffer.putInt(offset + SLOT_INDEX_OFFSET, slotIndex, ORDER);
        buffer.putLong(offset + CHUNK_SEQUENCE_OFFSET, chunkSequence, ORDER);
        buffer.putShort(offset + ELEMENT_COUNT_OFFSET, (short)elementCount, ORDER);
        buffer.putShort(offset + TENSOR_CHECK_OFFSET, (short)tensorCheck, ORDER);
        buffer.putShort(offset + SCALE_EXPONENT_OFFSET, (short)scaleExponent, ORDER);
        buffer.putShort(offset + LOOKAHEAD_EXPONENT_OFFSET, (short)lookaheadExponent, ORDER);
        buffer.putLong(offset + MAC_OFFSET, 0L, ORDER);
        return this;
    }

    public byte type()
    {
        return buffer.getByte(offset + TYPE_OFFSET);
    }

    public DataHeaderFlyweight type(final byte type)
    {
        buffer.putByte(offset + TYPE_OFFSET, type);
        return this;
    }

    public int jobId()
    {
        return buffer.getInt(offset + JOB_ID_OFFSET, ORDER);
    }

    public DataHeaderFlyweight jobId(final int jobId)
    {
        buffer.putInt(offset + JOB_ID_OFFSET, jobId, ORDER);
        return this;
    }

    public int workerRank()
    {
        return buffer.getShort(offset + WORKER_RANK_OFFSET, ORDER) & 0xFFFF;
    }

    public DataHeaderFlyweight workerRank(final int rank)
    {
        buffer.putShort(offset + WORKER_RANK_OFFSET, (short)rank, ORDER);
        return this;
    }

    public int flags()
    {
        return buffer.getByte(offset + FLAGS_OFFSET) & 0xFF;
    }

    public DataHeaderFlyweight flags(final int flags)
    {
        buffer.putByte(offset + FLAGS_OFFSET, (byte)flags);
        return this;
    }

    /**
     * @return the pool version bit, 0 or 1.
     */
    public int poolVersion()
    {
        return flags() & FLAG_POOL_VERSION;
    }

    public boolean isExponentOnly()
    {
        return (flags() & FLAG_EXPONENT_ONLY) != 0;
    }

    public byte elementType()
    {
        return buffer.getByte(offset + ELEMENT_TYPE_OFFSET);
    }

    public int slotIndex()
    {
        return buffer.getInt(offset + SLOT_INDEX_OFFSET, ORDER);
    }

    public DataHeaderFlyweight slotIndex(final int slotIndex)
    {
        buffer.putInt(offset + SLOT_INDEX_OFFSET, slotIndex, ORDER);
        return this;
    }

    public long chunkSequence()
    {
        return buffer.getLong(offset + CHUNK_SEQUENCE_OFFSET, ORDER);
    }

    public int elementCount()
    {
        return buffer.getShort(offset + ELEMENT_COUNT_OFFSET, ORDER) & 0xFFFF;
    }

    /**
     * @return the check field, 0 to 0xFFFF (check byte high, complement byte low).
     */
    public int tensorCheck()
    {
        return buffer.getShort(offset + TENSOR_CHECK_OFFSET, ORDER) & 0xFFFF;
    }

    public DataHeaderFlyweight tensorCheck(final int tensorCheck)
    {
        buffer.putShort(offset + TENSOR_CHECK_OFFSET, (short)tensorCheck, ORDER);
        return this;
    }

    public short scaleExponent()
    {
        return buffer.getShort(offset + SCALE_EXPONENT_OFFSET, ORDER);
    }

    public DataHeaderFlyweight scaleExponent(final int exponent)
    {
        buffer.putShort(offset + SCALE_EXPONENT_OFFSET, (short)exponent, ORDER);
        return this;
    }

    public short lookaheadExponent()
    {
        return buffer.getShort(offset + LOOKAHEAD_EXPONENT_OFFSET, ORDER);
    }

    public DataHeaderFlyweight lookaheadExponent(final int exponent)
    {
        buffer.putShort(offset + LOOKAHEAD_EXPONENT_OFFSET, (short)exponent, ORDER);
        return this;
    }

    public long mac()
    {
        return buffer.getLong(offset + MAC_OFFSET, ORDER);
    }

    public DataHeaderFlyweight mac(final long mac)
    {
        buffer.putLong(offset + MAC_OFFSET, mac, ORDER);
        return this;
    }

    /**
     * @param index of the lane.
     * @return the 4-byte lane at an index of the payload (int32 and float32).
     */
    public int lane(final int index)
    {
        return buffer.getInt(offset + PAYLOAD_OFFSET + index * LANE_BYTES, ORDER);
    }

    public DataHeaderFlyweight lane(final int index, final int value)
    {
        buffer.putInt(offset + PAYLOAD_OFFSET + index * LANE_BYTES, value, ORDER);
        return this;
    }

    /**
     * @param index of the lane.
     * @return the 2-byte lane at an index of the payload (float16 and bfloat16 bits).
     */
    public short halfLane(final int index)
    {
        return buffer.getShort(offset + PAYLOAD_OFFSET + index * 2, ORDER);
    }

    public DataHeaderFlyweight halfLane(final int index, final short bits)
    {
        buffer.putShort(offset + PAYLOAD_OFFSET + index * 2, bits, ORDER);
        return this;
    }
}
