#!/usr/bin/env bash
# bench/pytorch/run.sh: DDP step time of a ResNet-18-shaped CNN (11.2 M parameters, random data), 4 ranks,
# with init_process_group("gloo"), ("switchml") and ("switchml") plus a synchronous comm hook (the old bridge).
# switchml-job (loopback only): ("switchml") with torchrun's default where no packaged host agent serves: local rank
# 0 starts one agent for the job's 4 ranks, which sums them and sends the sum as one worker (SWITCHML_HOST_AGENT=job).
#
#   bench/pytorch/run.sh [--steps 10] [--warmups 4] [--batch 8] [--image 32] [--modes gloo,switchml,switchml-sync]
#                        [--where loopback,rack] [--rate 1gbit] [--mac off|on] [--multicast on|off] [--bucket-mb 25]
#                        [--repeat 1] [--agent-slots 64] [--compute cpu|emulated] [--compute-scale 1]
#                        [--compute-profile FILE] [--offload none|xdp]
#
# loopback: an appliance on 127.0.0.1 and torchrun --standalone --nproc_per_node=4.
# rack (root): bench/rack/rack.sh's namespaces (appliance 10.77.0.1, rank r in its own namespace at 10.77.0.(11+r),
#   every worker link limited to --rate by tbf, MTU 9000, k = 2233, s = --agent-slots); each rank is
#   started with torchrun's environment by hand (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), since torchrun's
#   local ranks would all share one namespace. Results multicast to the job's group (--multicast on, as the rack
#   bench and the paper's switch), packet MACs off (--mac off: a trusted rack, as the rack bench's default).
# Prints rank 0's BENCH line per cell (see ddp_bench.py) and nothing is asserted. --repeat N runs every mode N
# times, the modes interleaved (this machine's other users make single runs vary by 2x), then prints each mode's
# median step time as a SUMMARY line. --compute emulated replaces the model's compute by sleeps of its profiled
# duration (ddp_bench.py): the host's CPU is then left to the communication, as on hosts that train on GPUs;
# --offload xdp (rack only) runs the appliance with switchml.appliance.backends=xdp,software and the XDP program on
# its eth0 in driver mode (jobs the program can take are aggregated in the appliance's receive path; the BENCH line
# then adds xdp_prog_ms_per_step, the program's run time from kernel.bpf_stats_enabled, which is softirq time
# already counted in whichever process's context it ran, mostly the senders').
# --compute-scale F scales those durations (an accelerator 1/F times as fast as these cores). The first cell
# profiles the compute and every later cell of the run emulates that same profile (kept in --compute-profile FILE
# when given, and reused from it when it exists: runs at several scales can then share one profile).
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
PY=/usr/bin/python3
STEPS=10 WARMUPS=4 BATCH=8 IMAGE=32 MODES=gloo,switchml,switchml-sync WHERE=loopback RATE=1gbit MAC=off MULTICAST=on BUCKET_MB=25 REPEAT=1 AGENT_SLOTS=64 COMPUTE=cpu SCALE=1 PROFILE= OFFLOAD=none
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --warmups) WARMUPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --where) WHERE=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --mac) MAC=$2; shift 2 ;;
    --multicast) MULTICAST=$2; shift 2 ;;
    --bucket-mb) BUCKET_MB=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --agent-slots) AGENT_SLOTS=$2; shift 2 ;;
    --compute) COMPUTE=$2; shift 2 ;;
    --compute-scale) SCALE=$2; shift 2 ;;
    --compute-profile) PROFILE=$(readlink -f "$2"); shift 2 ;;
    --offload) OFFLOAD=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench/pytorch/run.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
if [[ ",$MODES," == *,switchml-job,* && ",$WHERE," == *,rack,* ]]; then
  echo "bench/pytorch: mode switchml-job is loopback only (the rack runs one rank per namespace)" >&2; exit 2
fi
case "$OFFLOAD" in
  none) ;;
  xdp) [[ ",$WHERE," == *,loopback,* ]] && { echo "bench/pytorch: --offload xdp needs --where rack" >&2; exit 2; } ;;
  *) echo "bench/pytorch: --offload takes none or xdp: $OFFLOAD" >&2; exit 2 ;;
esac

