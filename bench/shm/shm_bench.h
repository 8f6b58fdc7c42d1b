// What bench/shm's programs share: a monotonic clock in milliseconds and a new file of SIZE bytes to map twice.
#ifndef SHM_BENCH_H
#define SHM_BENCH_H

#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// A new, empty file of size bytes at path (a stale one removed first); its descriptor, or -1 after perror.
static int new_file(const char *path, long size)
{
    unlink(path);
    const int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, size) != 0)
    {
        perror(path);
        return -1;
    }
    return fd;
}

#endif
