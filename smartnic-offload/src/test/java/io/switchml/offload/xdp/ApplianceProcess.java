package io.switchml.offload.xdp;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An appliance in a child JVM (the test's class path, C1 only for a quick start) with its output collected, for
 * tests of what outlives or crosses a process: attachment across restarts, a process without root.
 */
record ApplianceProcess(Process process, List<String> output)
{
    private static final Pattern CONTROL = Pattern.compile("control tcp [^ ]+:(\\d+)");

    /**
     * Start one and wait for its ready line.
     *
     * @param prefix    command words before the JVM (e.g. setpriv and its options), or none.
     * @param classPath the child's class path.
     * @param config    its --config file.
     * @param dir       its --dir.
     */
    static ApplianceProcess start(final List<String> prefix, final String classPath, final Path config, final Path dir)
        throws Exception
    {
        final List<String> command = new ArrayList<>(prefix);
        command.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "--enable-native-access=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
            "--sun-misc-unsafe-memory-access=allow", "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
            "-Dchronicle.analytics.disable=true", "-Dchronicle.announcer.disable=true", "-Xmx256m", "-XX:TieredStopAtLevel=1",
            "-cp", classPath, "io.switchml.appliance.ApplianceCommand", "--config", config.toString(),
            "--data-port", "0", "--control-port", "0", "--http-port", "-1", "--dir", dir.toString(), "--insecure-control"));
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        final List<String> output = new CopyOnWriteArrayList<>();
        Thread.ofVirtual().start(() ->
        {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
            {
                String line;
                while ((line = reader.readLine()) != null)
                {
                    output.add(line);
                }
            }
            catch (final Exception ignore)
            {
                // process ended
            }
        });
        final ApplianceProcess child = new ApplianceProcess(process, output);
        if (!child.waitFor("appliance ready", 30_000))
        {
            process.destroyForcibly();
            throw new AssertionError("appliance did not start: " + output);
        }
        return child;
    }

    boolean waitFor(final String text, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline)
        {
            if (output.stream().anyMatch(line -> line.contains(text)))
            {
                return true;
            }
            if (!process.isAlive())
            {
                return output.stream().anyMatch(line -> line.contains(text));
            }
            Thread.sleep(20);
        }
        return false;
    }

    /**
     * @return the control port from the ready line.
     */
    int controlPort()
    {
        for (final String line : output)
        {
            final Matcher matcher = CONTROL.matcher(line);
            if (line.contains("appliance ready") && matcher.find())
            {
                return Integer.parseInt(matcher.group(1));
            }
        }
        throw new AssertionError("no control port in " + output);
    }

    /** SIGTERM, and wait for the exit. */
    void stop() throws InterruptedException
    {
        process.destroy();
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "appliance did not exit on SIGTERM: " + output);
    }

    /** kill -9, and wait for the exit: no hook runs. */
    void kill() throws InterruptedException
    {
        process.destroyForcibly();
        assertTrue(process.waitFor(30, TimeUnit.SECONDS));
    }
}
