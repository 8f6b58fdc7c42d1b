package io.switchml.worker.bench;

import io.switchml.protocol.NativeCalls;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The CPU time of the whole process, every thread together (user and system, the JIT's and the collector's
 * included), in nanoseconds: Linux clock_gettime(CLOCK_PROCESS_CPUTIME_ID), the clock Python's
 * {@code time.process_time_ns()} reads, so that the benchmark measures SwitchML's ranks and the torch ranks
 * (bench/rack) the same way. Written here because the JDK's {@code OperatingSystemMXBean.getProcessCpuTime()}
 * reads times(2) on Linux, in 10 ms ticks (measured: its smallest step here is 10,000,000 ns), too coarse for one
 * all-reduce of a few milliseconds.
 */
final class ProcessCpuClock
{
    private static final int CLOCK_PROCESS_CPUTIME_ID = 2;
    private static final MethodHandle CLOCK_GETTIME = lookup();

    private final MemorySegment timespec = Arena.ofAuto().allocate(2 * Long.BYTES, Long.BYTES);

    private static MethodHandle lookup()
    {
        try
        {
            final Linker linker = Linker.nativeLinker();
            return linker.defaultLookup().find("clock_gettime")
                .map(NativeCalls::intCall)
                .orElse(null);
        }
        catch (final RuntimeException | LinkageError ex)
        {
            return null;
        }
    }

    /**
     * @return the process's CPU time in nanoseconds, or -1 where the clock cannot be read (then the benchmark
     * reports no figure rather than a wrong one).
     */
    long nanos()
    {
        if (CLOCK_GETTIME == null)
        {
            return -1;
        }
        try
        {
            if ((int)CLOCK_GETTIME.invokeExact((long)CLOCK_PROCESS_CPUTIME_ID, timespec.address(), 0L, 0L, 0L, 0L) != 0)
            {
                return -1;
            }
        }
        catch (final Throwable ex)
        {
            return -1;
        }
        return timespec.get(ValueLayout.JAVA_LONG, 0) * 1_000_000_000L + timespec.get(ValueLayout.JAVA_LONG, Long.BYTES);
    }
}
