package io.switchml.worker.bridge;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Which pages a shared-memory directory gives: the mountinfo reading on sample lines, then on real tmpfs mounts (root,
 * as CI runs), one with the options of the package's {@code systemd/run-switchml-shm.mount}, read from the unit, whose
 * region's mapping the kernel must back with huge pages (ShmemPmdMapped in /proc/self/smaps), and one without.
 */
@Timeout(60)
class SharedMemoryPagesTest
{
    private static final long MIB = 1L << 20;

    @TempDir
    Path tempDir;

    @Test
    void theLongestAndLatestMountPointHoldsThePath()
    {
        final List<String> mountinfo = List.of(
            "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda rw",
            "25 22 0:21 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=24683620k",
            "30 22 0:30 / /run rw,nosuid shared:5 - tmpfs tmpfs rw,mode=755",
            "31 30 0:31 / /run/switchml/shm rw,nosuid,nodev,noexec shared:6 - tmpfs switchml-shm rw,size=100k,huge=within_size",
            "32 22 0:32 / /mnt/with\\040space rw master:7 - tmpfs none rw,huge=always",
            "33 25 0:33 / /dev/shm rw shared:8 - tmpfs later rw,huge=always",
            "garbage");

        final SharedMemoryPages.Mount packaged = SharedMemoryPages.mountOf(Path.of("/run/switchml/shm/a/b.shm"), mountinfo);
        assertEquals("/run/switchml/shm", packaged.point());
        assertEquals("within_size", packaged.option("huge", "never"));
        assertEquals("/run", SharedMemoryPages.mountOf(Path.of("/run/switchml/shmx"), mountinfo).point(),
            "a mount point is a prefix only up to a slash");
        assertEquals("/", SharedMemoryPages.mountOf(Path.of("/var/tmp"), mountinfo).point());
        assertEquals("rw,huge=always", SharedMemoryPages.mountOf(Path.of("/dev/shm/x"), mountinfo).superOptions(),
            "a later mount on the same point hides the earlier");
        assertEquals("/mnt/with space", SharedMemoryPages.mountOf(Path.of("/mnt/with space/f"), mountinfo).point());
        assertNull(SharedMemoryPages.mountOf(Path.of("/x"), List.of("garbage", "")));
    }

    @Test
    void hugePagesComeFromTheMountsOptionUnlessTheHostForcesOrDeniesThem()
    {
        final SharedMemoryPages.Mount within = new SharedMemoryPages.Mount("/a", "tmpfs", "rw,huge=within_size");
        final SharedMemoryPages.Mount always = new SharedMemoryPages.Mount("/a", "tmpfs", "rw,huge=always");
        final SharedMemoryPages.Mount advise = new SharedMemoryPages.Mount("/a", "tmpfs", "rw,huge=advise");
        final SharedMemoryPages.Mount plain = new SharedMemoryPages.Mount("/a", "tmpfs", "rw,size=10k");
        final SharedMemoryPages.Mount disk = new SharedMemoryPages.Mount("/", "ext4", "rw,huge=always");

        assertTrue(SharedMemoryPages.huge(within, "never"));
        assertTrue(SharedMemoryPages.huge(always, null));
        assertFalse(SharedMemoryPages.huge(advise, "never"), "advise needs an madvise the agent does not make");
        assertFalse(SharedMemoryPages.huge(plain, "never"));
        assertTrue(SharedMemoryPages.huge(plain, "force"));
        assertFalse(SharedMemoryPages.huge(within, "deny"));
        assertFalse(SharedMemoryPages.huge(disk, "force"), "only a tmpfs");
        assertEquals("never", SharedMemoryPages.selected(List.of("always within_size advise [never] deny force")));
        assertNull(SharedMemoryPages.selected(List.of()));
        assertEquals("huge", SharedMemoryPages.kind("huge (tmpfs huge=within_size on /run/switchml/shm)"));
    }

    @Test
    void thePackagedMountsOptionsGiveTheRegionHugePagesAndAPlainTmpfsDoesNot() throws Exception
    {
        final String options = SmallTmpfs.packagedOptions();
        assertTrue(options.contains("huge=within_size"), options);
        try (SmallTmpfs packaged = new SmallTmpfs(tempDir.resolve("huge"), options);
            SmallTmpfs plain = new SmallTmpfs(tempDir.resolve("plain"), 64 * MIB))
        {
            final String hugeDescription = SharedMemoryPages.describe(packaged.dir());
            assertTrue(hugeDescription.startsWith("huge (tmpfs huge=within_size on " + packaged.dir().toRealPath()),
                hugeDescription);
            final String plainDescription = SharedMemoryPages.describe(plain.dir());
            final String shmem = SharedMemoryPages.selected(Files.readAllLines(
                Path.of("/sys/kernel/mm/transparent_hugepage/shmem_enabled")));
            assertEquals("force".equals(shmem) ? "huge" : "4k", SharedMemoryPages.kind(plainDescription), plainDescription);

            final long hugeBefore = shmemPmdMappedKiB();
            try (SharedMemoryRegion region = SharedMemoryRegion.create(packaged.dir().resolve("rank0.shm"), 16 * MIB))
            {
                final MemorySegment written = region.segment(0, 8 * MIB / Float.BYTES, "float32");
                written.fill((byte)3);
                assertTrue(shmemPmdMappedKiB() - hugeBefore >= 8 * 1024,
                    "8 MiB written through the region's mapping are mapped by huge pages: ShmemPmdMapped grew by " +
                    (shmemPmdMappedKiB() - hugeBefore) + " kB");
            }
        }
    }

    /** The sum of ShmemPmdMapped over this process's mappings, in kB. */
    private static long shmemPmdMappedKiB() throws Exception
    {
        long sum = 0;
        for (final String line : Files.readAllLines(Path.of("/proc/self/smaps")))
        {
            if (line.startsWith("ShmemPmdMapped:"))
            {
                sum += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return sum;
    }
}
