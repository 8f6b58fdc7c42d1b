package io.switchml.worker.bridge;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Which pages a directory's shared-memory files get, and where they go by default.
 * <p>
 * A training process writes its tensor into the agent's shared memory and the agent reads it: each side's first touch
 * of a page is a page fault. With 4 KiB pages a 100 MB tensor is 25,600 faults per side. On a VM such as a
 * firecracker guest one costs 7-15 µs, and a job's first all-reduce through a host agent took 0.6-0.85 s longer than
 * its steady ones (docs/bench/host-shm-2026-11-29.md). A tmpfs mounted with {@code huge=within_size} (or
 * {@code always}) backs the files with 2 MiB pages, 512 times fewer faults. The package mounts one at {@link #PACKAGED_DIRECTORY}
 * ({@code run-switchml-shm.mount}); /dev/shm has huge pages only where the host's shmem THP policy says
 * {@code force}.
 * <p>
 * Read from /proc/self/mountinfo (no library reads it) and /sys/kernel/mm/transparent_hugepage/shmem_enabled; on
 * another OS the answer is "unknown".
 */
final class SharedMemoryPages
{
    /** The package's tmpfs of huge pages ({@code systemd/run-switchml-shm.mount}). */
    static final Path PACKAGED_DIRECTORY = Path.of("/run/switchml/shm");
    /** The usual tmpfs for shared memory. */
    static final Path DEV_SHM = Path.of(BridgeContext.SHM_DIR_DEFAULT);

    private static final Path MOUNTINFO = Path.of("/proc/self/mountinfo");
    private static final Path SHMEM_ENABLED = Path.of("/sys/kernel/mm/transparent_hugepage/shmem_enabled");

    private SharedMemoryPages()
    {
    }

    /**
     * @return where shared-memory files go by default: {@link #PACKAGED_DIRECTORY} when it is a mount point this
     * process may write, else /dev/shm when it exists, else {@code $TMPDIR}.
     */
    static Path defaultDirectory()
    {
        final Mount packaged = mountOf(PACKAGED_DIRECTORY, readLines(MOUNTINFO));
        if (packaged != null && packaged.point().equals(PACKAGED_DIRECTORY.toString()) &&
            Files.isWritable(PACKAGED_DIRECTORY))
        {
            return PACKAGED_DIRECTORY;
        }
        return Files.isDirectory(DEV_SHM) ? DEV_SHM : Path.of(System.getProperty("java.io.tmpdir"));
    }

    /**
     * @return what the files in {@code directory} are backed by, for the start-up line: "huge (tmpfs huge=within_size
     * on /run/switchml/shm)", "4k (tmpfs huge=never on /dev/shm)", "4k (ext4 on /)", or "unknown (...)".
     */
    static String describe(final Path directory)
    {
        final Mount mount = mountOf(realPath(directory), readLines(MOUNTINFO));
        if (mount == null)
        {
            return "unknown (no /proc/self/mountinfo entry for " + directory + ")";
        }
        final String shmemEnabled = selected(readLines(SHMEM_ENABLED));
        return (huge(mount, shmemEnabled) ? "huge" : "4k") + " (" + mount.type() +
            ("tmpfs".equals(mount.type()) ? " huge=" + mount.option("huge", "never") : "") + " on " + mount.point() +
            ("tmpfs".equals(mount.type()) && shmemEnabled != null ? ", shmem THP " + shmemEnabled : "") + ")";
    }

    /**
     * @param description from {@link #describe}.
     * @return its first word: huge, 4k or unknown (the ready line's {@code shmPages=}).
     */
    static String kind(final String description)
    {
        final int space = description.indexOf(' ');
        return space < 0 ? description : description.substring(0, space);
    }

    /**
     * @param shmemEnabled the selected word of shmem_enabled ("force", "deny", ...) or null.
     * @return whether the mount's files are backed by huge pages without an madvise.
     */
    static boolean huge(final Mount mount, final String shmemEnabled)
    {
        if (!"tmpfs".equals(mount.type()) || "deny".equals(shmemEnabled))
        {
            return false;
        }
        if ("force".equals(shmemEnabled))
        {
            return true;
        }
        final String huge = mount.option("huge", "never");
        return "always".equals(huge) || "within_size".equals(huge);
    }

    /**
     * The mount holding {@code path}: the last entry (a later mount hides an earlier one) whose mount point is
     * the longest prefix of the path.
     *
     * @param mountinfo lines of /proc/self/mountinfo.
     * @return the mount, or null where no line parses.
     */
    static Mount mountOf(final Path path, final List<String> mountinfo)
    {
        final String target = path.toAbsolutePath().normalize().toString();
        Mount best = null;
        for (final String line : mountinfo)
        {
            final Mount mount = Mount.parse(line);
            if (mount != null && covers(mount.point(), target) &&
                (best == null || mount.point().length() >= best.point().length()))
            {
                best = mount;
            }
        }
        return best;
    }

    private static boolean covers(final String point, final String target)
    {
        return target.equals(point) || "/".equals(point) ||
            target.startsWith(point) && target.charAt(point.length()) == '/';
    }

    /**
     * @return the word in brackets of a sysfs choice line ("always within_size advise [never] deny force"), or null.
     */
    static String selected(final List<String> lines)
    {
        if (lines.isEmpty())
        {
            return null;
        }
        final String line = lines.get(0);
        final int open = line.indexOf('[');
        final int close = line.indexOf(']', open + 1);
        return open < 0 || close < 0 ? null : line.substring(open + 1, close);
    }

    private static Path realPath(final Path directory)
    {
        try
        {
            return directory.toRealPath();
        }
        catch (final IOException ex)
        {
            return directory.toAbsolutePath();
        }
    }

    private static List<String> readLines(final Path file)
    {
        try
        {
            return Files.readAllLines(file);
        }
        catch (final IOException | RuntimeException ex)
        {
            return List.of();
        }
    }

    /**
     * One line of /proc/self/mountinfo: {@code 36 35 98:0 /root /mnt rw,noatime master:1 - tmpfs none rw,huge=always}.
     *
     * @param point        the mount point, its octal escapes (\040 for a space) decoded.
     * @param type         the file system type.
     * @param superOptions the file system's own options.
     */
    record Mount(String point, String type, String superOptions)
    {
        static Mount parse(final String line)
        {
            final String[] fields = line.split(" ");
            int separator = -1;
            for (int i = 6; i < fields.length; i++)
            {
                if ("-".equals(fields[i]))
                {
                    separator = i;
                    break;
                }
            }
            if (fields.length < 5 || separator < 0 || separator + 3 >= fields.length)
            {
                return null;
            }
            return new Mount(unescape(fields[4]), fields[separator + 1], fields[separator + 3]);
        }

        /**
         * @return the value of {@code name=value} among the super options, or {@code absent}.
         */
        String option(final String name, final String absent)
        {
            for (final String option : superOptions.split(","))
            {
                if (option.startsWith(name + "="))
                {
                    return option.substring(name.length() + 1);
                }
            }
            return absent;
        }

        private static String unescape(final String field)
        {
            final StringBuilder out = new StringBuilder(field.length());
            for (int i = 0; i < field.length(); i++)
            {
                final char c = field.charAt(i);
                if (c == '\\' && i + 3 < field.length() && isOctal(field, i + 1))
                {
                    out.append((char)Integer.parseInt(field.substring(i + 1, i + 4), 8));
                    i += 3;
                }
                else
                {
                    out.append(c);
                }
            }
            return out.toString();
        }

        private static boolean isOctal(final String field, final int from)
        {
            for (int i = from; i < from + 3; i++)
            {
                if (field.charAt(i) < '0' || field.charAt(i) > '7')
                {
                    return false;
                }
            }
            return true;
        }
    }
}
