#!/usr/bin/env bash
# build.sh CLANG CLASSES SRCDIR: compile SRCDIR's sources (switchml_mac.c: the packet MAC's vector lanes;
# switchml_lanes.c: the worker's lane kernels; switchml_cpu.c: the CPU features both choose by) into one shared object in the protocol jar's resources,
# CLASSES/native/linux-<os.arch>/libswitchml_native.so (os.arch as the JVM names it: amd64, aarch64), freestanding (no
# libc: it depends on nothing), without floating-point contraction (the lane kernels must round as Java does). Fails
# naming the package to install when clang is missing.
set -euo pipefail
clang=$1 classes=$2 src=$3
command -v "$clang" >/dev/null 2>&1 || { echo "protocol: '$clang' not found; install Debian's clang (scripts/ensure-test-deps.sh does)" >&2; exit 1; }
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  *) arch=$(uname -m) ;;
esac
out="$classes/native/linux-$arch"
mkdir -p "$out"
rm -f "$out/libswitchml_mac.so" # the name before the lane kernels joined it
"$clang" -O2 -g0 -Wall -Wextra -Werror -fPIC -ffreestanding -fno-builtin -ffp-contract=off -nostdlib -shared \
  -Wl,-z,relro,-z,now,-z,noexecstack -Wl,--build-id -Wl,--hash-style=gnu \
  -o "$out/libswitchml_native.so" "$src/switchml_mac.c" "$src/switchml_lanes.c" "$src/switchml_cpu.c"
