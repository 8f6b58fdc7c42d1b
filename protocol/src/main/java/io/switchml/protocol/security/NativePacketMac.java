package io.switchml.protocol.security;

import io.switchml.protocol.NativeCalls;
import io.switchml.protocol.NativeLibrary;

import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * The packet MAC of up to {@link PacketMacBatch#LANES} packets at once in the CPU's vector lanes, computed by the
 * project's own shared object ({@link NativeLibrary}; this part's source: {@code protocol/src/main/c/switchml_mac.c})
 * through the FFM API: 8 or 16 packets in AVX-512F
 * registers, 4 in AVX2 registers, else one at a time. Unlike the Java lanes ({@link SipHash24x8}), it needs neither the JDK's
 * vector incubator module (whose presence costs a JVM its AOT-linked classes) nor a JIT warm-up: a JVM hashes in
 * lanes from its first packet.
 * <p>
 * When the library is not loaded ({@link NativeLibrary#problem()}) or the system property {@code
 * switchml.mac.native=false} is set, {@link #available()} is false and {@link #description()} says why. The library
 * calls nothing, allocates nothing and keeps no state; every call is a critical downcall (no thread-state transition),
 * so it is cheap next to the microseconds a batch takes.
 * <p>
 * Our own code because it is the product's MAC: no library offers multi-buffer SipHash over our packet layout. Its
 * MACs equal {@link PacketMac}'s byte for byte ({@code PacketMacBatchTest}).
 */
final class NativePacketMac
{
    private static final MethodHandle MAC_PACKETS;
    private static final MethodHandle LIMIT_LANES;
    private static final int LANES;
    private static final String DESCRIPTION;

    static
    {
        MethodHandle macPackets = null;
        MethodHandle limitLanes = null;
        int lanes = 0;
        String description = NativeLibrary.unavailable("switchml.mac.native");
        if (description == null)
        {
            try
            {
                final SymbolLookup library = NativeLibrary.lookup();
                // one critical stub for the three, on the transport's call shape (see NativeCalls)
                final Linker.Option critical = Linker.Option.critical(false);
                final MethodHandle lanesCall = NativeCalls.intCall(library.findOrThrow("switchml_mac_lanes"), critical);
                macPackets = NativeCalls.intCall(library.findOrThrow("switchml_mac_packets"), critical);
                limitLanes = NativeCalls.intCall(library.findOrThrow("switchml_mac_limit_lanes"), critical);
                lanes = (int)lanesCall.invokeExact(0L, 0L, 0L, 0L, 0L, 0L);
                description = lanes == 8 ? "AVX-512F" : lanes == 4 ? "AVX2" : "no AVX2 or AVX-512F";
            }
            catch (final Throwable ex)
            {
                macPackets = null;
                limitLanes = null;
                lanes = 0;
                description = "MAC kernels not linked: " + ex;
            }
        }
        MAC_PACKETS = macPackets;
        LIMIT_LANES = limitLanes;
        LANES = lanes;
        DESCRIPTION = description;
    }

    private NativePacketMac()
    {
    }

    /**
     * @return true when the library is loaded and the CPU has vector lanes for it (AVX2 at least).
     */
    static boolean available()
    {
        return LANES > 1;
    }

    /**
     * @return the width of the CPU's lanes the library uses: 8 (AVX-512F) or 4 (AVX2); 1 without vector lanes; 0 when
     * it is not loaded.
     */
    static int lanes()
    {
        return LANES;
    }

    /**
     * @return packets one call hashes together at most: 16 with AVX-512F (two sets of eight lanes), else {@link #lanes}.
     */
    static int mostPerCall()
    {
        return LANES == 8 ? 16 : LANES;
    }

    /**
     * @return the CPU feature it uses, or why it is not used.
     */
    static String description()
    {
        return DESCRIPTION;
    }

    /**
     * The MACs of {@code count} packets of {@code length} bytes each.
     *
     * @param k0        key bytes 0..7 read little-endian.
     * @param k1        key bytes 8..15 read little-endian.
     * @param addresses native address of {@code count} longs: each packet's address. The caller has checked that
     *                  every packet lies inside its buffer, length bytes long.
     * @param count     packets, 1 to {@link PacketMacBatch#LANES}.
     * @param length    of every packet, at least a header.
     * @param macs      native address of {@code count} longs the MACs are written to.
     */
    static void compute(
        final long k0, final long k1, final long addresses, final int count, final int length, final long macs)
    {
        try
        {
            final int ignore = (int)MAC_PACKETS.invokeExact(k0, k1, addresses, (long)count, (long)length, macs);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_mac_packets failed", ex);
        }
    }

    /**
     * Make the library use at most this many lanes from now on, in every thread: for tests that compare each width
     * this CPU has with {@link PacketMac}. {@link #lanes()} still says what the CPU has.
     *
     * @param most 8, 4 or 1; the CPU's own width caps it.
     * @return the width now in use.
     */
    static int limitLanes(final int most)
    {
        try
        {
            return (int)LIMIT_LANES.invokeExact((long)most, 0L, 0L, 0L, 0L, 0L);
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("switchml_mac_limit_lanes failed", ex);
        }
    }
}
