#!/usr/bin/env bash
# bench/xdp/run.sh: the software shard against the XDP backend on the same offered load, side by side.
#
#   sudo bench/xdp/run.sh [--rate 1gbit|none] [--mac on|off] [--rounds 3] [--size-mb 100] [--iterations 5] [--warmups 2]
#                         [--mtu 1500] [-k N]
#
# Builds bench/rack's rack (appliance + 4 workers in namespaces on a bridge; --rate on every worker link), then, for
# each round, runs the same all-reduce workload (float32, k = -k or 256 at MTU 1500 and (MTU - 68) / 4 above it,
# 2233 at --mtu 9000, where the program runs in multi-buffer mode; s=64, MAC per --mac, results multicast) once with
# switchml.appliance.backends=software and once with xdp,software (driver mode on the appliance's veth), in
# alternating order. Measured per run:
#   - appliance CPU: utime+stime of the appliance JVM (all its threads) from /proc/PID/stat;
#   - XDP program CPU: run_time_ns of the attached program (kernel.bpf_stats_enabled=1), which is the softirq time
#     the program runs in; also the whole machine's softirq jiffies from /proc/stat, for reference (it includes the
#     workers' and the bridge's softirq work, the same for both backends);
#   - update packets the appliance received (software: its shards' packets_in; xdp: the program's updates+probes);
#   - the workers' median all-reduce time (TAT).
# Prints one line per run and a summary with the ratios. Results go to docs/bench/xdp-<date>.txt as well.
# Nothing is asserted: this machine's 2 cores also run the 4 workers, so the figures are for this machine only.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RATE=1gbit
ROUNDS=3
SIZE_MB=100
ITERATIONS=5
WARMUPS=2
WORKERS=4
MAC=on
MTU=1500
LANES=
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --mac) MAC=$2; shift 2 ;;
    --size-mb) SIZE_MB=$2; shift 2 ;;
    --iterations) ITERATIONS=$2; shift 2 ;;
    --warmups) WARMUPS=$2; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    -k) LANES=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "bench/xdp: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/xdp: needs root (namespaces, XDP)" >&2; exit 2; }
[[ "$MTU" =~ ^[0-9]+$ ]] && [ "$MTU" -ge 576 ] && [ "$MTU" -le 9216 ] || { echo "bench/xdp: --mtu must be 576 to 9216: $MTU" >&2; exit 2; }
if [ -z "$LANES" ]; then
  if [ "$MTU" -le 1500 ]; then LANES=256; else LANES=$(( (MTU - 68) / 4 )); fi
fi

"$ROOT/scripts/ensure-test-deps.sh" --build
"$ROOT/switchml" build
JAVA=$(ls -d /usr/lib/jvm/temurin-25-jdk-amd64/bin/java 2>/dev/null || command -v java)
CP="$ROOT/dist/target/switchml.jar:$ROOT/dist/target/lib/*"
JVM_FLAGS=(--add-modules=jdk.incubator.vector --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --enable-native-access=ALL-UNNAMED
  --sun-misc-unsafe-memory-access=allow --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
  -Dchronicle.analytics.disable=true -Dchronicle.announcer.disable=true -XX:+UseParallelGC)
export RACK_PREFIX=${RACK_PREFIX:-xdpb$$}
WORK=$(mktemp -d /tmp/xdp-bench.XXXXXX)
# shellcheck source=../rack/rack.sh
source "$ROOT/bench/rack/rack.sh"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rack_down >/dev/null 2>&1 || true
  sysctl -qw kernel.bpf_stats_enabled="${STATS_BEFORE:-0}" || true
}
trap cleanup EXIT
STATS_BEFORE=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -qw kernel.bpf_stats_enabled=1
CLK=$(getconf CLK_TCK)

