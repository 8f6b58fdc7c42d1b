package io.switchml.worker;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A child process (a JVM running one of the project's main classes with this test's class path, or
 * any command such as a Python interpreter) whose merged output is captured line by line, for the
 * multi-process and bridge tests.
 */
public final class ChildProcess implements AutoCloseable
{
    private final Process process;
    private final String name;
    private final List<String> lines = new ArrayList<>();
    private final LinkedBlockingQueue<String> queue = new LinkedBlockingQueue<>();
    private final Thread pump;

    private ChildProcess(final String name, final Process process)
    {
        this.name = name;
        this.process = process;
        pump = Thread.ofPlatform().daemon().name("output-" + name).start(() ->
        {
            try (BufferedReader reader = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
            {
                String line;
                while ((line = reader.readLine()) != null)
                {
                    synchronized (lines)
                    {
                        lines.add(line);
                    }
                    queue.add(line);
                }
            }
            catch (final IOException ignore)
            {
                // process ended
            }
        });
    }

    public static ChildProcess start(final String name, final List<String> command, final Path directory,
        final Map<String, String> environment) throws IOException
    {
        final ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        if (directory != null)
        {
            builder.directory(directory.toFile());
        }
        builder.environment().putAll(environment);
        return new ChildProcess(name, builder.start());
    }

    public static ChildProcess startJvm(final String name, final Class<?> mainClass, final List<String> args) throws IOException
    {
        final List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse("java"));
        command.add("--add-modules=jdk.incubator.vector");
        command.add("--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED");
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("--sun-misc-unsafe-memory-access=allow");
        command.add("--add-opens=java.base/java.lang.reflect=ALL-UNNAMED");
        command.add("--add-exports=java.base/sun.nio.ch=ALL-UNNAMED");
        command.add("--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED");
        command.add("-Dchronicle.analytics.disable=true");
        command.add("-Dchronicle.announcer.disable=true");
        command.add("-Xmx512m");
        command.add("-XX:+UseSerialGC");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        command.addAll(args);
        return start(name, command, null, Map.of());
    }

    /**
     * Wait for an output line that matches.
     *
     * @return the line.
     * @throws AssertionError with the output so far when the deadline passes or the process exits first.
     */
    public String awaitLine(final Predicate<String> match, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final long remaining = deadline - System.currentTimeMillis();
            if (remaining <= 0)
            {
                throw new AssertionError(name + ": no matching line within " + timeoutMs + " ms; output:\n" + output());
            }
            final String line = queue.poll(Math.min(remaining, 200), TimeUnit.MILLISECONDS);
            if (line != null && match.test(line))
            {
                return line;
            }
            if (line == null && !process.isAlive() && !pump.isAlive() && queue.isEmpty())
            {
                throw new AssertionError(name + " exited with " + process.exitValue() + " before printing the expected line; output:\n" +
                    output());
            }
        }
    }

    public int awaitExit(final long timeoutMs) throws InterruptedException
    {
        if (!process.waitFor(timeoutMs, TimeUnit.MILLISECONDS))
        {
            process.destroyForcibly();
            throw new AssertionError(name + " did not exit within " + timeoutMs + " ms; output:\n" + output());
        }
        pump.join(5_000);
        return process.exitValue();
    }

    public String output()
    {
        synchronized (lines)
        {
            return String.join("\n", lines);
        }
    }

    public List<String> lines()
    {
        synchronized (lines)
        {
            return List.copyOf(lines);
        }
    }

    public String name()
    {
        return name;
    }

    public Process process()
    {
        return process;
    }

    /** SIGTERM: lets shutdown hooks run. */
    public void terminate()
    {
        process.destroy();
    }

    /** SIGKILL. */
    public void kill()
    {
        process.destroyForcibly();
    }

    public void close()
    {
        process.destroyForcibly();
    }
}
