/*
 * switchml_cpu.c: switchml_cpu_features (switchml_cpu.h), the one reading of CPUID and XCR0 that the MAC's lanes and
 * the lane kernels both choose by. Freestanding, as the rest of the library.
 */
#include "switchml_cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>

int32_t switchml_cpu_features(void)
{
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE) || !(ecx & bit_AVX))
    {
        return 0;
    }
    unsigned int xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6) != 0x6 || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
    {
        return 0;
    }
    int32_t features = (ebx & bit_AVX2) ? SWITCHML_CPU_AVX2 : 0;
    if ((xcr0_lo & 0xe6) == 0xe6)
    {
        const unsigned int fbdv = bit_AVX512F | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
        features |= (ebx & bit_AVX512F) ? SWITCHML_CPU_AVX512F : 0;
        features |= (ebx & fbdv) == fbdv ? SWITCHML_CPU_AVX512_FBDV : 0;
    }
    return features;
}

#else

int32_t switchml_cpu_features(void)
{
    return 0;
}

#endif
