package io.switchml.worker.bridge;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * A tmpfs of a few MiB mounted for one test, standing in for a /dev/shm that other sessions' shared memory has
 * filled. Mounting needs root (CI runs as root); without it the test fails saying so, it is not skipped.
 */
final class SmallTmpfs implements AutoCloseable
{
    private final Path dir;

    SmallTmpfs(final Path dir, final long sizeBytes) throws IOException, InterruptedException
    {
        this(dir, "size=" + sizeBytes);
    }

    /**
     * @param options mount options, e.g. {@code size=8388608} or a unit's {@code Options=}.
     */
    SmallTmpfs(final Path dir, final String options) throws IOException, InterruptedException
    {
        this.dir = Files.createDirectories(dir);
        run("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir.toString());
    }

    /**
     * @return the {@code Options=} of the package's {@code systemd/run-switchml-shm.mount}, read from the unit.
     */
    static String packagedOptions() throws IOException
    {
        final Path unit = Path.of("..", "systemd", "run-switchml-shm.mount");
        final String prefix = "Options=";
        return Files.readAllLines(unit).stream().filter(line -> line.startsWith(prefix)).findFirst()
            .map(line -> line.substring(prefix.length())).orElseThrow(() -> new AssertionError("no Options= in " + unit));
    }

    Path dir()
    {
        return dir;
    }

    /**
     * Write a file of {@code bytes} (every page touched), as another session's shared memory in use.
     */
    Path fill(final String name, final long bytes) throws IOException
    {
        final Path file = dir.resolve(name);
        Files.write(file, new byte[Math.toIntExact(bytes)]);
        return file;
    }

    long freeBytes() throws IOException
    {
        return Files.getFileStore(dir).getUsableSpace();
    }

    long usedBytes() throws IOException
    {
        return Files.getFileStore(dir).getTotalSpace() - freeBytes();
    }

    public void close() throws IOException, InterruptedException
    {
        // lazily: a test client's MappedByteBuffer stays mapped until it is collected
        run("umount", "--lazy", dir.toString());
    }

    private static void run(final String... command) throws IOException, InterruptedException
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        if (!process.waitFor(30, TimeUnit.SECONDS))
        {
            process.destroyForcibly();
            fail(String.join(" ", command) + " did not finish within 30 s");
        }
        final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (process.exitValue() != 0)
        {
            fail("'" + String.join(" ", command) + "' failed (this test needs root to mount a small tmpfs; CI runs " +
                "as root): " + output);
        }
    }
}
