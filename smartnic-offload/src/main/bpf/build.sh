#!/usr/bin/env bash
# build.sh CLANG OUTDIR SRCDIR: compile every *.bpf.c in SRCDIR to OUTDIR/NAME.o with clang -target bpf.
# Fails naming the package to install when clang or the libbpf headers are missing.
set -euo pipefail
clang=$1 out=$2 src=$3
command -v "$clang" >/dev/null 2>&1 || { echo "smartnic-offload: '$clang' not found; install Debian's clang, llvm and libbpf-dev (scripts/ensure-test-deps.sh does)" >&2; exit 1; }
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "smartnic-offload: /usr/include/bpf/bpf_helpers.h not found; install libbpf-dev (scripts/ensure-test-deps.sh does)" >&2; exit 1; }
mkdir -p "$out"
arch_include=/usr/include/$(uname -m)-linux-gnu
for c in "$src"/*.bpf.c; do
  [ -e "$c" ] || continue
  name=$(basename "$c" .bpf.c)
  "$clang" -O2 -g -Wall -Werror -target bpf -mcpu=v3 -I"$src" -I"$arch_include" -c "$c" -o "$out/$name.o"
done