rack_up "$WORKERS" "$RATE" none "$MTU"
unzip -p "$ROOT/dist/target/lib/smartnic-offload-"*.jar bpf/switchml_pass.o > "$WORK/switchml_pass.o"
# above about 3500 bytes veth takes only a multi-buffer (xdp.frags) program
ip netns exec "$(rack_ns_sw)" ip link set dev p-ap xdpdrv obj "$WORK/switchml_pass.o" sec "$([ "$MTU" -gt 1500 ] && echo xdp.frags || echo xdp)"

proc_cpu_s() { awk -v clk="$CLK" '{ printf "%.3f", ($14 + $15) / clk }' "/proc/$1/stat"; }
softirq_s() { awk -v clk="$CLK" '/^cpu / { printf "%.3f", $8 / clk }' /proc/stat; }
prog_run_ns() {
  local id
  id=$(ip netns exec "$(rack_ns_ap)" ip -d link show dev eth0 | sed -n 's/.*prog\/xdp id \([0-9]*\).*/\1/p' | head -1)
  [ -n "$id" ] || { echo 0; return; }
  bpftool prog show id "$id" 2>/dev/null | sed -n 's/.*run_time_ns \([0-9]*\).*/\1/p' | head -1
}
stats_value() { tr ' ' '\n' < "$1" | sed -n "s/^$2=//p" | head -1; }

run_one() {
  local backend=$1 round=$2 dir="$WORK/$backend-$round" r pids=() ap_pid cpu0 cpu1 sirq0 sirq1 prog0 prog1 packets tat before after
  mkdir -p "$dir"
  {
    echo "switchml.appliance.backends=$([ "$backend" = xdp ] && echo xdp,software || echo software)"
    [ "$backend" = xdp ] && printf 'switchml.appliance.xdp.interface=eth0\nswitchml.appliance.xdp.slots=1024\n'
  } > "$dir/appliance.properties"
  ip netns exec "$(rack_ns_ap)" "$JAVA" "${JVM_FLAGS[@]}" -Xmx1g -cp "$CP" io.switchml.dist.SwitchMl appliance \
    --config "$dir/appliance.properties" --bind "$RACK_APPLIANCE_ADDR" --data-port 7471 --control-port 7470 --http-port -1 \
    --dir "$dir/state" --insecure-control --multicast 239.192.0.0 > "$dir/appliance.log" 2>&1 &
  ap_pid=$!
  PIDS+=("$ap_pid")
  for _ in $(seq 300); do grep -qs 'appliance ready' "$dir/appliance.log" && break; sleep 0.1; done
  grep -qs 'appliance ready' "$dir/appliance.log" || { cat "$dir/appliance.log" >&2; return 1; }
  sleep 1
  # the shards' packets before the job: the appliance's start-up rehearsal sent some (README, "Start-up rehearsal")
  ip netns exec "$(rack_ns_ap)" bash -c 'exec 3<>/dev/tcp/'"$RACK_APPLIANCE_ADDR"'/7470; echo STATS >&3; head -1 <&3' > "$dir/stats0.txt" || true
  cpu0=$(proc_cpu_s "$ap_pid"); sirq0=$(softirq_s); prog0=$(prog_run_ns)
  for ((r = 0; r < WORKERS; r++)); do
    ip netns exec "$(rack_ns_w "$r")" "$JAVA" "${JVM_FLAGS[@]}" -Xmx2g -cp "$CP" io.switchml.dist.SwitchMl worker run \
      --appliance "$RACK_APPLIANCE_ADDR" --control-port 7470 --job "bench-$backend-$round" --token "xdp-bench-token" \
      --world "$WORKERS" --rank "$r" --type float32 --elements "$((SIZE_MB * 262144))" --iterations "$ITERATIONS" \
      --warmups "$WARMUPS" -k "$LANES" -s 64 --mac "$MAC" > "$dir/rank$r.out" 2> "$dir/rank$r.err" &
    pids+=($!)
    PIDS+=($!)
  done
  for r in "${!pids[@]}"; do wait "${pids[$r]}" || { echo "rank $r failed: $(tail -3 "$dir/rank$r.out" "$dir/rank$r.err")" >&2; return 1; }; done
  cpu1=$(proc_cpu_s "$ap_pid"); sirq1=$(softirq_s); prog1=$(prog_run_ns)
  ip netns exec "$(rack_ns_ap)" bash -c 'exec 3<>/dev/tcp/'"$RACK_APPLIANCE_ADDR"'/7470; echo STATS >&3; head -1 <&3' > "$dir/stats.txt" || true
  kill -TERM "$ap_pid"; wait "$ap_pid" 2>/dev/null || true
  if [ "$backend" = xdp ]; then
    packets=$(grep -h 'xdp: detached' "$dir/appliance.log" | sed -n 's/.*updates=\([0-9]*\).*probes=\([0-9]*\).*/\1 \2/p' | awk '{ print $1 + $2 }')
  else
    before=$(stats_value "$dir/stats0.txt" shard_packets_in); after=$(stats_value "$dir/stats.txt" shard_packets_in)
    packets=$(( ${after:-0} - ${before:-0} ))
  fi
  tat=$(grep -h '^RESULT' "$dir"/rank*.out | sed -n 's/.*p50Ms=\([0-9.]*\).*/\1/p' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  awk -v b="$backend" -v round="$round" -v c0="$cpu0" -v c1="$cpu1" -v s0="$sirq0" -v s1="$sirq1" -v p0="${prog0:-0}" \
    -v p1="${prog1:-0}" -v n="$packets" -v tat="$tat" 'BEGIN {
      app = c1 - c0; prog = (p1 - p0) / 1e9; sirq = s1 - s0; mp = n / 1e6;
      printf "RUN backend=%s round=%d packets=%d applianceCpuS=%.3f programCpuS=%.3f machineSoftirqS=%.3f cpuSPerMpkt=%.3f tatP50Ms=%s\n",
        b, round, n, app, prog, sirq, (mp > 0 ? (app + prog) / mp : 0), tat }'
}

