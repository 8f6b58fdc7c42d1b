/*
 * switchml_lanes.c: the worker's per-element kernels (io.switchml.protocol.Lanes, BlockFloatingPoint): a float32
 * chunk's largest magnitude, its quantization into a packet's network-order int32 lanes, and the lanes' dequantization
 * back into floats. Called from Java through the FFM API (NativeLanes) so that a JVM runs them at full speed from its
 * first packet: the Java loops are fast only once C2 has compiled them (about 120 times slower in C1's code: 1.0 s
 * against 8.5 ms for one rank's 100 MB), and on a host whose cores are busy, C2 gets to them late.
 *
 * Every result equals the Java loop's bit for bit (LanesNativeTest): the same double arithmetic in the same order, and
 * rounding to nearest, ties to even, as Math.rint does, by adding and subtracting 1.5 * 2^52 (exact for the clamped
 * magnitudes, at most 2^31). Built without fast-math and without contraction, so the compiler keeps that order.
 *
 * Our own code because it is the product's data path over its own packet layout. Plain loops the compiler vectorizes,
 * built three times on x86-64 (AVX-512, AVX2, the baseline) and chosen once by CPUID; freestanding (no libc).
 */
#include <stdint.h>

#include "switchml_cpu.h"

#define EXPORT __attribute__((visibility("default")))

typedef uint32_t u32_unaligned __attribute__((aligned(1), may_alias));
typedef float f32_unaligned __attribute__((aligned(1), may_alias));

#define ABS_MASK 0x7fffffffu
#define INFINITY_BITS 0x7f800000u
#define CANONICAL_NAN_BITS 0x7fc00000u
#define ROUNDING 6755399441055744.0 /* 1.5 * 2^52 */

static inline double from_bits(uint64_t bits)
{
    union
    {
        uint64_t u;
        double d;
    } v = {.u = bits};
    return v.d;
}

/* The kernels, written once and compiled once per target below. */
#define KERNELS(SUFFIX, ATTRIBUTES)                                                                                      \
    ATTRIBUTES static int32_t max_abs_bits_##SUFFIX(const u32_unaligned *bits, int64_t count)                        \
    {                                                                                                                  \
        uint32_t max = 0;                                                                                              \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            const uint32_t magnitude = bits[i] & ABS_MASK;                                                             \
            max = magnitude > max ? magnitude : max;                                                                   \
        }                                                                                                              \
        return (int32_t)(max > INFINITY_BITS ? CANONICAL_NAN_BITS : max);                                              \
    }                                                                                                                  \
                                                                                                                       \
    ATTRIBUTES static void quantize_##SUFFIX(                                                                          \
        const f32_unaligned *src, u32_unaligned *lanes, int64_t count, double scale, double limit)                    \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            const double scaled = (double)src[i] * scale;                                                              \
            double clamped = scaled > limit ? limit : scaled;                                                          \
            clamped = clamped < -limit ? -limit : clamped;                                                             \
            clamped = scaled == scaled ? clamped : 0.0; /* NaN: Java's (int) gives 0 */                                \
            const double rounded = (clamped + ROUNDING) - ROUNDING;                                                    \
            lanes[i] = __builtin_bswap32((uint32_t)(int32_t)rounded);                                                  \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    ATTRIBUTES static void dequantize_##SUFFIX(                                                                        \
        const u32_unaligned *lanes, f32_unaligned *dst, int64_t count, double multiplier)                             \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            dst[i] = (float)((double)(int32_t)__builtin_bswap32(lanes[i]) * multiplier);                               \
        }                                                                                                              \
    }

/* The host agent's sums of one node's ranks (io.switchml.worker.bridge.LocalSum), in native order. */
#define LOCAL_KERNELS(SUFFIX, ATTRIBUTES)                                                                                \
    ATTRIBUTES static void add_floats_##SUFFIX(f32_unaligned *sum, const f32_unaligned *src, int64_t count)            \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            sum[i] = sum[i] + src[i];                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    ATTRIBUTES static void add_ints_##SUFFIX(u32_unaligned *sum, const u32_unaligned *src, int64_t count)              \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            sum[i] = sum[i] + src[i]; /* unsigned: wraps as Java's int addition */                                     \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    ATTRIBUTES static void scale_floats_##SUFFIX(f32_unaligned *values, int64_t count, float factor)                   \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            values[i] = values[i] * factor;                                                                            \
        }                                                                                                              \
    }

