package io.switchml.appliance.transport;

import io.switchml.protocol.NativeCalls;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Pins the calling thread to one CPU with Linux sched_setaffinity(2), called through the JDK's
 * foreign function interface (no native library of our own), on the call shape of {@link NativeCalls}.
 */
public final class CpuAffinity
{
    private static final int CPU_SET_BYTES = 128;
    private static final MethodHandle SCHED_SETAFFINITY = lookup();

    private CpuAffinity()
    {
    }

    private static MethodHandle lookup()
    {
        try
        {
            final Linker linker = Linker.nativeLinker();
            return linker.defaultLookup().find("sched_setaffinity")
                .map(symbol -> NativeCalls.intCall(symbol, NativeCalls.CAPTURE_ERRNO))
                .orElse(null);
        }
        catch (final RuntimeException | LinkageError ex)
        {
            return null;
        }
    }

    /**
     * Pin the calling thread.
     *
     * @param cpu to run on.
     * @return null on success, else why the thread could not be pinned.
     */
    public static String pinCurrentThread(final int cpu)
    {
        if (SCHED_SETAFFINITY == null)
        {
            return "sched_setaffinity is not available on this platform";
        }
        if (cpu < 0 || cpu >= CPU_SET_BYTES * 8)
        {
            return "cpu " + cpu + " is out of range";
        }
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment mask = arena.allocate(CPU_SET_BYTES);
            mask.set(ValueLayout.JAVA_BYTE, cpu / 8, (byte)(1 << (cpu % 8)));
            final MemorySegment callState = NativeCalls.allocateCallState(arena);
            final int result =
                (int)SCHED_SETAFFINITY.invokeExact(callState, 0L, (long)CPU_SET_BYTES, mask.address(), 0L, 0L, 0L);
            if (result != 0)
            {
                final int errno = NativeCalls.errno(callState);
                return "sched_setaffinity(cpu " + cpu + ") failed with errno " + errno +
                    (errno == 22 ? " (EINVAL: cpu not available to this process)" : "");
            }
            return null;
        }
        catch (final Throwable ex)
        {
            return "sched_setaffinity failed: " + ex;
        }
    }
}
