#!/usr/bin/env bash
# bench/mac/run.sh: build lanes_bench.c with clang (-O2, as the protocol module builds switchml_mac.c) and print a
# Markdown table of GB/s: the native MAC lanes of protocol/src/main/c/switchml_mac.c against the gather loops they
# replaced, at the widths this CPU has, and one packet at a time. About 30 s; nothing else should run meanwhile.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
command -v clang >/dev/null 2>&1 || { echo "bench/mac: clang not found; install Debian's clang (scripts/ensure-test-deps.sh does)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
clang -O2 -Wall -Wextra -Werror -o "$out/lanes_bench" "$here/lanes_bench.c"
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/lanes_bench"
