#!/bin/bash
# First touch of shared memory on /dev/shm and on a tmpfs mounted for the run with huge=within_size (the options of
# systemd/run-switchml-shm.mount): bench/shm/first_touch.c, ROUNDS rounds (default 3) of 100 MiB, reserved with
# posix_fallocate as the agents reserve it and sparse. With "populate" first: bench/shm/populate.c instead, the second
# mapping's first read with its own page faults and after madvise(MADV_POPULATE_WRITE), alternately, PAUSE seconds
# apart (default 8: on a VM whose balloon reports free pages to the host, memory freed a few seconds ago is cold again,
# as a new job's tensors are). Needs root (the mount) and a C compiler.
#   bench/shm/run.sh [ROUNDS] [MIB]
#   bench/shm/run.sh populate [ROUNDS] [MIB] [PAUSE]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PROGRAM=first_touch
if [ "${1:-}" = populate ]; then PROGRAM=populate; shift; fi
ROUNDS=${1:-3}
MIB=${2:-100}
PAUSE=${3:-8}
[ "$(id -u)" = 0 ] || { echo "bench/shm/run.sh: needs root to mount a tmpfs" >&2; exit 2; }
WORK=$(mktemp -d /tmp/switchml-shm-bench.XXXXXX)
cleanup() { if mountpoint -q "$WORK/huge"; then umount "$WORK/huge"; fi; rm -rf "$WORK"; }
trap cleanup EXIT
cc -O2 -o "$WORK/$PROGRAM" "$HERE/$PROGRAM.c"
mkdir "$WORK/huge"
OPTIONS=$(sed -n 's/^Options=//p' "$HERE/../../systemd/run-switchml-shm.mount")
mount -t tmpfs -o "$OPTIONS" switchml-shm-bench "$WORK/huge"
echo "kernel $(uname -r); shmem THP: $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null || echo unknown)"
echo "/dev/shm: $(findmnt -no OPTIONS /dev/shm 2>/dev/null || echo '?'); $WORK/huge: $(findmnt -no OPTIONS "$WORK/huge")"
if [ "$PROGRAM" = populate ]; then
  for ((i = 1; i <= ROUNDS; i++)); do
    for mode in fault populate; do
      "$WORK/populate" "$WORK/huge/file" "$MIB" "$mode"
      sleep "$PAUSE"
      "$WORK/populate" "/dev/shm/switchml-shm-bench-$$" "$MIB" "$mode"
      sleep "$PAUSE"
    done
  done
  exit 0
fi
for ((i = 1; i <= ROUNDS; i++)); do
  for mode in reserve sparse; do
    "$WORK/first_touch" "/dev/shm/switchml-shm-bench-$$" "$MIB" "$mode"
    "$WORK/first_touch" "$WORK/huge/file" "$MIB" "$mode"
  done
done