/* Copies between an array in native order and network-order lanes (int32 jobs, and the 16-bit formats' lanes). */
typedef uint16_t u16_unaligned __attribute__((aligned(1), may_alias));
#define SWAP_KERNELS(SUFFIX, ATTRIBUTES)                                                                                 \
    ATTRIBUTES static void swap32_##SUFFIX(u32_unaligned *dst, const u32_unaligned *src, int64_t count)                \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            dst[i] = __builtin_bswap32(src[i]);                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    ATTRIBUTES static void swap16_##SUFFIX(u16_unaligned *dst, const u16_unaligned *src, int64_t count)                \
    {                                                                                                                  \
        for (int64_t i = 0; i < count; i++)                                                                            \
        {                                                                                                              \
            dst[i] = __builtin_bswap16(src[i]);                                                                        \
        }                                                                                                              \
    }

KERNELS(base, )
LOCAL_KERNELS(base, )
SWAP_KERNELS(base, )
#if defined(__x86_64__)
KERNELS(avx2, __attribute__((target("avx2"))))
KERNELS(avx512, __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))))
LOCAL_KERNELS(avx2, __attribute__((target("avx2"))))
LOCAL_KERNELS(avx512, __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))))
SWAP_KERNELS(avx2, __attribute__((target("avx2"))))
SWAP_KERNELS(avx512, __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))))
#endif

/* 2 when the CPU has AVX-512 F, BW, DQ and VL and the kernel keeps zmm and mask state (XCR0), 1 for AVX2, else 0. */
static int32_t detect_level(void)
{
    const int32_t features = switchml_cpu_features();
    return (features & SWITCHML_CPU_AVX512_FBDV) ? 2 : (features & SWITCHML_CPU_AVX2) ? 1 : 0;
}

static int32_t level = -1;

/* The kernels in use: 2 (AVX-512 F, BW, DQ and VL), 1 (AVX2) or 0 (the baseline). */
EXPORT int32_t switchml_lanes_level(void)
{
    if (level < 0)
    {
        level = detect_level(); /* idempotent: a race only computes the same value twice */
    }
    return level;
}

/* Use at most this level from now on (the CPU's own caps it), for the tests that compare each one with Java's. */
EXPORT int32_t switchml_lanes_limit_level(int32_t most)
{
    const int32_t found = detect_level();
    level = most < found ? (most < 0 ? 0 : most) : found;
    return level;
}

/*
 * Java calls the three on one shape, int f(address, five 64-bit integers) (one critical downcall stub that may take a
 * heap array's segment as its address), the unused ones 0: the float side as a segment's base and a byte offset into
 * it, so that no slice is made per call. The caller has checked every range.
 *
 * switchml_lanes_max_abs_bits(floats, offset, count): the largest (bits & 0x7fffffff) of count floats, any NaN giving
 * the canonical NaN's bits.
 */
EXPORT int32_t switchml_lanes_max_abs_bits(
    const uint8_t *floats, int64_t offset, int64_t count, int64_t u3, int64_t u4, int64_t u5)
{
    (void)u3, (void)u4, (void)u5;
    const u32_unaligned *bits = (const u32_unaligned *)(floats + offset);
#if defined(__x86_64__)
    switch (switchml_lanes_level())
    {
    case 2: return max_abs_bits_avx512(bits, count);
    case 1: return max_abs_bits_avx2(bits, count);
    default: break;
    }
#endif
    return max_abs_bits_base(bits, count);
}

/*
 * switchml_lanes_quantize(floats, offset, count, lanes, scale bits, limit): lanes[i] = big-endian
 * clamp(rint(floats[i] * scale), -limit, limit); scale passed as its IEEE bits, limit below 2^31. Returns count.
 */
EXPORT int32_t switchml_lanes_quantize(
    const uint8_t *floats, int64_t offset, int64_t count, uint64_t lanes_address, uint64_t scale_bits, int64_t limit)
{
    const f32_unaligned *src = (const f32_unaligned *)(floats + offset);
    u32_unaligned *lanes = (u32_unaligned *)(uintptr_t)lanes_address;
    const double scale = from_bits(scale_bits);
#if defined(__x86_64__)
    switch (switchml_lanes_level())
    {
    case 2: quantize_avx512(src, lanes, count, scale, (double)limit); return (int32_t)count;
    case 1: quantize_avx2(src, lanes, count, scale, (double)limit); return (int32_t)count;
    default: break;
    }
#endif
    quantize_base(src, lanes, count, scale, (double)limit);
    return (int32_t)count;
}

/*
 * switchml_lanes_dequantize(floats, offset, count, lanes, multiplier bits): floats[i] = (float)(big-endian lanes[i] *
 * multiplier). Returns count.
 */
