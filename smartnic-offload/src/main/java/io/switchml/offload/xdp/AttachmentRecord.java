package io.switchml.offload.xdp;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The id of the program an appliance attached to an interface, kept in the backend's state directory
 * ({@code <dir>/backends/xdp/attached-IFNAME}, one line {@code id=N}). A restarted appliance that may not read an
 * attached program's name (no CAP_SYS_ADMIN, as under the systemd unit) knows from it that the program it finds is
 * the one its predecessor left after a kill -9, and replaces it; see {@link XdpAttachment}.
 */
final class AttachmentRecord
{
    private static final String PREFIX = "id=";

    private AttachmentRecord()
    {
    }

    static Path file(final Path stateDirectory, final String interfaceName)
    {
        return stateDirectory.resolve("attached-" + interfaceName);
    }

    /**
     * @return the recorded program id, or 0 when nothing (readable) was recorded: the caller then replaces only a
     * program whose name it can read as ours.
     */
    static int read(final Path stateDirectory, final String interfaceName)
    {
        try
        {
            final String text = Files.readString(file(stateDirectory, interfaceName), StandardCharsets.US_ASCII).strip();
            return text.startsWith(PREFIX) ? Math.max(0, Integer.parseInt(text.substring(PREFIX.length()))) : 0;
        }
        catch (final IOException | NumberFormatException ex)
        {
            return 0;
        }
    }

    /**
     * Record a program id, replacing the file atomically so that a crash leaves the old record or the new one.
     *
     * @throws IOException when the directory is not writable.
     */
    static void write(final Path stateDirectory, final String interfaceName, final int programId) throws IOException
    {
        final Path target = file(stateDirectory, interfaceName);
        final Path temporary = target.resolveSibling(target.getFileName() + ".tmp");
        Files.writeString(temporary, PREFIX + programId + "\n", StandardCharsets.US_ASCII);
        Files.move(temporary, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
