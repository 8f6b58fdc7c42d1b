package io.switchml.protocol;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

/**
 * The check every file holding a secret passes before it is read (credentials, a TLS keystore and its password
 * file), as ssh does for a private key: nobody but its owner may read or write it.
 */
public final class SecretFiles
{
    private static final Set<PosixFilePermission> OPEN = EnumSet.of(PosixFilePermission.GROUP_READ,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE);

    private SecretFiles()
    {
    }

    /**
     * @param what what the file is, for the message ("credentials file", "TLS keystore").
     * @throws IllegalArgumentException naming the file and the permissions when group or others may read or write it.
     * @throws IOException              when its permissions cannot be read (it is missing, for one).
     */
    public static void requirePrivate(final Path file, final String what) throws IOException
    {
        final Set<PosixFilePermission> open = EnumSet.copyOf(OPEN);
        open.retainAll(Files.getPosixFilePermissions(file));
        if (!open.isEmpty())
        {
            throw new IllegalArgumentException(what + " " + file + " is readable or writable by other users " + open +
                ": chmod 600 it");
        }
    }
}