"$ROOT/switchml" worker serve --help >/dev/null   # builds once if the tree is newer than the jar
WORK=$(mktemp -d /tmp/switchml-ddp-bench.XXXXXX)
# a private copy of the launcher and jars (as bench/rack does): an edit to the tree during the run must not make
# every agent's launcher rebuild the project
mkdir -p "$WORK/snap/dist/target" "$WORK/snap/packaging/bin"
cp "$ROOT/switchml" "$WORK/snap/switchml"
cp -a "$ROOT/packaging/bin/switchml" "$WORK/snap/packaging/bin/"
cp -a "$ROOT/dist/target/switchml.jar" "$ROOT/dist/target/lib" "$ROOT/dist/target/package-lib" "$WORK/snap/dist/target/"
export SWITCHML_LAUNCHER="$WORK/snap/switchml" OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# an agent per rank (what this bench measures), even where the packaged host agent serves
export SWITCHML_HOST_AGENT="${SWITCHML_HOST_AGENT:-off}"
APPLIANCE_PID=
cleanup() {
  [ -n "$APPLIANCE_PID" ] && kill "$APPLIANCE_PID" 2>/dev/null && wait "$APPLIANCE_PID" 2>/dev/null || true
  if [ -n "${RACK_PREFIX:-}" ]; then rack_down || true; fi
  [ -n "${BPF_STATS_BEFORE:-}" ] && sysctl -qw kernel.bpf_stats_enabled="$BPF_STATS_BEFORE" || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_appliance NETNS_PREFIX BIND [MULTICAST_BASE [CONFIG]]: the appliance, waiting for its ready line.
start_appliance() {
  local prefix=$1 bind=$2 group=${3:-} config=${4:-}
  $prefix "$SWITCHML_LAUNCHER" appliance --insecure-control --bind "$bind" --control-port 17570 --data-port 17571 \
    --http-port 17572 --dir "$WORK/appliance" --mac "$MAC" ${group:+--multicast "$group"} ${config:+--config "$config"} \
    >"$WORK/appliance.log" 2>&1 &
  APPLIANCE_PID=$!
  export SWITCHML_BENCH_APPLIANCE_PID=$APPLIANCE_PID   # ddp_bench.py reports its CPU per step
  for _ in $(seq 100); do
    grep -q "switchml appliance ready" "$WORK/appliance.log" && return 0
    sleep 0.2
  done
  echo "bench/pytorch: the appliance did not start:" >&2; cat "$WORK/appliance.log" >&2; exit 1
}

stop_appliance() {
  kill "$APPLIANCE_PID" 2>/dev/null; wait "$APPLIANCE_PID" 2>/dev/null || true; APPLIANCE_PID=
}

bench_args() { echo "--steps $STEPS --warmups $WARMUPS --batch $BATCH --image $IMAGE --bucket-mb $BUCKET_MB --compute $COMPUTE$([ "$COMPUTE" = cpu ] || echo " --compute-scale $SCALE --compute-profile ${PROFILE:-$WORK/compute-profile.json}")"; }

loopback() {
  start_appliance "" 127.0.0.1
  local mode round
  for round in $(seq "$REPEAT"); do for mode in ${MODES//,/ }; do
    if SWITCHML_APPLIANCE=127.0.0.1:17570 GLOO_SOCKET_IFNAME=lo SWITCHML_AGENT_ARGS="--mac $MAC" \
      SWITCHML_HOST_AGENT="$([ "$mode" = switchml-job ] && echo job || echo "$SWITCHML_HOST_AGENT")" \
      "$PY" -m torch.distributed.run --standalone --nproc_per_node=4 --monitor_interval 1 --redirects 2 --tee 1 \
      --log_dir "$WORK/logs-loopback-$mode" "$ROOT/bench/pytorch/ddp_bench.py" --mode "$mode" $(bench_args) \
      >"$WORK/loopback-$mode.log" 2>&1; then
      sed -n 's/^\[default0\]:BENCH /BENCH where=loopback /p' "$WORK/loopback-$mode.log"
    else
      # rank 0's stderr (--redirects 2 keeps it in torchrun's log directory), then torchrun's verdict
      echo "loopback $mode failed:" >&2
      find "$WORK/logs-loopback-$mode" -path '*/0/stderr.log' -exec tail -8 {} + >&2 || true
      tail -4 "$WORK/loopback-$mode.log" >&2
    fi
  done; done
  stop_appliance
}

rack() {
  [ "$(id -u)" = 0 ] || { echo "bench/pytorch: --where rack needs root (network namespaces)" >&2; exit 2; }
  # shellcheck source=../rack/rack.sh
  source "$ROOT/bench/rack/rack.sh"
  RACK_PREFIX=pyrack-$$
  rack_up 4 "$RATE" none 9000 >&2
  local config=
  if [ "$OFFLOAD" = xdp ]; then
    config="$WORK/appliance.properties"
    printf '%s\n' switchml.appliance.backends=xdp,software switchml.appliance.xdp.interface=eth0 \
      switchml.appliance.xdp.mode=native switchml.appliance.xdp.slots=1024 > "$config"
    # veth delivers XDP_TX frames (the program's multicast results) only to an end that runs an XDP program
    unzip -p "$WORK"/snap/dist/target/lib/smartnic-offload-*.jar bpf/switchml_pass.o > "$WORK/switchml_pass.o"
    ip netns exec "$(rack_ns_sw)" ip link set dev p-ap xdpdrv obj "$WORK/switchml_pass.o" sec xdp.frags
    BPF_STATS_BEFORE=$(sysctl -n kernel.bpf_stats_enabled)
    sysctl -qw kernel.bpf_stats_enabled=1
  fi
  start_appliance "ip netns exec $(rack_ns_ap)" "$RACK_APPLIANCE_ADDR" "$([ "$MULTICAST" = on ] && echo 239.7.0.0)" "$config"
  if [ "$OFFLOAD" = xdp ]; then
    grep -q "xdp: attached" "$WORK/appliance.log" || { echo "bench/pytorch: the xdp backend did not attach:" >&2; cat "$WORK/appliance.log" >&2; exit 1; }
    export SWITCHML_BENCH_XDP_PROG_ID
    SWITCHML_BENCH_XDP_PROG_ID=$(sed -n 's/.*xdp: attached [a-z_]* (id \([0-9]*\)).*/\1/p' "$WORK/appliance.log" | head -1)
  fi
  local mode r pids round
  for round in $(seq "$REPEAT"); do for mode in ${MODES//,/ }; do
    pids=()
    for r in 0 1 2 3; do
      ip netns exec "$(rack_ns_w "$r")" env RANK=$r WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
        MASTER_ADDR="$(rack_worker_addr 0)" MASTER_PORT=29511 GLOO_SOCKET_IFNAME=eth0 \
        SWITCHML_APPLIANCE="$RACK_APPLIANCE_ADDR:17570" SWITCHML_AGENT_ARGS="-k 2233 -s $AGENT_SLOTS --mac $MAC" \
        "$PY" "$ROOT/bench/pytorch/ddp_bench.py" --mode "$mode" $(bench_args) >"$WORK/rack-$mode-$r.log" 2>&1 &
      pids+=($!)
    done
    for r in 0 1 2 3; do wait "${pids[$r]}" || { echo "rank $r of $mode failed:" >&2; tail -20 "$WORK/rack-$mode-$r.log" >&2; }; done
    sed -n "s/^BENCH /BENCH where=rack-$RATE$([ "$OFFLOAD" = none ] || echo "-$OFFLOAD") /p" "$WORK/rack-$mode-0.log"
  done; done
  # what the offload did over the run (its counters in /metrics; a job it could not take shows as a fallback)
  if [ "$OFFLOAD" != none ]; then
    ip netns exec "$(rack_ns_ap)" "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
      "http://$RACK_APPLIANCE_ADDR:17572/metrics" | grep -E "^switchml_backend_[a-z_]*(\{backend=\"$OFFLOAD\"|_fallbacks_total)" \
      | grep -v -E " 0(\.0)?$" | sed 's/^/# offload: /' || true
  fi
  stop_appliance
}

{
echo "# mac=$MAC multicast(rack)=$MULTICAST agent_slots(rack)=$AGENT_SLOTS bucket_mb=$BUCKET_MB compute=$COMPUTE compute_scale=$SCALE offload=$OFFLOAD steps=$STEPS warmups=$WARMUPS batch=$BATCH image=$IMAGE"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(getconf _NPROCESSORS_ONLN) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), torch $("$PY" -c 'import torch; print(torch.__version__)'), commit $(git -C "$ROOT" rev-parse --short HEAD)"
for where in ${WHERE//,/ }; do
  case "$where" in
    loopback) loopback ;;
    rack) rack ;;
    *) echo "bench/pytorch: --where takes loopback and/or rack: $where" >&2; exit 2 ;;
  esac
done
} > >(tee "$WORK/bench.txt")   # not a pipe: the cells must run in this shell, whose EXIT trap cleans up
sleep 0.5
# the median step time of each (where, mode) over the repeats
"$PY" - "$WORK/bench.txt" <<'EOF'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    if line.startswith("BENCH "):
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        cells.setdefault((f["where"], f["mode"]), []).append(float(f["step_ms_p50"]))
for (where, mode), steps in cells.items():
    gloo = cells.get((where, "gloo"))
    ratio = " vs_gloo_steps_per_s=%.2fx" % (statistics.median(gloo) / statistics.median(steps)) if gloo else ""
    print("SUMMARY where=%s mode=%s runs=%d step_ms_median=%.1f step_ms_runs=%s%s" % (
        where, mode, len(steps), statistics.median(steps), ",".join("%.0f" % s for s in steps), ratio))
EOF
