// The agent's first pass over a tensor the training process wrote, with and without mapping it in advance: one mapping
// of a new file writes SIZE bytes (the rank filling its tensor), then a second mapping of the same file reads all of
// it twice (the agent's all-reduce, its first call and a later one). Variant "fault": the second mapping's pages come
// by its own page faults during the first read, as before session 56. Variant "populate": madvise(MADV_POPULATE_WRITE)
// maps them first, in one call, as SharedMemoryRegion now does when it reserves a range. Each phase is timed on
// CLOCK_MONOTONIC with the minor faults it took. Build and run: bench/shm/run.sh populate.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#include "shm_bench.h"

static long minor_faults(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

static long read_all(const volatile long *p, long n)
{
    long sum = 0;
    for (long i = 0; i < n; i++)
    {
        sum += p[i];
    }
    return sum;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "fault") != 0 && strcmp(argv[3], "populate") != 0))
    {
        fprintf(stderr, "usage: %s FILE MIB fault|populate\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    const long size = atol(argv[2]) << 20;
    const int populate = strcmp(argv[3], "populate") == 0;
    const int fd = new_file(path, size);
    if (fd < 0)
    {
        return 1;
    }
    long *writer = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    long *reader = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (writer == MAP_FAILED || reader == MAP_FAILED)
    {
        perror("mmap");
        return 1;
    }
    double t = now_ms();
    long faults = minor_faults();
    memset(writer, 1, size);
    const double write_ms = now_ms() - t;
    const long write_faults = minor_faults() - faults;
    double populate_ms = 0;
    if (populate)
    {
        t = now_ms();
        if (madvise(reader, size, MADV_POPULATE_WRITE) != 0)
        {
            perror("madvise(MADV_POPULATE_WRITE)");
            return 1;
        }
        populate_ms = now_ms() - t;
    }
    t = now_ms();
    faults = minor_faults();
    long sum = read_all(reader, size / 8);
    const double first_ms = now_ms() - t;
    const long first_faults = minor_faults() - faults;
    t = now_ms();
    sum += read_all(reader, size / 8);
    const double second_ms = now_ms() - t;
    printf("%s %ld MiB %-8s: first write %.1f ms (%ld faults), populate %.1f ms, the second mapping's first read "
           "%.1f ms (%ld faults), its second read %.1f ms [%ld]\n", path, size >> 20, argv[3], write_ms, write_faults,
           populate_ms, first_ms, first_faults, second_ms, sum & 1);
    munmap(writer, size);
    munmap(reader, size);
    close(fd);
    unlink(path);
    return 0;
}
