package io.switchml.appliance;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import picocli.CommandLine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The appliance's log as an operator sees it, from real {@code switchml appliance} processes: an expected failure
 * (an address in use, a bad option value) is one line on stderr without a stack trace, lines under the journal carry
 * their syslog priority (here the journal's stream is played by the file stderr goes to: {@code JOURNAL_STREAM} names
 * its device and inode, as systemd does for the journal's socket), and {@code --log-level} filters.
 */
@Timeout(60)
class ApplianceCommandLogTest
{
    @TempDir
    Path dir;

    private final List<Process> processes = new ArrayList<>();

    @AfterEach
    void stop()
    {
        processes.forEach(Process::destroyForcibly);
    }

    @Test
    void aPortInUseIsOneErrorLineWithItsPriorityUnderTheJournal() throws Exception
    {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            final Path stderrFile = Files.createFile(dir.resolve("stderr"));
            final Map<String, Object> stream = Files.readAttributes(stderrFile, "unix:dev,ino");
            final Process process = start(Map.of("JOURNAL_STREAM", stream.get("dev") + ":" + stream.get("ino")),
                "--control-port", Integer.toString(taken.getLocalPort()));
            assertTrue(process.waitFor(30, TimeUnit.SECONDS), "appliance did not exit");
            final List<String> stderr = lines("stderr");
            assertEquals(1, process.exitValue(), stderr::toString);
            assertEquals(1, stderr.size(), "one line: " + stderr);
            assertTrue(stderr.get(0).startsWith("<3>ERROR ApplianceCommand: cannot start: "), stderr.get(0));
            assertTrue(stderr.get(0).contains("Address already in use"), stderr.get(0));
            assertEquals(List.of(), lines("stdout"));
        }
    }

    @Test
    void aBadOptionValueIsOneErrorLineWithATimestampOutsideTheJournal() throws Exception
    {
        final Process process = start(Map.of("JOURNAL_STREAM", "8:12345"), "--shards", "0");
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "appliance did not exit");
        final List<String> stderr = lines("stderr");
        assertEquals(2, process.exitValue(), stderr::toString);
        assertEquals(1, stderr.size(), "one line: " + stderr);
        assertTrue(stderr.get(0).matches("\\d{4}-\\d\\d-\\d\\dT[0-9:.]+Z ERROR ApplianceCommand: bad configuration: .*shards.*"),
            stderr.get(0));
    }

    @Test
    void rehearsesItsDataPathBeforeSayingReadyUnlessTurnedOff() throws Exception
    {
        final Process on = start(Map.of(), "--control-port", "0");
        final List<String> onLines = awaitLine("stderr", "control channel is plain TCP");
        final int rehearsal = indexOf(onLines, "ApplianceCommand: data path rehearsal: ");
        assertTrue(rehearsal >= 0 && rehearsal < indexOf(onLines, "switchml appliance ready: "), onLines::toString);
        on.destroy();
        assertTrue(on.waitFor(30, TimeUnit.SECONDS));

        Files.delete(dir.resolve("stderr"));
        start(Map.of(), "--control-port", "0", "--rehearsal", "off");
        final List<String> offLines = awaitLine("stderr", "control channel is plain TCP");
        assertEquals(-1, indexOf(offLines, "data path rehearsal"), offLines::toString);
    }

    private static int indexOf(final List<String> lines, final String text)
    {
        for (int i = 0; i < lines.size(); i++)
        {
            if (lines.get(i).contains(text))
            {
                return i;
            }
        }
        return -1;
    }

    @Test
    void logLevelFiltersTheStartUpLines() throws Exception
    {
        final Process info = start(Map.of(), "--control-port", "0");
        final List<String> infoLines = awaitLine("stderr", "control channel is plain TCP");
        assertTrue(infoLines.stream().anyMatch((line) -> line.contains(" INFO  ApplianceCommand: switchml appliance ready: ")),
            infoLines::toString);
        info.destroy();
        assertTrue(info.waitFor(30, TimeUnit.SECONDS));

        Files.delete(dir.resolve("stderr"));
        start(Map.of(), "--control-port", "0", "--log-level", "WARN");
        final List<String> warnLines = awaitLine("stderr", "control channel is plain TCP");
        assertTrue(warnLines.stream().allMatch((line) -> line.contains(" WARN  ")), warnLines::toString);
        assertFalse(warnLines.stream().anyMatch((line) -> line.contains("appliance ready")), warnLines::toString);
    }

    @Test
    void environmentalFailuresAreExpectedAndOthersAreBugs()
    {
        final UncheckedIOException portInUse = new UncheckedIOException("cannot bind the HTTP endpoint to 127.0.0.1:7472",
            new BindException("Address already in use"));
        assertTrue(ApplianceCommand.isExpected(portInUse));
        assertEquals("cannot bind the HTTP endpoint to 127.0.0.1:7472: Address already in use",
            ApplianceCommand.describe(portInUse));
        assertTrue(ApplianceCommand.isExpected(new IllegalStateException("native bind", new IOException("errno 98"))));
        assertFalse(ApplianceCommand.isExpected(new IllegalStateException("slot pool corrupt")));
        assertFalse(ApplianceCommand.isExpected(new NullPointerException()));
    }

    @Test
    void anUnknownLogLevelIsABadOptionValue()
    {
        final CommandLine.ParameterException bad = assertThrows(CommandLine.ParameterException.class,
            () -> new CommandLine(new ApplianceCommand()).parseArgs("--log-level", "loud"));
        assertTrue(bad.getMessage().contains("'--log-level'") &&
            bad.getMessage().contains("expected one of error, warn, info, debug, trace"), bad.getMessage());
    }

    private Process start(final Map<String, String> environment, final String... arguments) throws IOException
    {
        final List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
            "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED", "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
            "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx128m",
            "-XX:TieredStopAtLevel=1", "-Dchronicle.analytics.disable=true", "-Dchronicle.announcer.disable=true",
            "-cp", System.getProperty("java.class.path"), ApplianceCommand.class.getName(),
            "--insecure-control", "--bind", "127.0.0.1", "--data-port", "0", "--http-port", "-1",
            "--dir", dir.resolve("state").toString()));
        command.addAll(List.of(arguments));
        final ProcessBuilder builder = new ProcessBuilder(command)
            .redirectOutput(dir.resolve("stdout").toFile()).redirectError(dir.resolve("stderr").toFile());
        builder.environment().remove("JOURNAL_STREAM");
        builder.environment().remove("NOTIFY_SOCKET");
        builder.environment().putAll(environment);
        final Process process = builder.start();
        processes.add(process);
        return process;
    }

    private List<String> awaitLine(final String file, final String text) throws Exception
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        List<String> lines = lines(file);
        while (lines.stream().noneMatch((line) -> line.contains(text)) && System.nanoTime() - deadlineNs < 0)
        {
            Thread.sleep(50);
            lines = lines(file);
        }
        assertTrue(lines.stream().anyMatch((line) -> line.contains(text)), "no '" + text + "' in " + lines);
        return lines;
    }

    private List<String> lines(final String file) throws IOException
    {
        final Path path = dir.resolve(file);
        return Files.exists(path) ? Files.readString(path, StandardCharsets.UTF_8).lines().toList() : List.of();
    }
}
