package io.switchml.ops;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The appliance's data-plane shard threads as Linux sees them in {@code /proc/<pid>/task}: which CPUs
 * each may run on and where it last ran. The appliance does not report its pinning through any
 * endpoint, so on its own host this is the way to see "shards and their cores".
 * <p>
 * Java names a shard thread "switchml-shard-N"; Linux keeps 15 bytes of it ("switchml-shard-"), so the
 * shard id is taken from thread creation order (the appliance starts shard 0 first), which the task ids
 * follow.
 */
final class ShardThreads
{
    /** Prefix of a shard thread's Linux name (its Java name cut to 15 bytes). */
    static final String THREAD_NAME_PREFIX = "switchml-shard";

    /**
     * One shard thread.
     *
     * @param shard       shard id (creation order).
     * @param tid         Linux task id.
     * @param cpusAllowed the thread's CPU affinity list, e.g. "1" or "0-1".
     * @param pinned      whether its affinity is narrower than the process's.
     * @param lastCpu     CPU it last ran on, or -1 when unknown.
     * @param cpuTimeMs   user plus system CPU time it has used.
     */
    record ShardThread(int shard, long tid, String cpusAllowed, boolean pinned, int lastCpu, long cpuTimeMs)
    {
    }

    private ShardThreads()
    {
    }

    /**
     * @return the shard threads of the process, in shard order; empty when /proc is not readable (another
     * host's process, no procfs) or the process is gone.
     */
    static List<ShardThread> of(final long pid)
    {
        final Path process = Path.of("/proc", Long.toString(pid));
        final Path tasks = process.resolve("task");
        final List<long[]> tids = new ArrayList<>();
        if (!Files.isDirectory(tasks))
        {
            return List.of();
        }
        final String processCpus = cpusAllowed(process.resolve("status"));
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(tasks))
        {
            for (final Path task : stream)
            {
                final String comm = read(task.resolve("comm")).strip();
                if (comm.startsWith(THREAD_NAME_PREFIX))
                {
                    tids.add(new long[] {Long.parseLong(task.getFileName().toString())});
                }
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            return List.of();
        }
        tids.sort((a, b) -> Long.compare(a[0], b[0]));
        final List<ShardThread> threads = new ArrayList<>();
        for (int shard = 0; shard < tids.size(); shard++)
        {
            final long tid = tids.get(shard)[0];
            final Path task = tasks.resolve(Long.toString(tid));
            final String cpus = cpusAllowed(task.resolve("status"));
            final String stat = read(task.resolve("stat"));
            int lastCpu = -1;
            long cpuTimeMs = 0;
            final int nameEnd = stat.lastIndexOf(')');
            if (nameEnd > 0)
            {
                final String[] fields = stat.substring(nameEnd + 2).strip().split(" ");
                if (fields.length > 36)
                {
                    lastCpu = Integer.parseInt(fields[36]);
                    cpuTimeMs = (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) * 10;
                }
            }
            threads.add(new ShardThread(shard, tid, cpus, !cpus.isEmpty() && !cpus.equals(processCpus), lastCpu, cpuTimeMs));
        }
        return threads;
    }

    private static String cpusAllowed(final Path status)
    {
        for (final String line : read(status).split("\n"))
        {
            if (line.startsWith("Cpus_allowed_list:"))
            {
                return line.substring("Cpus_allowed_list:".length()).strip();
            }
        }
        return "";
    }

    private static String read(final Path file)
    {
        try
        {
            return Files.readString(file);
        }
        catch (final IOException | RuntimeException ex)
        {
            return "";
        }
    }
}
