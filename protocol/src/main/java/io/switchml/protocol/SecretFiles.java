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
    /** Longest token {@link #readToken} takes where its caller sets no other bound: the metrics token. */
    public static final int MAX_TOKEN_CHARS = 1024;

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

    /**
     * Read a token from a file that passes {@link #requirePrivate}: one run of printable ASCII without spaces, surrounding
     * whitespace ignored.
     *
     * @param what what the file is, for the messages ("metrics token file").
     * @throws IllegalArgumentException naming the file when others may read it, it is longer than a token, or it holds
     *                                  no token or anything else.
     * @throws IOException              when it cannot be read.
     */
    public static String readToken(final Path file, final String what, final int maxChars) throws IOException
    {
        requirePrivate(file, what);
        final String malformed = what + " " + file + " must hold one token of 1.." + maxChars +
            " printable ASCII characters without spaces";
        if (Files.size(file) > 2L * maxChars)
        {
            throw new IllegalArgumentException(malformed);
        }
        final String token = Files.readString(file, java.nio.charset.StandardCharsets.ISO_8859_1).strip();
        if (token.isEmpty() || token.length() > maxChars || !token.chars().allMatch((c) -> c > 0x20 && c < 0x7f))
        {
            throw new IllegalArgumentException(malformed);
        }
        return token;
    }
}
