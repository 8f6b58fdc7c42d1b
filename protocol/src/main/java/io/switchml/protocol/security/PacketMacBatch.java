package io.switchml.protocol.security;

import io.switchml.protocol.DataHeaderFlyweight;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * {@link PacketMac} of up to {@link #LANES} packets of one length together: the duty cycles that send or receive a
 * burst of packets gather them here and hash them at once, in the first of these that this JVM has:
 * <ol>
 * <li>the project's native library ({@link NativePacketMac}, carried in this jar): up to 16 packets in AVX-512F
 * registers (two sets of eight lanes) or 4 in AVX2 registers, from the first packet on;</li>
 * <li>the JDK's vector incubator module in the boot layer ({@code --add-modules=jdk.incubator.vector}) and a 512-bit
 * vector unit: the lanes of {@link SipHash24x8}, once {@link #warmUp} has seen their code compiled by C2;</li>
 * <li>else each packet alone, by {@link PacketMac}.</li>
 * </ol>
 * Fewer than {@link #MIN_VECTOR_PACKETS} packets, or a packet on the Java heap, are hashed one at a time by any of
 * them. All give the same MACs, byte for byte ({@code PacketMacBatchTest}).
 * <p>
 * The Java lanes' warm-up costs a few tenths of a CPU-second per JVM, most of it C2's: a JVM that hashes MACs starts
 * {@link #warmUpInBackground} (the worker agent when its job uses MACs, the appliance at start-up), and until it is
 * done every packet is hashed alone. The native library needs none.
 * <p>
 * {@link #description()} says which one this JVM uses, for the start-up reports; the system properties
 * {@code switchml.mac.native=false} and {@code switchml.mac.vector=false} turn the first two off (to compare them in
 * one run).
 * <p>
 * An instance belongs to one thread. It keeps references to the buffers added until {@link #clear()}, and allocates
 * nothing once made.
 */
public final class PacketMacBatch
{
    /**
     * Packets hashed together at most: the native library's two sets of eight AVX-512 lanes; the Java lanes take them
     * eight at a time.
     */
    public static final int LANES = 16;

    /**
     * Fewer packets than this are hashed one at a time. The Java lanes' work is the same for one packet as for eight,
     * and one packet alone costs about an eighth of it: 3. The native library takes two to four packets in four lanes,
     * which cost less than two packets one after the other (bench/mac/run.sh): 2.
     */
    static final int MIN_VECTOR_PACKETS;
    private static final int JAVA_LANES_MIN_PACKETS = 3;

    private static final String VECTOR_MODULE = "jdk.incubator.vector";
    private static final boolean NATIVE = NativePacketMac.available();
    private static final boolean VECTOR;
    private static final String DESCRIPTION;

    static
    {
        MIN_VECTOR_PACKETS = NATIVE ? 2 : JAVA_LANES_MIN_PACKETS;
        final String javaLanesMissing = NATIVE ? null : javaLanesMissing();
        VECTOR = !NATIVE && javaLanesMissing == null;
        DESCRIPTION = NATIVE ?
            "SipHash-2-4, up to " + NativePacketMac.mostPerCall() + " packets at once (native library, " +
            NativePacketMac.description() + ")" :
            VECTOR ?
            "SipHash-2-4, up to " + SipHash24x8.LANES + " packets at once (512-bit vectors, once the JIT has compiled them)" :
            "SipHash-2-4, one packet at a time (native library: " + NativePacketMac.description() + "; Java lanes: " +
            javaLanesMissing + ")";
    }

    /** Why this JVM cannot use the Java lanes, or null when it can (asked only without the native library). */
    private static String javaLanesMissing()
    {
        if (!Boolean.parseBoolean(System.getProperty("switchml.mac.vector", "true")))
        {
            return "switchml.mac.vector=false";
        }
        if (ModuleLayer.boot().findModule(VECTOR_MODULE).isEmpty())
        {
            return VECTOR_MODULE + " not in the JVM (--add-modules=" + VECTOR_MODULE + ")";
        }
        return SipHash24x8.hardwareSupported() ? null : "no 512-bit vector unit";
    }

    /**
     * Set once {@link #warmUp} saw the lanes' code compiled: until then every packet is hashed alone. Interpreted, or
     * compiled by C1, the vector code is a hundred times slower than one packet at a time (each operation is a Java
     * object), and C2 compiles it only after a few thousand calls.
     */
    private static volatile boolean warm;
    private static final AtomicBoolean WARM_UP_STARTED = new AtomicBoolean();
    /** Where the warm-up's MACs go, so that the JIT cannot drop the work. */
    private static volatile long warmUpSink;

    private final UnsafeBuffer[] packets = new UnsafeBuffer[LANES];
    private final int[] offsets = new int[LANES];
    private final long[] addresses = new long[SipHash24x8.LANES];
    private final long[] laneMacs = new long[SipHash24x8.LANES];
    private final long[] macs = new long[LANES];
    private final long[] scratch = new long[SipHash24x8.SCRATCH];
    /** The native library's arguments: the packets' addresses, then their MACs; only when it is in use. */
    private final UnsafeBuffer nativeArgs = NATIVE ? new UnsafeBuffer(ByteBuffer.allocateDirect(2 * LANES * Long.BYTES)) : null;
    private int size;
    private boolean onHeap;

    /**
     * @return true when this JVM hashes several packets at once.
     */
    public static boolean vectorized()
    {
        return NATIVE || VECTOR;
    }

    /**
     * @return how this JVM computes packet MACs, for a start-up report.
     */
    public static String description()
    {
        return DESCRIPTION;
    }

    /**
     * @return true when batches are hashed in lanes: with the native library always, with the Java lanes once their
     * code is compiled ({@link #warmUp}).
     */
    public static boolean warm()
    {
        return NATIVE || warm;
    }

    /**
     * Start {@link #warmUp} on a daemon thread, once per JVM; nothing when this JVM cannot hash in lanes.
     *
     * @param length of the packets to warm up with: the job's (a k of 256 float32 lanes: 1,064 bytes).
     */
    public static void warmUpInBackground(final int length)
    {
        if (VECTOR && WARM_UP_STARTED.compareAndSet(false, true))
        {
            Thread.ofPlatform().daemon().name("switchml-mac-warmup").start(() -> warmUp(length, WARM_UP_CALLS));
        }
    }

    /** Calls of the lanes' code a warm-up makes at most before it gives up (a few thousand reach C2 here). */
    public static final int WARM_UP_CALLS = 12_000;
    /** Longest a warm-up goes on: a JVM whose C2 has not compiled the lanes by then hashes one packet at a time. */
    private static final long WARM_UP_NS = 3_000_000_000L;
    private static final int WARM_UP_ROUND = 16;

    /**
     * Hash scratch packets in the lanes until the JIT has compiled that code (a round of calls runs at least twice as
     * fast as hashing the same packets one at a time, and at a gigabyte a second at least), then let every batch use
     * it; give up after {@code maxCalls} or 3 seconds. It sleeps a millisecond between
     * rounds, so that the compiler threads get the cores. Nothing happens in a JVM whose C2 is off
     * ({@code -XX:TieredStopAtLevel} below 4, {@code -Xint}): its vector code would stay slow.
     *
     * @param length   of the scratch packets.
     * @param maxCalls of the lanes' code before giving up.
     * @return true when the lanes are in use.
     */
    public static boolean warmUp(final int length, final int maxCalls)
    {
        if (NATIVE)
        {
            return true;
        }
        if (!VECTOR || warm)
        {
            return warm;
        }
        if (!fullJit())
        {
            return false;
        }
        final int packetLength = Math.max(DataHeaderFlyweight.HEADER_LENGTH, length);
        final PacketMacBatch batch = new PacketMacBatch();
        final UnsafeBuffer[] scratch = new UnsafeBuffer[SipHash24x8.LANES];
        for (int i = 0; i < SipHash24x8.LANES; i++)
        {
            scratch[i] = new UnsafeBuffer(ByteBuffer.allocateDirect(packetLength));
            for (int b = 0; b < packetLength; b++)
            {
                scratch[i].putByte(b, (byte)(i * 31 + b));
            }
            batch.add(scratch[i], 0);
        }
        long sink = 0;
        final long deadlineNs = System.nanoTime() + WARM_UP_NS;
        for (int calls = 0; calls < maxCalls && System.nanoTime() - deadlineNs < 0; calls += WARM_UP_ROUND)
        {
            final long startNs = System.nanoTime();
            for (int r = 0; r < WARM_UP_ROUND; r++)
            {
                batch.addresses(0, packetLength);
                SipHash24x8.hash(r, calls, batch.addresses, packetLength, batch.laneMacs, batch.scratch);
                sink += batch.laneMacs[r & (SipHash24x8.LANES - 1)];
            }
            final long vectorNs = System.nanoTime() - startNs;
            final long scalarStartNs = System.nanoTime();
            for (int i = 0; i < SipHash24x8.LANES; i++)
            {
                sink += PacketMac.compute(calls, i, scratch[i], 0, packetLength);
            }
            final long scalarNs = (System.nanoTime() - scalarStartNs) * WARM_UP_ROUND;
            // twice one at a time's speed, and a gigabyte a second at least: both kinds were compiled
            if (vectorNs * 2 < scalarNs && vectorNs < (long)WARM_UP_ROUND * SipHash24x8.LANES * packetLength)
            {
                warm = true;
                break;
            }
            LockSupport.parkNanos(1_000_000L);
        }
        batch.clear();
        warmUpSink = sink;
        return warm;
    }

    /** Whether this JVM runs C2: the vector code is slow in the interpreter and in C1. */
    private static boolean fullJit()
    {
        if (System.getProperty("java.vm.info", "").contains("interpreted"))
        {
            return false;
        }
        try
        {
            final com.sun.management.HotSpotDiagnosticMXBean hotSpot =
                java.lang.management.ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            return Integer.parseInt(hotSpot.getVMOption("TieredStopAtLevel").getValue()) >= 4;
        }
        catch (final RuntimeException ex)
        {
            return true;
        }
    }

    /**
     * Add a packet to hash with the others added since {@link #clear()}.
     *
     * @param packet buffer holding it; kept until {@link #clear()}.
     * @param offset of the packet in the buffer.
     * @return its index for {@link #mac(int)}.
     * @throws IllegalStateException when {@link #LANES} are already added.
     */
    public int add(final UnsafeBuffer packet, final int offset)
    {
        if (size == LANES)
        {
            throw new IllegalStateException("a batch holds " + LANES + " packets at most");
        }
        packets[size] = packet;
        offsets[size] = offset;
        onHeap |= packet.byteArray() != null;
        return size++;
    }

    /**
     * @return packets added since {@link #clear()}.
     */
    public int size()
    {
        return size;
    }

    /**
     * @return true when no more packets can be added.
     */
    public boolean isFull()
    {
        return size == LANES;
    }

    /**
     * Forget the packets added.
     */
    public void clear()
    {
        for (int i = 0; i < size; i++)
        {
            packets[i] = null;
        }
        size = 0;
        onHeap = false;
    }

    /**
     * Compute the MAC of every packet added, each taken as {@code length} bytes long; then read them with
     * {@link #mac(int)}.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param length of every packet, header included.
     * @return true when they were hashed in vector lanes, false when one at a time.
     * @throws IllegalArgumentException  when length is shorter than a header.
     * @throws IndexOutOfBoundsException when a packet is not inside its buffer.
     */
    public boolean compute(final long k0, final long k1, final int length)
    {
        if (length < DataHeaderFlyweight.HEADER_LENGTH)
        {
            throw new IllegalArgumentException(
                "packet length " + length + " is shorter than the header (" + DataHeaderFlyweight.HEADER_LENGTH + ")");
        }
        if (!warm() || size < MIN_VECTOR_PACKETS || onHeap)
        {
            for (int i = 0; i < size; i++)
            {
                macs[i] = PacketMac.compute(k0, k1, packets[i], offsets[i], length);
            }
            return false;
        }
        if (NATIVE)
        {
            final long args = nativeArgs.addressOffset();
            for (int i = 0; i < size; i++)
            {
                packets[i].boundsCheck(offsets[i], length);
                nativeArgs.putLong(i * Long.BYTES, packets[i].addressOffset() + offsets[i]);
            }
            NativePacketMac.compute(k0, k1, args, size, length, args + LANES * Long.BYTES);
            for (int i = 0; i < size; i++)
            {
                macs[i] = nativeArgs.getLong((LANES + i) * Long.BYTES);
            }
            return true;
        }
        javaLanes(k0, k1, length);
        return true;
    }

    /**
     * The MACs of the packets added by {@link SipHash24x8}, eight lanes at a time (a last one or two packets alone);
     * package-private so that a test reaches it in a JVM that has the native library.
     */
    void javaLanes(final long k0, final long k1, final int length)
    {
        for (int from = 0; from < size; from += SipHash24x8.LANES)
        {
            final int count = Math.min(SipHash24x8.LANES, size - from);
            if (count < JAVA_LANES_MIN_PACKETS)
            {
                for (int i = from; i < size; i++)
                {
                    macs[i] = PacketMac.compute(k0, k1, packets[i], offsets[i], length);
                }
                break;
            }
            addresses(from, length);
            SipHash24x8.hash(k0, k1, addresses, length, laneMacs, scratch);
            System.arraycopy(laneMacs, 0, macs, from, count);
        }
    }

    /** The eight lanes' addresses from packet {@code from} on: each packet's, the first's again past the last. */
    private void addresses(final int from, final int length)
    {
        for (int i = 0; i < SipHash24x8.LANES; i++)
        {
            final int p = from + i < size ? from + i : from;
            packets[p].boundsCheck(offsets[p], length);
            addresses[i] = packets[p].addressOffset() + offsets[p];
        }
    }

    /**
     * @param index of a packet, as {@link #add} returned it.
     * @return its MAC from the last {@link #compute}.
     */
    public long mac(final int index)
    {
        return macs[index];
    }

    /**
     * Compute the MACs of the packets added and write each into its packet's MAC field, as {@link PacketMac#sign}.
     *
     * @param k0     key bytes 0..7 read little-endian.
     * @param k1     key bytes 8..15 read little-endian.
     * @param length of every packet, header included.
     * @return true when they were hashed in vector lanes.
     */
    public boolean sign(final long k0, final long k1, final int length)
    {
        final boolean lanes = compute(k0, k1, length);
        for (int i = 0; i < size; i++)
        {
            packets[i].putLong(offsets[i] + DataHeaderFlyweight.MAC_OFFSET, macs[i], ByteOrder.BIG_ENDIAN);
        }
        return lanes;
    }

    /**
     * @param index of a packet, after {@link #compute}.
     * @return true when its MAC field holds its MAC, as {@link PacketMac#verify}.
     */
    public boolean verified(final int index)
    {
        return packets[index].getLong(offsets[index] + DataHeaderFlyweight.MAC_OFFSET, ByteOrder.BIG_ENDIAN) == macs[index];
    }
}
