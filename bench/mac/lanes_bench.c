/*
 * lanes_bench.c: GB/s of the native MAC lanes (protocol/src/main/c/switchml_mac.c, included as it is) against the
 * loops they replaced in session 49, which gathered each word of every lane from its packet (_mm512_i64gather_epi64,
 * _mm256_i64gather_epi64). Every variant's MACs are first checked against the one-packet-at-a-time SipHash-2-4 of
 * the same file. Best of 5 runs of about 4 GB each; single-threaded. Run it with bench/mac/run.sh.
 */
#include "../../protocol/src/main/c/switchml_mac.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Session 48's loops: word w of every lane gathered from packets[j] + 8w, on the library's own SipHash helpers. */
__attribute__((target("avx512f"))) static void gather_eight(
    uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t length, uint64_t *macs)
{
    const uint8_t *p[8];
    uint64_t lasts[8];
    lanes_of(packets, 8, length, p, lasts);
    const __m512i base = _mm512_loadu_si512((const void *)packets);
    state512 s = start512(k0, k1);
    for (int32_t w = 0; w < length >> 3; w++)
    {
        absorb512(&s, gather_word512(base, w));
    }
    finish512(&s, lasts, macs);
}

__attribute__((target("avx2"))) static void gather_four(
    uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t length, uint64_t *macs)
{
    const uint8_t *p[4];
    uint64_t lasts[4];
    lanes_of(packets, 4, length, p, lasts);
    const __m256i base = _mm256_loadu_si256((const __m256i *)packets);
    state256 s = start256(k0, k1);
    for (int32_t w = 0; w < length >> 3; w++)
    {
        absorb256(&s, gather_word256(base, w));
    }
    finish256(&s, lasts, macs);
}

/* Eight packets one after the other, as without vector lanes. */
static void one_at_a_time(uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t length, uint64_t *macs)
{
    for (int j = 0; j < 8; j++)
    {
        macs[j] = mac_one(k0, k1, (const uint8_t *)(uintptr_t)packets[j], length);
    }
}

typedef void (*lanes_fn)(uint64_t, uint64_t, const uint64_t *, int32_t, uint64_t *);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int run(const char *name, lanes_fn f, int lanes, int length, uint8_t *const *packets)
{
    uint64_t addresses[16], macs[16];
    for (int j = 0; j < lanes; j++)
    {
        addresses[j] = (uint64_t)(uintptr_t)packets[j];
    }
    f(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, addresses, length, macs);
    for (int j = 0; j < lanes; j++)
    {
        if (macs[j] != mac_one(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, packets[j], length))
        {
            printf("%s, %d-byte packets: lane %d differs from the one-packet MAC\n", name, length, j);
            return 1;
        }
    }
    const long calls = (long)(4e9 / ((double)length * lanes));
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++)
    {
        const double start = now();
        for (long i = 0; i < calls; i++)
        {
            f((uint64_t)i, 2, addresses, length, macs);
            __asm__ volatile("" ::: "memory");
        }
        const double seconds = now() - start;
        best = seconds < best ? seconds : best;
    }
    printf("| %s | %d | %.2f |\n", name, length, (double)calls * length * lanes / best / 1e9);
    return 0;
}

int main(void)
{
    static const int lengths[] = { 1064, 8972, 32808 };
    const int32_t width = switchml_mac_lanes();
    uint8_t *packets[16];
    for (int j = 0; j < 16; j++)
    {
        packets[j] = aligned_alloc(64, 65536);
        for (int i = 0; i < 65536; i++)
        {
            packets[j][i] = (uint8_t)(j * 131 + i * 7 + (i >> 8));
        }
    }
    printf("this CPU's lanes: %d\n\n| loop | packet bytes | GB/s |\n|---|---:|---:|\n", width);
    int failed = 0;
    for (int l = 0; l < 3; l++)
    {
        if (width >= 8)
        {
            failed |= run("mac_sixteen (two sets of eight lanes)", mac_sixteen, 16, lengths[l], packets);
            failed |= run("mac_eight (transposed loads)", mac_eight, 8, lengths[l], packets);
            failed |= run("gather_eight (session 48)", gather_eight, 8, lengths[l], packets);
        }
        if (width >= 4)
        {
            failed |= run("mac_four (transposed loads)", mac_four, 4, lengths[l], packets);
            failed |= run("gather_four (session 48)", gather_four, 4, lengths[l], packets);
        }
        failed |= run("mac_one, each packet alone", one_at_a_time, 8, lengths[l], packets);
    }
    printf("\nswitchml_mac_packets as the library dispatches it, %d-byte packets (sixteen lanes for 10 or more, eight"
        " for more than four, four for two to four, one alone):\n\n| packets per call | ns per call | ns per packet |\n|---:|---:|---:|\n",
        lengths[1]);
    uint64_t addresses[16], macs[16];
    for (int j = 0; j < 16; j++)
    {
        addresses[j] = (uint64_t)(uintptr_t)packets[j];
    }
    for (int count = 1; count <= 16; count++)
    {
        const long calls = (long)(2e9 / ((double)lengths[1] * count));
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++)
        {
            const double start = now();
            for (long i = 0; i < calls; i++)
            {
                switchml_mac_packets((uint64_t)i, 2, addresses, count, lengths[1], macs);
                __asm__ volatile("" ::: "memory");
            }
            const double seconds = now() - start;
            best = seconds < best ? seconds : best;
        }
        printf("| %d | %.0f | %.0f |\n", count, best / (double)calls * 1e9, best / (double)calls / count * 1e9);
    }
    return failed;
}
