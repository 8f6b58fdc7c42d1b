#!/usr/bin/env bash
# bench/pytorch/first_calls.sh: init_process_group and the first all-reduces of a torchrun job of 4 ranks on loopback,
# Gloo against SwitchML with one agent per rank (SWITCHML_HOST_AGENT=off) and with one agent for the job's ranks
# (SWITCHML_HOST_AGENT=job), the modes interleaved over --rounds rounds; one appliance on 127.0.0.1 for the run.
#
#   bench/pytorch/first_calls.sh [--rounds 3] [--size-mb 100] [--calls 8] [--modes gloo,off,job] [--job-warm-up-ms MS]
#                                [--mac off|on]
#
# Prints rank 0's CALLS line per cell (bench/pytorch/allreduce_calls.py: init_s, first_ms, steady_ms = median of the
# calls after the third, ratio = first / steady); nothing is asserted. --job-warm-up-ms sets the job agent's
# --warm-up-ms (the package's default: 300). --mac: the jobs' packet MACs (default off, as every bench here: a trusted
# rack; the product's default is on, which costs SipHash-2-4 over every packet's bytes at both ends).
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
PY=/usr/bin/python3
ROUNDS=3 SIZE_MB=100 CALLS=8 MODES=gloo,off,job WARM= MAC=off
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --size-mb) SIZE_MB=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --job-warm-up-ms) WARM=$2; shift 2 ;;
    --mac) MAC=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bench/pytorch/first_calls.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
for m in ${MODES//,/ }; do case "$m" in gloo|off|job) ;; *) echo "first_calls.sh: --modes takes gloo, off, job: $m" >&2; exit 2 ;; esac; done
case "$MAC" in on|off) ;; *) echo "first_calls.sh: --mac must be on or off: $MAC" >&2; exit 2 ;; esac
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "first_calls.sh: --rounds must be a positive integer: $ROUNDS" >&2; exit 2; }

"$ROOT/switchml" worker serve --help >/dev/null   # builds once if the tree is newer than the jar
WORK=$(mktemp -d /tmp/switchml-first-calls.XXXXXX)
APPLIANCE_PID=
cleanup() { if [ -n "$APPLIANCE_PID" ] && kill "$APPLIANCE_PID" 2>/dev/null; then wait "$APPLIANCE_PID" 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT
"$ROOT/switchml" appliance --insecure-control --bind 127.0.0.1 --control-port 17670 --data-port 17671 \
  --http-port 17672 --dir "$WORK/appliance" --mac "$MAC" >"$WORK/appliance.log" 2>&1 &
APPLIANCE_PID=$!
for _ in $(seq 100); do grep -q "switchml appliance ready" "$WORK/appliance.log" && break; sleep 0.2; done
grep -q "switchml appliance ready" "$WORK/appliance.log" || { echo "the appliance did not start:" >&2; cat "$WORK/appliance.log" >&2; exit 1; }

export SWITCHML_LAUNCHER="$ROOT/switchml" SWITCHML_APPLIANCE=127.0.0.1:17670 OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores, commit $(git -C "$ROOT" rev-parse --short HEAD), size_mb=$SIZE_MB calls=$CALLS job_warm_up_ms=${WARM:-default} mac=$MAC"
for round in $(seq "$ROUNDS"); do
  for mode in ${MODES//,/ }; do
    backend=switchml; [ "$mode" = gloo ] && backend=gloo
    args="--mac $MAC"; [ "$mode" = job ] && [ -n "$WARM" ] && args="$args --warm-up-ms $WARM"
    if SWITCHML_HOST_AGENT=$mode SWITCHML_AGENT_ARGS="$args" "$PY" -m torch.distributed.run --standalone \
      --nproc_per_node=4 --redirects 2 --tee 1 --log_dir "$WORK/logs-$mode-$round" \
      "$ROOT/bench/pytorch/allreduce_calls.py" --backend "$backend" --size-mb "$SIZE_MB" --calls "$CALLS" \
      >"$WORK/cell.log" 2>&1; then
      sed -n "s/^\[default0\]:CALLS /CALLS round=$round agent=$mode /p" "$WORK/cell.log"
    else
      echo "round $round, $mode failed:" >&2; tail -20 "$WORK/cell.log" >&2
    fi
  done
done
