// First touch of shared memory, as a training process and its agent make it: one process writes a file of SIZE bytes
// through a shared mapping (the rank filling its tensor), a second mapping of the same file then reads and writes one
// byte per 4 KiB (the agent reading the tensor and writing the result). Each phase is timed on CLOCK_MONOTONIC and
// printed with the file system's huge-page option, so /dev/shm (4 KiB pages unless shmem THP says otherwise) and a
// tmpfs mounted with huge=within_size can be compared. Build and run: bench/shm/run.sh.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shm_bench.h"

int main(int argc, char **argv)
{
    if (argc != 4)
    {
        fprintf(stderr, "usage: %s FILE MIB reserve|sparse\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    const long size = atol(argv[2]) << 20;
    const int reserve = strcmp(argv[3], "reserve") == 0;
    const int fd = new_file(path, size);
    if (fd < 0)
    {
        return 1;
    }
    double t = now_ms();
    if (reserve && posix_fallocate(fd, 0, size) != 0)
    {
        fprintf(stderr, "posix_fallocate failed\n");
        return 1;
    }
    const double reserve_ms = now_ms() - t;
    char *writer = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *reader = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (writer == MAP_FAILED || reader == MAP_FAILED)
    {
        perror("mmap");
        return 1;
    }
    t = now_ms();
    memset(writer, 1, size);
    const double write_ms = now_ms() - t;
    t = now_ms();
    long sum = 0;
    for (long i = 0; i < size; i += 4096)
    {
        sum += reader[i];
        reader[i] = 2;
    }
    const double touch_ms = now_ms() - t;
    t = now_ms();
    memset(writer, 3, size);
    const double again_ms = now_ms() - t;
    const long pages = size / 4096;
    printf("%s %ld MiB %s: reserve %.1f ms, first write %.1f ms (%.2f us per 4 KiB), second mapping's first touch "
           "%.1f ms (%.2f us per 4 KiB), write again %.1f ms [%ld]\n", path, size >> 20, reserve ? "reserved" : "sparse",
           reserve_ms, write_ms, write_ms * 1e3 / pages, touch_ms, touch_ms * 1e3 / pages, again_ms, sum);
    munmap(writer, size);
    munmap(reader, size);
    close(fd);
    unlink(path);
    return 0;
}