EXPORT int32_t switchml_lanes_dequantize(
    uint8_t *floats, int64_t offset, int64_t count, uint64_t lanes_address, uint64_t multiplier_bits, int64_t u5)
{
    (void)u5;
    f32_unaligned *dst = (f32_unaligned *)(floats + offset);
    const u32_unaligned *lanes = (const u32_unaligned *)(uintptr_t)lanes_address;
    const double multiplier = from_bits(multiplier_bits);
#if defined(__x86_64__)
    switch (switchml_lanes_level())
    {
    case 2: dequantize_avx512(lanes, dst, count, multiplier); return (int32_t)count;
    case 1: dequantize_avx2(lanes, dst, count, multiplier); return (int32_t)count;
    default: break;
    }
#endif
    dequantize_base(lanes, dst, count, multiplier);
    return (int32_t)count;
}

/*
 * switchml_lanes_add(sum, source, sum offset, source offset, count, ints): sum[i] += source[i] for count elements in
 * native order, float32 (ints 0) or wrapping int32 (ints 1); both ranges as a segment's base and a byte offset, so that
 * Java keeps both segments alive through the call (a rank's shared memory may be unmapped as it leaves). Returns count.
 */
EXPORT int32_t switchml_lanes_add(
    uint8_t *sum, const uint8_t *source, int64_t sum_offset, int64_t source_offset, int64_t count, int64_t ints)
{
    uint8_t *to = sum + sum_offset;
    const uint8_t *from = source + source_offset;
#if defined(__x86_64__)
    switch (switchml_lanes_level())
    {
    case 2:
        ints ? add_ints_avx512((u32_unaligned *)to, (const u32_unaligned *)from, count)
             : add_floats_avx512((f32_unaligned *)to, (const f32_unaligned *)from, count);
        return (int32_t)count;
    case 1:
        ints ? add_ints_avx2((u32_unaligned *)to, (const u32_unaligned *)from, count)
             : add_floats_avx2((f32_unaligned *)to, (const f32_unaligned *)from, count);
        return (int32_t)count;
    default: break;
    }
#endif
    ints ? add_ints_base((u32_unaligned *)to, (const u32_unaligned *)from, count)
         : add_floats_base((f32_unaligned *)to, (const f32_unaligned *)from, count);
    return (int32_t)count;
}

/*
 * switchml_lanes_scale(values, offset, count, factor bits, 0, 0): values[i] *= factor, float32 in native order, the
 * factor passed as its float's IEEE bits. Returns count.
 */
EXPORT int32_t switchml_lanes_scale(
    uint8_t *values, int64_t offset, int64_t count, int64_t factor_bits, int64_t u4, int64_t u5)
{
    (void)u4, (void)u5;
    f32_unaligned *at = (f32_unaligned *)(values + offset);
    union
    {
        uint32_t u;
        float f;
    } factor = {.u = (uint32_t)factor_bits};
#if defined(__x86_64__)
    switch (switchml_lanes_level())
    {
    case 2: scale_floats_avx512(at, count, factor.f); return (int32_t)count;
    case 1: scale_floats_avx2(at, count, factor.f); return (int32_t)count;
    default: break;
    }
#endif
    scale_floats_base(at, count, factor.f);
    return (int32_t)count;
}

/*
 * switchml_lanes_swap(array, offset, count, lanes address, mode, 0): count elements between an array in native order
 * (a segment's base and a byte offset) and network-order lanes. mode 0: int32 array to lanes; 1: int32 lanes to array;
 * 2: 16-bit array to lanes; 3: 16-bit lanes to array. Returns count, or -1 for an unknown mode.
 */
EXPORT int32_t switchml_lanes_swap(
    uint8_t *array, int64_t offset, int64_t count, uint64_t lanes_address, int64_t mode, int64_t u5)
{
    (void)u5;
    uint8_t *at = array + offset;
    uint8_t *lanes = (uint8_t *)(uintptr_t)lanes_address;
    uint8_t *dst = (mode & 1) ? at : lanes;
    const uint8_t *src = (mode & 1) ? lanes : at;
    if (mode < 0 || mode > 3)
    {
        return -1;
    }
    const int wide = mode < 2;
#if defined(__x86_64__)
    switch (switchml_lanes_level())
    {
    case 2:
        wide ? swap32_avx512((u32_unaligned *)dst, (const u32_unaligned *)src, count)
             : swap16_avx512((u16_unaligned *)dst, (const u16_unaligned *)src, count);
        return (int32_t)count;
    case 1:
        wide ? swap32_avx2((u32_unaligned *)dst, (const u32_unaligned *)src, count)
             : swap16_avx2((u16_unaligned *)dst, (const u16_unaligned *)src, count);
        return (int32_t)count;
    default: break;
    }
#endif
    wide ? swap32_base((u32_unaligned *)dst, (const u32_unaligned *)src, count)
         : swap16_base((u16_unaligned *)dst, (const u16_unaligned *)src, count);
    return (int32_t)count;
}
