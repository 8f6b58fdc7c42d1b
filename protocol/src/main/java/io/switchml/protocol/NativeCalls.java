package io.switchml.protocol;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The two call shapes every downcall of the project uses: a C function returning an {@code int}, or a {@code long}
 * (ssize_t, a pointer), called with exactly six 64-bit integer arguments, the ones it does not take passed as 0;
 * and the call state its calls capture errno in.
 * <p>
 * Why one shape: the JDK's linker makes a downcall stub per distinct function descriptor and option set (cached, so
 * equal descriptors share it), and each one spins a hidden class and a dozen lambda forms through the class-file API,
 * then JIT-compiles them: work every JVM does at start-up that no AOT cache of JDK 25 keeps. With a descriptor per C
 * signature an agent spun 19 stubs and 232 lambda forms; on these shapes it spins 5 and 82 ({@code -Xlog:class+load},
 * session 51). Four agents started at once on two cores with the AOT cache
 * ({@code bench/aot/aot_bench.py --aot on --world 4 --reps 1}, five interleaved pairs): all ready after 1532-1736 ms
 * against 1668-1843, 2.78-3.20 CPU-seconds for the four against 3.08-3.27, ready plus first 100 MB all-reduce
 * 2149-2351 ms against 2384-2557, shorter in every pair.
 * <p>
 * Why it is sound: on the two platforms whose struct layouts the transport knows (Linux on x86-64, the System V ABI,
 * and on AArch64, AAPCS64), the first six integer or pointer arguments are passed in 64-bit registers whatever their C
 * type; a callee taking an {@code int} reads the low 32 bits (so an int widened with its sign arrives intact), and one
 * taking fewer arguments never reads the registers of the rest. Return values are not widened: a C {@code int} comes
 * back in the low half of its register with the high half undefined, hence two shapes. Variadic functions (open) are
 * not called through them: x86-64 wants the count of vector registers used in AL for those.
 */
public final class NativeCalls
{
    /** The option that makes a call capture errno into a call state ({@link #allocateCallState}, {@link #errno}). */
    public static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    private static final MemoryLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final long ERRNO_OFFSET = CALL_STATE.byteOffset(MemoryLayout.PathElement.groupElement("errno"));

    /** int f(six 64-bit integers). */
    public static final FunctionDescriptor INT_CALL =
        FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);

    /** long f(six 64-bit integers). */
    public static final FunctionDescriptor LONG_CALL =
        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);

    private NativeCalls()
    {
    }

    /**
     * @return a segment for calls linked with {@link #CAPTURE_ERRNO} to capture errno in; one per thread that makes
     * calls.
     */
    public static MemorySegment allocateCallState(final Arena arena)
    {
        return arena.allocate(CALL_STATE);
    }

    /**
     * @return errno as captured by the last call made with this call state.
     */
    public static int errno(final MemorySegment callState)
    {
        return callState.get(JAVA_INT, ERRNO_OFFSET);
    }

    /**
     * @param symbol  a function returning a C {@code int} and taking at most six integer or pointer arguments, none
     *                variadic.
     * @param options linker options; calls with equal options share one stub.
     * @return a handle of type {@code (long x 6)int}, after a leading call-state segment when errno is captured.
     */
    public static MethodHandle intCall(final MemorySegment symbol, final Linker.Option... options)
    {
        return Linker.nativeLinker().downcallHandle(symbol, INT_CALL, options);
    }

    /**
     * @param symbol  a function returning a 64-bit integer or a pointer and taking at most six integer or pointer
     *                arguments, none variadic.
     * @param options linker options; calls with equal options share one stub.
     * @return a handle of type {@code (long x 6)long}, after a leading call-state segment when errno is captured.
     */
    public static MethodHandle longCall(final MemorySegment symbol, final Linker.Option... options)
    {
        return Linker.nativeLinker().downcallHandle(symbol, LONG_CALL, options);
    }
}
