package io.switchml.protocol;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The first CPU's feature flags as the Linux kernel reports them in /proc/cpuinfo, which leaves out the AVX ones whose
 * register state it does not enable: what the native library's CPUID and XCR0 reading (switchml_cpu.c) must agree with.
 */
public final class CpuFlags
{
    private CpuFlags()
    {
    }

    /** @return the flags, empty off x86-64 (whose kernels report no "flags" line). */
    public static Set<String> read() throws IOException
    {
        if (!"amd64".equals(System.getProperty("os.arch")))
        {
            return Set.of();
        }
        final String line = Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("flags"))
            .findFirst().orElseThrow(() -> new IOException("/proc/cpuinfo has no flags line"));
        return Arrays.stream(line.substring(line.indexOf(':') + 1).trim().split("\\s+")).collect(Collectors.toSet());
    }
}
