package io.switchml.protocol;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * What {@link NativeCalls}' one call shape relies on, checked on this machine's C library with the real linker: a C
 * int parameter reads only the low half of the 64-bit value passed, whatever the high half holds; the arguments a
 * function does not take are not read; an int comes back sign-extended, a long and a pointer whole. The UDP transport
 * and the MAC library are tested through it with real sockets and packets (NativeShardAgentTest,
 * NativeDatagramTransportTest, PacketMacBatchTest).
 */
class NativeCallsTest
{
    private static final MemorySegment ABS = symbol("abs");
    private static final MemorySegment LABS = symbol("labs");

    private static MemorySegment symbol(final String name)
    {
        return Linker.nativeLinker().defaultLookup().find(name).orElseThrow();
    }

    @Test
    void anIntParameterReadsTheLowHalfOnly() throws Throwable
    {
        final MethodHandle abs = NativeCalls.intCall(ABS);
        assertEquals(5, (int)abs.invokeExact(-5L, 0L, 0L, 0L, 0L, 0L), "an int widened with its sign");
        assertEquals(7, (int)abs.invokeExact(0x5a5a_5a5a_0000_0007L, 0L, 0L, 0L, 0L, 0L), "high half ignored");
        assertEquals(7, (int)abs.invokeExact(0xffff_ffff_ffff_fff9L, -1L, 1L << 40, -1L, 42L, -42L),
            "-7, and the five arguments abs does not take ignored");
        assertEquals(Integer.MIN_VALUE, (int)abs.invokeExact((long)Integer.MIN_VALUE, 0L, 0L, 0L, 0L, 0L),
            "abs(INT_MIN) is INT_MIN in two's complement: the int came back with its sign");
    }

    @Test
    void aLongComesBackWhole() throws Throwable
    {
        final MethodHandle labs = NativeCalls.longCall(LABS);
        assertEquals(1L << 40, (long)labs.invokeExact(-(1L << 40), 0L, 0L, 0L, 0L, 0L));
    }

    @Test
    void errnoIsCapturedAndAPointerPassesAsALong() throws Throwable
    {
        final MethodHandle close = NativeCalls.intCall(symbol("close"), NativeCalls.CAPTURE_ERRNO);
        final MethodHandle strlen = NativeCalls.longCall(symbol("strlen"));
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment state = NativeCalls.allocateCallState(arena);
            assertEquals(-1, (int)close.invokeExact(state, -1L, 0L, 0L, 0L, 0L, 0L));
            assertEquals(9, NativeCalls.errno(state), "EBADF");
            final MemorySegment text = arena.allocateFrom("switchml");
            assertEquals(8L, (long)strlen.invokeExact(text.address(), 0L, 0L, 0L, 0L, 0L));
        }
    }
}