{
  echo "# bench/xdp/run.sh --rate $RATE --mac $MAC --rounds $ROUNDS --size-mb $SIZE_MB --iterations $ITERATIONS --warmups $WARMUPS --mtu $MTU -k $LANES"
  echo "# $(date -u +%FT%TZ) kernel $(uname -r), $(nproc) cores, build $(git -C "$ROOT" rev-parse --short HEAD)"
  for ((round = 1; round <= ROUNDS; round++)); do
    if [ $((round % 2)) -eq 1 ]; then order="software xdp"; else order="xdp software"; fi
    for backend in $order; do run_one "$backend" "$round"; done
  done
} | tee "$WORK/runs.txt"

awk '/^RUN/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    b = v["backend"]; cpu[b] += v["applianceCpuS"] + v["programCpuS"]; pk[b] += v["packets"]; n[b]++; tats[b] = tats[b] " " v["tatP50Ms"]
  }
  END {
    for (b in n) printf "SUMMARY backend=%s runs=%d cpuSPerMpkt=%.3f tatP50Ms=[%s ]\n", b, n[b], cpu[b] / (pk[b] / 1e6), tats[b]
    if (pk["xdp"] > 0 && pk["software"] > 0)
      printf "SUMMARY ratio software/xdp CPU-seconds per million packets = %.2fx (goal >= 3x)\n",
        (cpu["software"] / (pk["software"] / 1e6)) / (cpu["xdp"] / (pk["xdp"] / 1e6))
  }' "$WORK/runs.txt" | tee -a "$WORK/runs.txt"
mkdir -p "$ROOT/docs/bench"
cp "$WORK/runs.txt" "$ROOT/docs/bench/xdp-$(date -u +%F)-$RATE-mac$MAC$([ "$MTU" = 1500 ] || echo "-mtu$MTU").txt"
