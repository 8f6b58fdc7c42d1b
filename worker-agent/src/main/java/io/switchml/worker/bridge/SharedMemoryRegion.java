package io.switchml.worker.bridge;

import io.switchml.protocol.NativeCalls;
import io.switchml.protocol.udp.NativeUdp;

import java.io.IOException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
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
 * <p>
 * The file is sparse: a page takes memory when it is first touched, and a page that its file system (a tmpfs such as
 * /dev/shm, shared with every other session's file) cannot back kills the toucher with SIGBUS. So every range is
 * reserved with posix_fallocate before it is handed out ({@link #segment}), in {@link #RESERVE_GRANULE_BYTES} steps
 * remembered in a bitmap: a full file system is an exception naming the file, its directory and the bytes asked and
 * free, and the region commits only the memory its requests use, not its whole size up front. The Python client
 * reserves the ranges it writes the same way.
 * <p>
 * A newly reserved range is also mapped into this process at once, writable, by one madvise(MADV_POPULATE_WRITE)
 * (Linux 5.14 and later; where the kernel answers EINVAL it is not tried again): the agent's first touch of a page the
 * training process wrote is otherwise a fault in the middle of the all-reduce, taken by the lane kernels. On this
 * project's 2-vCPU VM (kernel 6.18, the package's tmpfs of huge pages) a second mapping's first read of 100 MiB freshly
 * written by the first took 35.6-39.8 ms through its 50 faults and 4.7-5.4 ms after the madvise, which took 0.1-0.2 ms;
 * its second read 3.9-4.3 ms ({@code bench/shm/run.sh populate}). The madvise changes no data: a page nobody wrote yet
 * reads zeros either way. {@code -Dswitchml.shm.populate=false} turns it off.
 */
final class SharedMemoryRegion implements AutoCloseable
{
    /** Step in which the region is reserved: one posix_fallocate per new 2 MiB at most, none once reserved. */
    static final long RESERVE_GRANULE_BYTES = 2L << 20;

    private static final int O_RDWR = 2;
    private static final int O_CLOEXEC = 0x80000;
    private static final int ENOSPC = 28;
    private static final int MADV_POPULATE_WRITE = 23;
    private static final int EINVAL = 22;
    /** The property that turns the madvise of newly reserved ranges off (true by default). */
    static final String POPULATE_PROP = "switchml.shm.populate";
    private static final MethodHandle OPEN;
    private static final MethodHandle POSIX_FALLOCATE;
    private static final MethodHandle MADVISE;
    /** False once a madvise failed with EINVAL: the kernel has no MADV_POPULATE_WRITE (or the property turned it off). */
    private static volatile boolean populate = Boolean.parseBoolean(System.getProperty(POPULATE_PROP, "true"));

    static
    {
        MethodHandle open = null;
        MethodHandle fallocate = null;
        MethodHandle madvise = null;
        try
        {
            final Linker linker = Linker.nativeLinker();
            open = linker.defaultLookup().find("open").map(symbol -> linker.downcallHandle(symbol,
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
                Linker.Option.firstVariadicArg(2))).orElse(null);
            fallocate = linker.defaultLookup().find("posix_fallocate").map(NativeCalls::intCall).orElse(null);
            madvise = linker.defaultLookup().find("madvise").map(symbol -> NativeCalls.intCall(symbol, NativeCalls.CAPTURE_ERRNO))
                .orElse(null);
        }
        catch (final RuntimeException | LinkageError ex)
        {
            // no libc (not Linux): the region goes unreserved, as before
        }
        OPEN = open;
        POSIX_FALLOCATE = fallocate;
        MADVISE = madvise;
    }

    private final Path path;
    private final long sizeBytes;
    private final Arena arena;
    private final MemorySegment segment;
    /** The file, open for posix_fallocate; -1 where libc cannot be called. */
    private final int fd;
    private final long[] reservedGranules;
    private final int granuleCount;
    private int reservedCount;
    private long populatedBytes;
    private boolean fdClosed;

    private SharedMemoryRegion(final Path path, final long sizeBytes, final Arena arena, final MemorySegment segment,
        final int fd)
    {
        this.path = path;
        this.sizeBytes = sizeBytes;
        this.arena = arena;
        this.segment = segment;
        this.fd = fd;
        this.granuleCount = (int)((sizeBytes + RESERVE_GRANULE_BYTES - 1) / RESERVE_GRANULE_BYTES);
        this.reservedGranules = new long[(granuleCount + 63) >>> 6];
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
            return new SharedMemoryRegion(path, sizeBytes, arena, segment, openForReserve(path));
        }
        catch (final IOException | RuntimeException ex)
        {
            arena.close();
            Files.deleteIfExists(path);
            throw new IOException("cannot create --shm " + path + " of " + sizeBytes + " bytes: " + ex, ex);
        }
    }

    private static int openForReserve(final Path path) throws IOException
    {
        // close(2) and strerror are the shared transport's bindings (NativeUdp); open and posix_fallocate are ours
        if (OPEN == null || POSIX_FALLOCATE == null || !NativeUdp.isAvailable())
        {
            return -1;
        }
        try (Arena names = Arena.ofConfined())
        {
            final int fd = (int)OPEN.invokeExact(names.allocateFrom(path.toString()), O_RDWR | O_CLOEXEC, 0);
            if (fd < 0)
            {
                throw new IOException("cannot open " + path + " to reserve its memory");
            }
            return fd;
        }
        catch (final IOException | RuntimeException | Error ex)
        {
            throw ex;
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException(ex);
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
     * @throws IllegalStateException    when the file system cannot back the part: {@link #reserve}.
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
        reserve(offsetBytes, lengthBytes);
        return segment.asSlice(offsetBytes, lengthBytes);
    }

    /**
     * Back a range with memory before anything touches it, so that a full file system is this exception and not a
     * SIGBUS in whichever thread first touches a page of it (the agent's shard, or the training process). The
     * granules not reserved yet are reserved in one posix_fallocate; a range reserved already costs no system call.
     *
     * @throws IllegalStateException naming the file, its directory, the bytes asked and free, and what to change.
     */
    synchronized void reserve(final long offsetBytes, final long lengthBytes)
    {
        if (fd < 0 || lengthBytes <= 0 || reservedCount == granuleCount)
        {
            return;
        }
        if (fdClosed)
        {
            throw new IllegalStateException("the shared memory " + path + " is closed");
        }
        final int first = (int)(offsetBytes / RESERVE_GRANULE_BYTES);
        final int last = (int)((offsetBytes + lengthBytes - 1) / RESERVE_GRANULE_BYTES);
        int from = -1;
        int to = -1;
        for (int granule = first; granule <= last; granule++)
        {
            if ((reservedGranules[granule >>> 6] & (1L << granule)) == 0)
            {
                from = from < 0 ? granule : from;
                to = granule;
            }
        }
        if (from < 0)
        {
            return;
        }
        final long start = from * RESERVE_GRANULE_BYTES;
        final long length = Math.min(sizeBytes, (to + 1) * RESERVE_GRANULE_BYTES) - start;
        final int error = fallocate(start, length);
        if (error != 0)
        {
            throw new IllegalStateException(reserveFailure(start, length, error));
        }
        for (int granule = from; granule <= to; granule++)
        {
            if ((reservedGranules[granule >>> 6] & (1L << granule)) == 0)
            {
                reservedGranules[granule >>> 6] |= 1L << granule;
                reservedCount++;
            }
        }
        populate(start, length);
    }

    /**
     * Map a newly reserved range into this process, writable, in one system call (class comment). A kernel without
     * MADV_POPULATE_WRITE (EINVAL) stops the next tries; any other failure leaves the range to fault as before.
     */
    private void populate(final long start, final long length)
    {
        if (!populate || MADVISE == null)
        {
            return;
        }
        try (Arena callState = Arena.ofConfined())
        {
            final MemorySegment state = NativeCalls.allocateCallState(callState);
            if ((int)MADVISE.invokeExact(state, segment.address() + start, length, (long)MADV_POPULATE_WRITE, 0L, 0L,
                0L) == 0)
            {
                populatedBytes += length;
            }
            else if (NativeCalls.errno(state) == EINVAL)
            {
                populate = false;
            }
        }
        catch (final Throwable ex)
        {
            populate = false;
        }
    }

    /**
     * @return bytes of this region mapped in advance by {@link #populate} so far.
     */
    synchronized long populatedBytes()
    {
        return populatedBytes;
    }

    private int fallocate(final long start, final long length)
    {
        try
        {
            int error;
            do
            {
                error = (int)POSIX_FALLOCATE.invokeExact((long)fd, start, length, 0L, 0L, 0L);
            }
            while (error == NativeUdp.EINTR);
            return error;
        }
        catch (final Throwable ex)
        {
            throw new IllegalStateException("posix_fallocate of " + path + " failed: " + ex, ex);
        }
    }

    private String reserveFailure(final long start, final long length, final int error)
    {
        final Path dir = path.getParent();
        long free = -1;
        try
        {
            free = Files.getFileStore(path).getUsableSpace();
        }
        catch (final IOException ignore)
        {
            // the message goes without it
        }
        if (error != ENOSPC)
        {
            return "cannot reserve " + length + " bytes at offset " + start + " of the shared memory " + path +
                ": posix_fallocate: " + NativeUdp.describeErrno(error);
        }
        return "cannot reserve " + length + " bytes at offset " + start + " of the shared memory " + path + ": " +
            (free < 0 ? "no" : "only " + free) + " bytes free in " + dir + " (its file system, a tmpfs such as /dev/shm, " +
            "is shared with other sessions' shared memory, which takes memory as it is used); lower this agent's " +
            "--shm-bytes (the Python package's shm_bytes, SWITCHML_SHM_BYTES) or those of the other sessions there, " +
            "or enlarge the file system (mount -o remount,size=... " + dir + ")";
    }

    /**
     * Unmap and delete the file. Views handed out before fail on use afterwards.
     */
    public void close()
    {
        closeFd();
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

    private synchronized void closeFd()
    {
        if (fd < 0 || fdClosed)
        {
            return;
        }
        fdClosed = true;
        try (Arena callState = Arena.ofConfined())
        {
            NativeUdp.close(NativeUdp.allocateCallState(callState), fd);
        }
        catch (final RuntimeException ignore)
        {
            // nothing more to do on the way out
        }
    }
}
