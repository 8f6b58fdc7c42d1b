/*
 * corelat: samples the round trip of one cache line between two CPUs, a few times a second, while a bench cell
 * runs. On a virtual machine the hypervisor may place the two vCPUs on cores that share a last-level cache (a
 * round trip of about 50 ns on this project's machines) or on cores that do not (about 300 ns), and move them
 * between the two for seconds at a time. Every byte of a loopback all-reduce crosses between the CPUs, so a cell's
 * speed follows that placement; the bench records it per cell so that rounds can be compared like with like.
 *
 * Written here because no packaged tool measures it at a low enough duty to run beside a timed cell: each sample is
 * a rendezvous of two pinned threads at the same instant, a few hundred round trips, and a bounded wait (a thread
 * that is not scheduled within 100 us gives up the sample), so it costs well under 0.1 % of a CPU.
 *
 *   corelat CPU_A CPU_B INTERVAL_MS      prints "<CLOCK_MONOTONIC seconds> <round trip ns or -1>" per sample
 *                                        until SIGTERM or SIGINT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCHES 20
#define TRIPS_PER_BATCH 16
#define RENDEZVOUS_NS 100000L
#define TRIP_TIMEOUT_NS 20000L

static _Atomic long ping __attribute__((aligned(64)));
static _Atomic long arrived_a __attribute__((aligned(64)));
static _Atomic long arrived_b __attribute__((aligned(64)));
static _Atomic long done_tick __attribute__((aligned(64)));
static volatile sig_atomic_t stop;
static struct timespec epoch;
static long interval_ns;
static int cpu_b;

static long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int pin(const int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void sleep_until_tick(const long tick)
{
    struct timespec at = epoch;
    const long ns = at.tv_nsec + tick * interval_ns;
    at.tv_sec += ns / 1000000000L;
    at.tv_nsec = ns % 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR && !stop)
    {
    }
}

static int wait_for(_Atomic long *const flag, const long value, const long timeout_ns)
{
    const long deadline = mono_ns() + timeout_ns;
    while (atomic_load_explicit(flag, memory_order_acquire) != value)
    {
        if (mono_ns() > deadline)
        {
            return 0;
        }
    }
    return 1;
}

/* the answering side: returns every odd value of ping as the next even one, until A says the tick is done */
static void *answer(void *unused)
{
    (void)unused;
    if (pin(cpu_b) != 0)
    {
        fprintf(stderr, "corelat: cannot pin to CPU %d\n", cpu_b);
        exit(2);
    }
    for (long tick = 1; !stop; tick++)
    {
        sleep_until_tick(tick);
        atomic_store_explicit(&arrived_b, tick, memory_order_release);
        if (!wait_for(&arrived_a, tick, RENDEZVOUS_NS))
        {
            continue;
        }
        const long deadline = mono_ns() + 10 * RENDEZVOUS_NS;
        while (atomic_load_explicit(&done_tick, memory_order_acquire) != tick && mono_ns() < deadline)
        {
            const long v = atomic_load_explicit(&ping, memory_order_acquire);
            if ((v & 1) != 0)
            {
                atomic_store_explicit(&ping, v + 1, memory_order_release);
            }
        }
    }
    return NULL;
}

static void on_signal(const int sig)
{
    (void)sig;
    stop = 1;
}

int main(const int argc, char **argv)
{
    if (argc != 4)
    {
        fprintf(stderr, "usage: corelat CPU_A CPU_B INTERVAL_MS\n");
        return 2;
    }
    const int cpu_a = atoi(argv[1]);
    cpu_b = atoi(argv[2]);
    interval_ns = atol(argv[3]) * 1000000L;
    if (cpu_a == cpu_b || interval_ns <= 0)
    {
        fprintf(stderr, "corelat: two different CPUs and an interval above 0 ms\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (pin(cpu_a) != 0)
    {
        fprintf(stderr, "corelat: cannot pin to CPU %d\n", cpu_a);
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &epoch);
    pthread_t answering;
    pthread_create(&answering, NULL, answer, NULL);
    long v = 1;
    for (long tick = 1; !stop; tick++)
    {
        sleep_until_tick(tick);
        if (stop)
        {
            break;
        }
        atomic_store_explicit(&arrived_a, tick, memory_order_release);
        long best = -1;
        if (wait_for(&arrived_b, tick, RENDEZVOUS_NS))
        {
            for (int b = 0; b < BATCHES; b++)
            {
                const long start = mono_ns();
                int complete = 1;
                for (int i = 0; i < TRIPS_PER_BATCH && complete; i++)
                {
                    atomic_store_explicit(&ping, v, memory_order_release);
                    complete = wait_for(&ping, v + 1, TRIP_TIMEOUT_NS);
                    v += 2;
                }
                if (!complete)
                {
                    /* the answering thread was preempted: resynchronise on an even value and end the sample */
                    v = (atomic_load(&ping) | 1) + 2;
                    break;
                }
                const long trip = (mono_ns() - start) / TRIPS_PER_BATCH;
                if (best < 0 || trip < best)
                {
                    best = trip;
                }
            }
        }
        atomic_store_explicit(&done_tick, tick, memory_order_release);
        if (stop)
        {
            break;
        }
        printf("%.3f %ld\n", mono_ns() / 1e9, best);
        fflush(stdout);
    }
    return 0;
}
