package io.switchml.worker.bridge;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A {@code worker serve} that cannot join its job says so on stdout ({@code ERROR rank=...}, which the Python client
 * reads) and, when its stderr is the journal's stream (as under {@code switchml-worker@.service}), also as an error
 * record with syslog priority 3, so that {@code journalctl -p err} shows the failed join; outside the journal, once.
 */
@Timeout(60)
final class WorkerServeJournalTest
{
    @TempDir
    Path dir;

    @Test
    void aFailedJoinIsAnErrorInTheJournalAndOneStdoutLineOutsideIt() throws Exception
    {
        final int closedPort;
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()))
        {
            closedPort = socket.getLocalPort();
        }
        final Path stderr = Files.createFile(dir.resolve("stderr"));
        final Map<String, Object> stream = Files.readAttributes(stderr, "unix:dev,ino");
        final Process journal = start(closedPort, "journal", stream.get("dev") + ":" + stream.get("ino"));
        assertEquals(3, journal.exitValue(), lines("stdout-journal") + " " + lines("stderr"));
        assertTrue(lines("stdout-journal").stream().anyMatch((line) -> line.startsWith("ERROR rank=0 ")),
            lines("stdout-journal").toString());
        assertTrue(lines("stderr").stream().anyMatch((line) -> line.startsWith("<3>ERROR") && line.contains("ERROR rank=0 ")),
            lines("stderr").toString());

        final Process terminal = start(closedPort, "terminal", null);
        assertEquals(3, terminal.exitValue());
        assertTrue(lines("stdout-terminal").stream().anyMatch((line) -> line.startsWith("ERROR rank=0 ")));
        assertTrue(lines("stderr-terminal").stream().noneMatch((line) -> line.contains("ERROR rank=0 ")),
            "printed once outside the journal: " + lines("stderr-terminal"));
    }

    private Process start(final int controlPort, final String name, final String journalStream) throws Exception
    {
        final ProcessBuilder builder = new ProcessBuilder(ProcessHandle.current().info().command().orElseThrow(),
            "--enable-native-access=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED", "-Xmx128m",
            "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"), WorkerServeCommand.class.getName(),
            "--control-port", Integer.toString(controlPort), "--job", "gone", "--token", "token-of-gone", "--world", "2",
            "--rank", "0", "--socket", dir.resolve(name + ".sock").toString(), "--shm", dir.resolve(name + ".shm").toString(),
            "--shm-bytes", "65536", "--join-timeout-ms", "2000")
            .redirectOutput(dir.resolve("stdout-" + name).toFile());
        if (journalStream != null)
        {
            builder.redirectError(ProcessBuilder.Redirect.appendTo(dir.resolve("stderr").toFile()));
            builder.environment().put("JOURNAL_STREAM", journalStream);
        }
        else
        {
            builder.redirectError(dir.resolve("stderr-" + name).toFile());
            builder.environment().remove("JOURNAL_STREAM");
        }
        builder.environment().remove("NOTIFY_SOCKET");
        builder.environment().remove("SWITCHML_JOB_TOKEN");
        final Process process = builder.start();
        assertTrue(process.waitFor(45, TimeUnit.SECONDS), "worker serve did not exit");
        return process;
    }

    private List<String> lines(final String name) throws Exception
    {
        return Files.readAllLines(dir.resolve(name));
    }
}
