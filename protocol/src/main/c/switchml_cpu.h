/*
 * switchml_cpu.h: the x86-64 vector features the native library's parts choose their kernels by (switchml_mac.c: the
 * MAC's lanes; switchml_lanes.c: the lane kernels), read from CPUID and XCR0 in one place (switchml_cpu.c).
 */
#ifndef SWITCHML_CPU_H
#define SWITCHML_CPU_H

#include <stdint.h>

/* AVX2, with the kernel keeping ymm state (XCR0 bits 1 and 2). */
#define SWITCHML_CPU_AVX2 1
/* AVX-512F, with the kernel keeping zmm and mask state (XCR0 bits 1, 2 and 5 to 7). */
#define SWITCHML_CPU_AVX512F 2
/* AVX-512 F, BW, DQ and VL together, with the same state. */
#define SWITCHML_CPU_AVX512_FBDV 4

/* The SWITCHML_CPU_* bits this CPU and its kernel give; 0 on other architectures. Not exported from the library. */
__attribute__((visibility("hidden"))) int32_t switchml_cpu_features(void);

#endif
