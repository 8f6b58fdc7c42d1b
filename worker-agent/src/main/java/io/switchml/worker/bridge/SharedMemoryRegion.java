package io.switchml.worker.bridge;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * The shared-memory file through which tensor data passes between the training process and the
 * bridge: created with mode 0600 (0660 for a host agent's session, whose training process is a member of the agent's
 * group), mapped read-write, holding float32 elements in the platform's
 * native byte order (the layout of a CPU {@code torch.float32} tensor). The file is deleted on
 * {@link #close()}.
 */
final class SharedMemoryRegion implements AutoCloseable
{
    private final Path path;
    private final long sizeBytes;
    private final Arena arena;
    private final MemorySegment segment;

    private SharedMemoryRegion(final Path path, final long sizeBytes, final Arena arena, final MemorySegment segment)
    {
        this.path = path;
        this.sizeBytes = sizeBytes;
        this.arena = arena;
        this.segment = segment;
    }

    /**
     * Create (replacing a stale file) and map the region.
     *
     * @throws IOException when the file cannot be created or its file system lacks the space.
     */
    static SharedMemoryRegion create(final Path path, final long sizeBytes) throws IOException
    {
        return create(path, sizeBytes, false);
    }

    /**
     * @param groupAccess whether the file's group may read and write it too (mode 0660).
     */
    static SharedMemoryRegion create(final Path path, final long sizeBytes, final boolean groupAccess) throws IOException
    {
        final Path dir = path.toAbsolutePath().getParent();
        if (dir == null || !Files.isDirectory(dir))
        {
            throw new IOException("--shm " + path + ": directory " + dir + " does not exist");
        }
        final long usable = Files.getFileStore(dir).getUsableSpace();
        if (usable < sizeBytes)
        {
            throw new IOException("--shm-bytes " + sizeBytes + " exceeds the " + usable + " bytes free in " + dir +
                "; lower --shm-bytes or free space there");
        }
        Files.deleteIfExists(path);
        final Arena arena = Arena.ofShared();
        final java.util.Set<java.nio.file.attribute.PosixFilePermission> mode =
            PosixFilePermissions.fromString(groupAccess ? "rw-rw----" : "rw-------");
        // created with the mode (never more open than asked, whatever the umask), then set to it (the umask may have
        // taken the group's write away)
        try (FileChannel channel = FileChannel.open(path, java.util.Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
            StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(mode)))
        {
            Files.setPosixFilePermissions(path, mode);
            // mapping beyond the end grows the file (sparse on tmpfs); the mapping outlives the channel
            final MemorySegment segment = channel.map(FileChannel.MapMode.READ_WRITE, 0, sizeBytes, arena);
            return new SharedMemoryRegion(path, sizeBytes, arena, segment);
        }
        catch (final IOException | RuntimeException ex)
        {
            arena.close();
            Files.deleteIfExists(path);
            throw new IOException("cannot create --shm " + path + " of " + sizeBytes + " bytes: " + ex, ex);
        }
    }

    Path path()
    {
        return path;
    }

    long sizeBytes()
    {
        return sizeBytes;
    }

    /**
     * Part of the region, of {@code count} 4-byte elements (native order, as a CPU {@code torch.float32} or
     * {@code torch.int32} tensor lays them out).
     *
     * @param offsetBytes start, a multiple of 4.
     * @param count       elements; the part must lie inside the region and span at most 2 GiB.
     * @param typeName    the element type, for the message.
     * @throws IllegalArgumentException naming the bad offset or count.
     */
    MemorySegment segment(final long offsetBytes, final long count, final String typeName)
    {
        if (offsetBytes < 0 || offsetBytes % Float.BYTES != 0)
        {
            throw new IllegalArgumentException("offset must be a non-negative multiple of 4 bytes: " + offsetBytes);
        }
        if (count < 0)
        {
            throw new IllegalArgumentException("count must not be negative: " + count);
        }
        // count is checked against the region before it is multiplied: a huge one would overflow into a negative length
        final long lengthBytes = count > sizeBytes / Float.BYTES ? Long.MAX_VALUE : count * Float.BYTES;
        if (offsetBytes > sizeBytes || lengthBytes > sizeBytes - offsetBytes)
        {
            throw new IllegalArgumentException("offset " + offsetBytes + " + " + count + " " + typeName + " elements (" +
                (lengthBytes == Long.MAX_VALUE ? "more than " + sizeBytes : lengthBytes) + " bytes) exceeds the shared memory of " + sizeBytes + " bytes at " + path);
        }
        if (lengthBytes > Integer.MAX_VALUE - 8)
        {
            throw new IllegalArgumentException(count + " elements exceed the largest single request of " +
                (Integer.MAX_VALUE - 8) / Float.BYTES + " elements; send it in pieces");
        }
        return segment.asSlice(offsetBytes, lengthBytes);
    }

    /**
     * Unmap and delete the file. Views handed out before fail on use afterwards.
     */
    public void close()
    {
        try
        {
            arena.close();
        }
        catch (final IllegalStateException ignore)
        {
            // a view is still in use by a thread being torn down; the mapping goes with the process
        }
        try
        {
            Files.deleteIfExists(path);
        }
        catch (final IOException ignore)
        {
            // nothing more to do on the way out
        }
    }
}
