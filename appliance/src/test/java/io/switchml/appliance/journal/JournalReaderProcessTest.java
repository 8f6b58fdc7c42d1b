package io.switchml.appliance.journal;

import io.switchml.journal.JournalReader;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A reader in another JVM, started like an ops CLI that was not given Chronicle's {@code -D} switches,
 * with its own {@code $HOME}, working directory and temporary directory: it reads every event and creates
 * or changes no file, in those directories or in the journal.
 */
@Tag("process")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JournalReaderProcessTest
{
    @TempDir
    Path root;

    @Test
    void readerInAnotherJvmCreatesNoFiles() throws Exception
    {
        final Path journalDir = root.resolve("journal");
        final Path home = Files.createDirectories(root.resolve("home"));
        final Path workDir = Files.createDirectories(root.resolve("cwd"));
        final Path tmp = Files.createDirectories(root.resolve("tmp"));
        try (Journal journal = Journal.open(new JournalContext().directory(journalDir).blockSizeBytes(256 << 10)))
        {
            for (int i = 0; i < 10; i++)
            {
                journal.offerJobCreated(i, "t", "job " + i, null);
            }
        }
        final Map<String, String> journalBefore = snapshot(journalDir);

        final List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse("java"));
        command.add("--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED");
        command.add("--add-opens=java.base/java.lang.reflect=ALL-UNNAMED");
        command.add("--add-exports=java.base/sun.nio.ch=ALL-UNNAMED");
        command.add("--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED");
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("--sun-misc-unsafe-memory-access=allow");
        command.add("-Xmx64m");
        command.add("-XX:+UseSerialGC");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-Duser.home=" + home);
        command.add("-Djava.io.tmpdir=" + tmp);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(ReadJournal.class.getName());
        command.add(journalDir.toString());
        final ProcessBuilder builder = new ProcessBuilder(command).directory(workDir.toFile()).redirectErrorStream(true);
        builder.environment().put("HOME", home.toString());
        builder.environment().put("TMPDIR", tmp.toString());
        final Process process = builder.start();
        final String output;
        try
        {
            output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(process.waitFor(30, TimeUnit.SECONDS), "reader did not exit");
        }
        finally
        {
            process.destroyForcibly();
        }

        assertEquals(0, process.exitValue(), output);
        assertTrue(output.contains("read 10 events"), output);
        assertEquals(Map.of(), snapshot(home), "files created in $HOME");
        assertEquals(Map.of(), snapshot(workDir), "files created in the working directory");
        assertEquals(Map.of(), snapshot(tmp), "files created in the temporary directory");
        assertEquals(journalBefore, snapshot(journalDir), "journal directory changed by the reader");
    }

    private static Map<String, String> snapshot(final Path directory) throws IOException
    {
        final Map<String, String> files = new TreeMap<>();
        try (Stream<Path> walk = Files.walk(directory))
        {
            walk.filter(path -> !path.equals(directory)).forEach(path ->
            {
                try
                {
                    files.put(directory.relativize(path).toString(),
                        Files.size(path) + " " + Files.getLastModifiedTime(path).toMillis());
                }
                catch (final IOException ex)
                {
                    throw new java.io.UncheckedIOException(ex);
                }
            });
        }
        return files;
    }

    /**
     * The child JVM: read the journal named by the first argument and print how many events it holds.
     */
    public static final class ReadJournal
    {
        public static void main(final String[] args)
        {
            try (JournalReader reader = JournalReader.open(Path.of(args[0])))
            {
                final int[] count = new int[1];
                reader.readAvailable(record -> count[0]++);
                System.out.println("read " + count[0] + " events");
            }
        }
    }
}
