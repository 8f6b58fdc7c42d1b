/*
 * switchml_mac.c: the packet MAC (SipHash-2-4 over a data packet whose 8-byte MAC field, word 4, is taken as zero;
 * io.switchml.protocol.security.PacketMac) of several packets of one length at once, in the lanes of the CPU's vector
 * unit: 8 or 16 packets in AVX-512F registers, 4 in AVX2 registers, else one at a time. Called from Java through the
 * FFM API (NativePacketMac); it reads the packets and writes only the MACs out, allocates nothing, calls no library
 * and keeps no state but the vector width found once.
 *
 * The kernels share SipHash itself (a state of four vectors, and start, round, absorb and finish on it, at 512 and at
 * 256 bits: AVX-512F has a 64-bit rotate, AVX2 needs two shifts and an or) and differ in how they load the words.
 *
 * Our own code because it is the product's MAC: no library offers multi-buffer SipHash over our packet layout. Built
 * freestanding (no libc), so the shared object depends on nothing and loads in any process on x86-64 Linux; on other
 * CPUs it builds with the one-at-a-time path only.
 */
#include <stdint.h>

#include "switchml_cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MAC_WORD 4
#define EXPORT __attribute__((visibility("default")))

static const uint64_t INIT_V0 = 0x736f6d6570736575ULL;
static const uint64_t INIT_V1 = 0x646f72616e646f6dULL;
static const uint64_t INIT_V2 = 0x6c7967656e657261ULL;
static const uint64_t INIT_V3 = 0x7465646279746573ULL;

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v; /* x86-64 and every target we build for here are little-endian, as SipHash reads words */
}

/* The final word: the packet's trailing length % 8 bytes and, in the top byte, the length. */
static inline uint64_t last_word(const uint8_t *p, int32_t length)
{
    const uint8_t *tail = p + (length & ~7);
    uint64_t last = ((uint64_t)length) << 56;
    for (int i = (length & 7) - 1; i >= 0; i--)
    {
        last |= ((uint64_t)tail[i]) << (i * 8);
    }
    return last;
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                            \
    do                                                                      \
    {                                                                       \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);           \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                              \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                              \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);           \
    } while (0)

