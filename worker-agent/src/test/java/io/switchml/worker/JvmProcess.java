package io.switchml.worker;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A child JVM running one of the project's main classes with this test's class path, its output
 * captured line by line for assertions.
 */
final class JvmProcess implements AutoCloseable
{
    private final Process process;
    private final String name;
    private final List<String> lines = new ArrayList<>();
    private final LinkedBlockingQueue<String> queue = new LinkedBlockingQueue<>();

    private JvmProcess(final String name, final Process process)
    {
        this.name = name;
        this.process = process;
        Thread.ofPlatform().daemon().name("output-" + name).start(() ->
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

    static JvmProcess start(final String name, final Class<?> mainClass, final String... args) throws IOException
    {
        final List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse("java"));
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
        command.addAll(List.of(args));
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        return new JvmProcess(name, process);
    }

    /**
     * Wait for an output line that matches.
     *
     * @return the line.
     * @throws AssertionError with the output so far when the deadline passes.
     */
    String awaitLine(final Predicate<String> match, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final long remaining = deadline - System.currentTimeMillis();
            if (remaining <= 0)
            {
                throw new AssertionError(name + ": no matching line within " + timeoutMs + " ms; output: " + output());
            }
            final String line = queue.poll(remaining, TimeUnit.MILLISECONDS);
            if (line != null && match.test(line))
            {
                return line;
            }
        }
    }

    int awaitExit(final long timeoutMs) throws InterruptedException
    {
        if (!process.waitFor(timeoutMs, TimeUnit.MILLISECONDS))
        {
            process.destroyForcibly();
            throw new AssertionError(name + " did not exit within " + timeoutMs + " ms; output: " + output());
        }
        return process.exitValue();
    }

    String output()
    {
        synchronized (lines)
        {
            return String.join("\n", lines);
        }
    }

    Process process()
    {
        return process;
    }

    void kill()
    {
        process.destroyForcibly();
    }

    public void close()
    {
        process.destroyForcibly();
    }
}