static uint64_t mac_one(uint64_t k0, uint64_t k1, const uint8_t *p, int32_t length)
{
    const int32_t words = length >> 3;
    uint64_t v0 = k0 ^ INIT_V0, v1 = k1 ^ INIT_V1, v2 = k0 ^ INIT_V2, v3 = k1 ^ INIT_V3;
    for (int32_t w = 0; w <= words; w++)
    {
        const uint64_t m = w == MAC_WORD ? 0 : (w < words ? load64(p + 8 * w) : last_word(p, length));
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

#if defined(__x86_64__)

#define INLINE inline __attribute__((always_inline))
#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2")))

/*
 * The four SipHash state words of every lane, one vector each. The helpers below are SipHash-2-4 on it (start,
 * one round, one message word, the finalization); the kernels differ only in how they load the words. Two states
 * side by side (mac_sixteen) run interleaved: the CPU finds each one's next round independent of the other's.
 */
typedef struct
{
    __m512i v0, v1, v2, v3;
} state512;

typedef struct
{
    __m256i v0, v1, v2, v3;
} state256;

/* The addresses of n packets, and each one's final word (trailing bytes and length), as every kernel needs them. */
static INLINE void lanes_of(
    const uint64_t *packets, int n, int32_t length, const uint8_t **p, uint64_t *lasts)
{
    for (int j = 0; j < n; j++)
    {
        p[j] = (const uint8_t *)(uintptr_t)packets[j];
        lasts[j] = last_word(p[j], length);
    }
}

AVX512 static INLINE state512 start512(uint64_t k0, uint64_t k1)
{
    state512 s;
    s.v0 = _mm512_set1_epi64((long long)(k0 ^ INIT_V0));
    s.v1 = _mm512_set1_epi64((long long)(k1 ^ INIT_V1));
    s.v2 = _mm512_set1_epi64((long long)(k0 ^ INIT_V2));
    s.v3 = _mm512_set1_epi64((long long)(k1 ^ INIT_V3));
    return s;
}

AVX512 static INLINE void round512(state512 *s)
{
    s->v0 = _mm512_add_epi64(s->v0, s->v1);
    s->v1 = _mm512_xor_si512(_mm512_rol_epi64(s->v1, 13), s->v0);
    s->v0 = _mm512_rol_epi64(s->v0, 32);
    s->v2 = _mm512_add_epi64(s->v2, s->v3);
    s->v3 = _mm512_xor_si512(_mm512_rol_epi64(s->v3, 16), s->v2);
    s->v0 = _mm512_add_epi64(s->v0, s->v3);
    s->v3 = _mm512_xor_si512(_mm512_rol_epi64(s->v3, 21), s->v0);
    s->v2 = _mm512_add_epi64(s->v2, s->v1);
    s->v1 = _mm512_xor_si512(_mm512_rol_epi64(s->v1, 17), s->v2);
    s->v2 = _mm512_rol_epi64(s->v2, 32);
}

/* One word m of every lane's message. */
AVX512 static INLINE void absorb512(state512 *s, __m512i m)
{
    s->v3 = _mm512_xor_si512(s->v3, m);
    round512(s);
    round512(s);
    s->v0 = _mm512_xor_si512(s->v0, m);
}

/* The final word (lasts, one per lane), the finalization rounds, and the lanes' MACs into macs. */
AVX512 static INLINE void finish512(state512 *s, const uint64_t *lasts, uint64_t *macs)
{
    absorb512(s, _mm512_loadu_si512((const void *)lasts));
    s->v2 = _mm512_xor_si512(s->v2, _mm512_set1_epi64(0xff));
    round512(s);
    round512(s);
    round512(s);
    round512(s);
    _mm512_storeu_si512((void *)macs, _mm512_xor_si512(_mm512_xor_si512(s->v0, s->v1), _mm512_xor_si512(s->v2, s->v3)));
}

/* Word w of the eight packets whose addresses are the lanes of base, gathered; zero for the MAC field. */
AVX512 static INLINE __m512i gather_word512(__m512i base, int32_t w)
{
    return w == MAC_WORD ?
        _mm512_setzero_si512() :
        _mm512_i64gather_epi64(_mm512_add_epi64(base, _mm512_set1_epi64(8LL * w)), (const void *)0, 1);
}

/*
 * Words w to w + 7 of eight packets, as eight vectors of one word each: columns[q] holds word w + q of packet j in lane
 * j, the MAC field's word zero. Eight 64-byte loads and an 8 x 8 transpose of 64-bit words (24 shuffles) cost less than
 * eight gathers: bench/mac/run.sh, 8,972-byte packets on Zen 4, 9.3 GB/s against 7.7-7.9 with a gather per word.
 */
AVX512 static INLINE void load_columns(const uint8_t *const *p, int32_t w, __m512i *columns)
{
    const __m512i low = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i high = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    const __m512i r0 = _mm512_loadu_si512((const void *)(p[0] + 8 * w));
    const __m512i r1 = _mm512_loadu_si512((const void *)(p[1] + 8 * w));
    const __m512i r2 = _mm512_loadu_si512((const void *)(p[2] + 8 * w));
    const __m512i r3 = _mm512_loadu_si512((const void *)(p[3] + 8 * w));
    const __m512i r4 = _mm512_loadu_si512((const void *)(p[4] + 8 * w));
    const __m512i r5 = _mm512_loadu_si512((const void *)(p[5] + 8 * w));
    const __m512i r6 = _mm512_loadu_si512((const void *)(p[6] + 8 * w));
    const __m512i r7 = _mm512_loadu_si512((const void *)(p[7] + 8 * w));
    /* pairs: t0 = words 0 2 4 6 of packets 0 and 1 interleaved, t1 = words 1 3 5 7 of them; and so on */
    const __m512i t0 = _mm512_unpacklo_epi64(r0, r1), t1 = _mm512_unpackhi_epi64(r0, r1);
    const __m512i t2 = _mm512_unpacklo_epi64(r2, r3), t3 = _mm512_unpackhi_epi64(r2, r3);
    const __m512i t4 = _mm512_unpacklo_epi64(r4, r5), t5 = _mm512_unpackhi_epi64(r4, r5);
    const __m512i t6 = _mm512_unpacklo_epi64(r6, r7), t7 = _mm512_unpackhi_epi64(r6, r7);
    /* quads: s0 = word 0 of packets 0-3, then word 4 of them; s1 = words 2 and 6; s2 = 1 and 5; s3 = 3 and 7 */
    const __m512i s0 = _mm512_permutex2var_epi64(t0, low, t2), s1 = _mm512_permutex2var_epi64(t0, high, t2);
    const __m512i s2 = _mm512_permutex2var_epi64(t1, low, t3), s3 = _mm512_permutex2var_epi64(t1, high, t3);
    const __m512i s4 = _mm512_permutex2var_epi64(t4, low, t6), s5 = _mm512_permutex2var_epi64(t4, high, t6);
    const __m512i s6 = _mm512_permutex2var_epi64(t5, low, t7), s7 = _mm512_permutex2var_epi64(t5, high, t7);
    /* halves: packets 0-3 from s, packets 4-7 from the s four on */
    columns[0] = _mm512_shuffle_i64x2(s0, s4, 0x44);
    columns[4] = _mm512_shuffle_i64x2(s0, s4, 0xee);
    columns[2] = _mm512_shuffle_i64x2(s1, s5, 0x44);
    columns[6] = _mm512_shuffle_i64x2(s1, s5, 0xee);
    columns[1] = _mm512_shuffle_i64x2(s2, s6, 0x44);
    columns[5] = _mm512_shuffle_i64x2(s2, s6, 0xee);
    columns[3] = _mm512_shuffle_i64x2(s3, s7, 0x44);
    columns[7] = _mm512_shuffle_i64x2(s3, s7, 0xee);
    if (w <= MAC_WORD && MAC_WORD < w + 8)
    {
        columns[MAC_WORD - w] = _mm512_setzero_si512();
    }
}

/*
 * Eight packets, lane j hashing packets[j]: eight words at a time through load_columns while eight whole words remain,
 * then word w of every lane gathered, then the final word.
 */
AVX512 static void mac_eight(uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t length, uint64_t *macs)
{
    const int32_t words = length >> 3;
    const uint8_t *p[8];
    uint64_t lasts[8];
    lanes_of(packets, 8, length, p, lasts);
    state512 s = start512(k0, k1);
    int32_t w = 0;
    for (; w + 8 <= words; w += 8)
    {
        __m512i columns[8];
        load_columns(p, w, columns);
        for (int q = 0; q < 8; q++)
        {
            absorb512(&s, columns[q]);
        }
    }
    const __m512i base = _mm512_loadu_si512((const void *)packets);
    for (; w < words; w++)
    {
        absorb512(&s, gather_word512(base, w));
    }
    finish512(&s, lasts, macs);
}

/*
 * Sixteen packets as two sets of eight lanes, one state each, their rounds interleaved: one SipHash round depends on
 * the one before, so a single set of eight leaves the vector unit waiting, and a second, independent set keeps it busy
 * (bench/mac/run.sh: 10.7-11.1 GB/s against 9.2-9.6 for eight lanes). The states take 8 registers and the columns 16,
 * within AVX-512's 32.
 */
AVX512 static void mac_sixteen(uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t length, uint64_t *macs)
{
    const int32_t words = length >> 3;
    const uint8_t *p[16];
    uint64_t lasts[16];
    lanes_of(packets, 16, length, p, lasts);
    state512 v = start512(k0, k1);
    state512 u = v;
    int32_t w = 0;
    for (; w + 8 <= words; w += 8)
    {
        __m512i columns_v[8];
        __m512i columns_u[8];
        load_columns(p, w, columns_v);
        load_columns(p + 8, w, columns_u);
        for (int q = 0; q < 8; q++)
        {
            absorb512(&v, columns_v[q]);
            absorb512(&u, columns_u[q]);
        }
    }
    const __m512i base_v = _mm512_loadu_si512((const void *)packets);
    const __m512i base_u = _mm512_loadu_si512((const void *)(packets + 8));
    for (; w < words; w++)
    {
        absorb512(&v, gather_word512(base_v, w));
        absorb512(&u, gather_word512(base_u, w));
    }
    finish512(&v, lasts, macs);
    finish512(&u, lasts + 8, macs + 8);
}

/* AVX2 has no 64-bit rotate: two shifts and an or, or a shuffle of 32-bit halves for 32. */
#define ROTL256(x, b) _mm256_or_si256(_mm256_slli_epi64((x), (b)), _mm256_srli_epi64((x), 64 - (b)))
#define ROTL256_32(x) _mm256_shuffle_epi32((x), _MM_SHUFFLE(2, 3, 0, 1))

AVX2 static INLINE state256 start256(uint64_t k0, uint64_t k1)
{
    state256 s;
    s.v0 = _mm256_set1_epi64x((long long)(k0 ^ INIT_V0));
    s.v1 = _mm256_set1_epi64x((long long)(k1 ^ INIT_V1));
    s.v2 = _mm256_set1_epi64x((long long)(k0 ^ INIT_V2));
    s.v3 = _mm256_set1_epi64x((long long)(k1 ^ INIT_V3));
    return s;
}

AVX2 static INLINE void round256(state256 *s)
{
    s->v0 = _mm256_add_epi64(s->v0, s->v1);
    s->v1 = _mm256_xor_si256(ROTL256(s->v1, 13), s->v0);
    s->v0 = ROTL256_32(s->v0);
    s->v2 = _mm256_add_epi64(s->v2, s->v3);
    s->v3 = _mm256_xor_si256(ROTL256(s->v3, 16), s->v2);
    s->v0 = _mm256_add_epi64(s->v0, s->v3);
    s->v3 = _mm256_xor_si256(ROTL256(s->v3, 21), s->v0);
    s->v2 = _mm256_add_epi64(s->v2, s->v1);
    s->v1 = _mm256_xor_si256(ROTL256(s->v1, 17), s->v2);
    s->v2 = ROTL256_32(s->v2);
}

AVX2 static INLINE void absorb256(state256 *s, __m256i m)
{
    s->v3 = _mm256_xor_si256(s->v3, m);
    round256(s);
    round256(s);
    s->v0 = _mm256_xor_si256(s->v0, m);
}

AVX2 static INLINE void finish256(state256 *s, const uint64_t *lasts, uint64_t *macs)
{
    absorb256(s, _mm256_loadu_si256((const __m256i *)lasts));
    s->v2 = _mm256_xor_si256(s->v2, _mm256_set1_epi64x(0xff));
    round256(s);
    round256(s);
    round256(s);
    round256(s);
    _mm256_storeu_si256((__m256i *)macs, _mm256_xor_si256(_mm256_xor_si256(s->v0, s->v1), _mm256_xor_si256(s->v2, s->v3)));
}

AVX2 static INLINE __m256i gather_word256(__m256i base, int32_t w)
{
    return w == MAC_WORD ?
        _mm256_setzero_si256() :
        _mm256_i64gather_epi64((const long long *)0, _mm256_add_epi64(base, _mm256_set1_epi64x(8LL * w)), 1);
}

/*
 * Words w to w + 3 of four packets as four vectors, as load_columns: four 32-byte loads and a 4 x 4 transpose (8
 * shuffles). bench/mac/run.sh on Zen 4 (this path capped to AVX2; no CPU without AVX-512 was at hand): 6.4-6.6 GB/s
 * against 5.0-5.9 with a gather per word.
 */
AVX2 static INLINE void load_columns4(const uint8_t *const *p, int32_t w, __m256i *columns)
{
    const __m256i r0 = _mm256_loadu_si256((const __m256i *)(p[0] + 8 * w));
    const __m256i r1 = _mm256_loadu_si256((const __m256i *)(p[1] + 8 * w));
    const __m256i r2 = _mm256_loadu_si256((const __m256i *)(p[2] + 8 * w));
    const __m256i r3 = _mm256_loadu_si256((const __m256i *)(p[3] + 8 * w));
    /* t0 = words 0 and 2 of packets 0 and 1 interleaved, t1 = words 1 and 3 of them; t2, t3 the same of 2 and 3 */
    const __m256i t0 = _mm256_unpacklo_epi64(r0, r1), t1 = _mm256_unpackhi_epi64(r0, r1);
    const __m256i t2 = _mm256_unpacklo_epi64(r2, r3), t3 = _mm256_unpackhi_epi64(r2, r3);
    columns[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
    columns[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
    columns[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
    columns[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
    if (w <= MAC_WORD && MAC_WORD < w + 4)
    {
        columns[MAC_WORD - w] = _mm256_setzero_si256();
    }
}

/* Four packets in AVX2 lanes, as mac_eight, four words at a time through load_columns4. */
AVX2 static void mac_four(uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t length, uint64_t *macs)
{
    const int32_t words = length >> 3;
    const uint8_t *p[4];
    uint64_t lasts[4];
    lanes_of(packets, 4, length, p, lasts);
    state256 s = start256(k0, k1);
    int32_t w = 0;
    for (; w + 4 <= words; w += 4)
    {
        __m256i columns[4];
        load_columns4(p, w, columns);
        for (int q = 0; q < 4; q++)
        {
            absorb256(&s, columns[q]);
        }
    }
    const __m256i base = _mm256_loadu_si256((const __m256i *)packets);
    for (; w < words; w++)
    {
        absorb256(&s, gather_word256(base, w));
    }
    finish256(&s, lasts, macs);
}

#endif

/* 8 when the CPU and the kernel give AVX-512F, 4 for AVX2, else 1. */
static int32_t detect_lanes(void)
{
    const int32_t features = switchml_cpu_features();
    return (features & SWITCHML_CPU_AVX512F) ? 8 : (features & SWITCHML_CPU_AVX2) ? 4 : 1;
}

static int32_t lanes = 0;

/* Packets this CPU hashes at once: 8 (AVX-512F), 4 (AVX2) or 1. */
EXPORT int32_t switchml_mac_lanes(void)
{
    if (lanes == 0)
    {
        lanes = detect_lanes(); /* idempotent: a race only computes the same value twice */
    }
    return lanes;
}

/*
 * Use at most this many lanes from now on (8, 4 or 1; the CPU's own width caps it), for the tests that compare each
 * width with the Java MAC on one machine. Returns the width now in use.
 */
EXPORT int32_t switchml_mac_limit_lanes(int32_t most)
{
    const int32_t found = detect_lanes();
    const int32_t wanted = most >= 8 ? 8 : most >= 4 ? 4 : 1;
    lanes = wanted < found ? wanted : found;
    return lanes;
}

/*
 * The MACs of count packets of length bytes each: macs[i] of the packet at address packets[i]. The caller has checked
 * that every packet lies in readable memory and that length covers a header (40 bytes), and that count is 1 to 16.
 *
 * With AVX-512: sixteen lanes while ten packets or more are left, eight while more than four, four for two to four, a
 * last packet alone. On Zen 4 a call of four lanes takes about 72 % of the time of one of eight, two packets one after
 * the other 112 % of four lanes' call, and sixteen lanes 170 % of eight (bench/mac/run.sh). With AVX2: four lanes.
 * Returns count.
 *
 * Java calls every export of this file on one shape, int f(six 64-bit integers), the unused ones 0 (NativeCalls: one
 * downcall stub for the three, which x86-64's and AArch64's calling conventions make sound), hence an int back here.
 */
EXPORT int32_t switchml_mac_packets(
    uint64_t k0, uint64_t k1, const uint64_t *packets, int32_t count, int32_t length, uint64_t *macs)
{
    const int32_t width = switchml_mac_lanes();
    int32_t done = 0;
#if defined(__x86_64__)
    if (width > 1)
    {
        uint64_t lane_packets[16];
        uint64_t lane_macs[16];
        while (count - done > 1)
        {
            const int32_t left = count - done;
            const int32_t step = width == 8 && left > 9 ? 16 : width == 8 && left > 4 ? 8 : 4;
            for (int j = 0; j < step; j++)
            {
                lane_packets[j] = packets[done + j < count ? done + j : done];
            }
            if (step == 16)
            {
                mac_sixteen(k0, k1, lane_packets, length, lane_macs);
            }
            else if (step == 8)
            {
                mac_eight(k0, k1, lane_packets, length, lane_macs);
            }
            else
            {
                mac_four(k0, k1, lane_packets, length, lane_macs);
            }
            for (int j = 0; j < step && done + j < count; j++)
            {
                macs[done + j] = lane_macs[j];
            }
            done = done + step < count ? done + step : count;
        }
    }
#endif
    for (int32_t i = done; i < count; i++)
    {
        macs[i] = mac_one(k0, k1, (const uint8_t *)(uintptr_t)packets[i], length);
    }
    return count;
}
