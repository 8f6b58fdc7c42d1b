#!/usr/bin/env bash
# xdp-rack.sh: the XDP backend end to end in the emulated rack (bench/rack's topology: a bridge namespace as the
# ToR, the appliance and each worker in its own namespace on a veth). The appliance runs with
# switchml.appliance.backends=xdp,software and its eth0 in driver (native) XDP mode; 4 workers all-reduce known
# float32 tensors with 1% random loss on every bridge port, checking every result within n/f. Two runs: MAC on with
# results multicast by the program (XDP_TX), MAC off with results handed up to the Java shard for unicast fan-out.
# Prints "XDP_RACK key=value ..." summary lines and exits non-zero on any failure. Cleans up its namespaces.
#
# Knobs: XDP_RACK_MTU (1500; 9000 for jumbo frames, where the appliance takes k up to 2233), XDP_RACK_K (k of the
# workers' jobs: 256, or the largest k the MTU carries when XDP_RACK_MTU is set), XDP_RACK_CASES (both cases:
# "mac-multicast nomac-unicast"), XDP_RACK_WORKERS, XDP_RACK_LOSS, XDP_RACK_ELEMENTS, XDP_RACK_ITERATIONS,
# XDP_RACK_REATTACH_CASES (cases whose program is taken off eth0 once the appliance is ready, as an operator's
# `ip link set dev eth0 xdpdrv off` would: the case waits for the appliance to put it back, then runs its workers on it).
#
# Needs root, iproute2, nftables and a built class path:
#   SWITCHML_CP=<class path with every module> JAVA=<java 25> smartnic-offload/src/test/sh/xdp-rack.sh
# The XDP program and the peer's pass program are read from the class path's bpf/ resources (extracted by the
# appliance itself; the pass program is extracted here with unzip or from a classes directory).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
: "${SWITCHML_CP:?set SWITCHML_CP to the class path}"
JAVA=${JAVA:-java}
WORKERS=${XDP_RACK_WORKERS:-4}
LOSS=${XDP_RACK_LOSS:-0.01}
ELEMENTS=${XDP_RACK_ELEMENTS:-2000000}
ITERATIONS=${XDP_RACK_ITERATIONS:-5}
MTU=${XDP_RACK_MTU:-1500}
if [ -n "${XDP_RACK_MTU:-}" ]; then K=${XDP_RACK_K:-$(( (MTU - 68) / 4 ))}; else K=${XDP_RACK_K:-256}; fi
CASES=${XDP_RACK_CASES:-mac-multicast nomac-unicast}
export RACK_PREFIX=${RACK_PREFIX:-xdpr$$}
WORK=$(mktemp -d /tmp/xdp-rack.XXXXXX)
JVM_FLAGS=(--add-modules=jdk.incubator.vector --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --enable-native-access=ALL-UNNAMED
  --sun-misc-unsafe-memory-access=allow --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
  -Dchronicle.analytics.disable=true -Dchronicle.announcer.disable=true -XX:+UseSerialGC -XX:TieredStopAtLevel=1)

# shellcheck source=../../../../bench/rack/rack.sh
source "$ROOT/bench/rack/rack.sh"

log() { echo "xdp-rack: $*" >&2; }

PIDS=()
trap 'rack_test_cleanup "${XDP_RACK_KEEP:-}"' EXIT

[ "$(id -u)" -eq 0 ] || { log "needs root (network namespaces, XDP)"; exit 2; }

find_resource() {
  local name=$1 entry
  if [ -f "$ROOT/smartnic-offload/target/classes/bpf/$name" ]; then cp "$ROOT/smartnic-offload/target/classes/bpf/$name" "$WORK/$name"; return 0; fi
  IFS=: read -ra entries <<< "$SWITCHML_CP"
  for entry in "${entries[@]}"; do
    if [ -d "$entry" ] && [ -f "$entry/bpf/$name" ]; then cp "$entry/bpf/$name" "$WORK/$name"; return 0; fi
    if [ -f "$entry" ] && unzip -l "$entry" "bpf/$name" >/dev/null 2>&1; then unzip -p "$entry" "bpf/$name" > "$WORK/$name"; return 0; fi
  done
  log "bpf/$name not found on the class path"; return 1
}
find_resource switchml_pass.o

rack_up "$WORKERS" none none "$MTU"
# veth delivers XDP_TX frames only when the receiving end runs an XDP program: the bridge port gets a pass program,
# declared xdp.frags so that veth takes it at any MTU and hands it multi-buffer frames
ip netns exec "$(rack_ns_sw)" ip link set dev p-ap xdpdrv obj "$WORK/switchml_pass.o" sec xdp.frags
log "MTU $MTU, k=$K, $WORKERS workers, loss $LOSS, cases: $CASES"
rack_loss "$LOSS"

run_case() {
  local name=$1 mac=$2 multicast=$3 r rc=0 ap_pid pids=() failed=0
  local dir="$WORK/$name"
  mkdir -p "$dir"
  cat > "$dir/appliance.properties" <<EOF
switchml.appliance.backends=xdp,software
switchml.appliance.xdp.interface=eth0
switchml.appliance.xdp.mode=native
switchml.appliance.xdp.slots=1024
EOF
  ip netns exec "$(rack_ns_ap)" "$JAVA" "${JVM_FLAGS[@]}" -Xmx512m -cp "$SWITCHML_CP" io.switchml.dist.SwitchMl appliance \
    --config "$dir/appliance.properties" --bind "$RACK_APPLIANCE_ADDR" --data-port 7471 --control-port 7470 --http-port 7472 \
    --dir "$dir/state" --insecure-control ${multicast:+--multicast "$multicast"} > "$dir/appliance.log" 2>&1 &
  ap_pid=$!
  PIDS+=("$ap_pid")
  for _ in $(seq 300); do
    grep -qs 'appliance ready' "$dir/appliance.log" && break
    kill -0 "$ap_pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -qs 'appliance ready' "$dir/appliance.log"; then
    log "$name: appliance did not start:"; cat "$dir/appliance.log" >&2; return 1
  fi
  grep -q 'xdp: attached' "$dir/appliance.log" || { log "$name: the xdp backend did not attach:"; cat "$dir/appliance.log" >&2; return 1; }
  if [[ " ${XDP_RACK_REATTACH_CASES:-} " == *" $name "* ]]; then
    ip netns exec "$(rack_ns_ap)" ip link set dev eth0 xdpdrv off
    for _ in $(seq 150); do
      grep -qs 'xdp: re-attached' "$dir/appliance.log" && break
      sleep 0.1
    done
    grep -qs 'xdp: re-attached' "$dir/appliance.log" || { log "$name: the program taken off eth0 was not put back:"; cat "$dir/appliance.log" >&2; return 1; }
  fi
  for ((r = 0; r < WORKERS; r++)); do
    ip netns exec "$(rack_ns_w "$r")" timeout -k 5 120 "$JAVA" "${JVM_FLAGS[@]}" -Xmx1g -cp "$SWITCHML_CP" io.switchml.dist.SwitchMl \
      worker run --appliance "$RACK_APPLIANCE_ADDR" --control-port 7470 --job "xdp-$name" --token "xdp-rack-token-$$" \
      --world "$WORKERS" --rank "$r" --type float32 --elements "$ELEMENTS" --iterations "$ITERATIONS" --warmups 1 \
      -k "$K" -s 64 --mac "$mac" > "$dir/rank$r.out" 2> "$dir/rank$r.err" &
    pids+=($!)
    PIDS+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { rc=$?; failed=1; log "$name: rank $r exited $rc: $(cat "$dir/rank$r.out" "$dir/rank$r.err" | tail -5)"; }
  done
  # the appliance's view, while it runs: job placement and counters (STATS over the control port)
  ip netns exec "$(rack_ns_ap)" bash -c 'exec 3<>/dev/tcp/'"$RACK_APPLIANCE_ADDR"'/7470; echo STATS >&3; head -1 <&3' \
    > "$dir/stats.txt" 2>&1 || true
  kill -TERM "$ap_pid" 2>/dev/null || true
  wait "$ap_pid" 2>/dev/null || true
  for ((r = 0; r < WORKERS; r++)); do
    grep -h '^RESULT' "$dir/rank$r.out" | sed "s/^/XDP_RACK case=$name /" || true
  done
  grep -ho 'backend=[a-z-]*' "$dir/appliance.log" | sort -u | sed "s/^/XDP_RACK case=$name placement /" || true
  grep -h 'xdp:' "$dir/appliance.log" | sed "s/^/XDP_RACK case=$name log /" || true
  tr ' ' '\n' < "$dir/stats.txt" | grep -i -E 'xdp|packets_in|updates' | tr '\n' ' ' | sed "s/^/XDP_RACK case=$name stats /"
  echo
  if ip netns exec "$(rack_ns_ap)" ip -d link show dev eth0 | grep -q 'prog/xdp'; then
    log "$name: an XDP program is still attached to eth0 after the appliance stopped"; failed=1
  fi
  local drops
  drops=$(rack_loss_drops)
  [ "$drops" -gt 0 ] || { log "$name: the loss rules dropped nothing"; failed=1; }
  echo "XDP_RACK case=$name loss_drops=$drops failed=$failed"
  return "$failed"
}

status=0
for c in $CASES; do
  case "$c" in
    mac-multicast) run_case mac-multicast on 239.192.0.0 || status=1 ;;
    nomac-unicast) run_case nomac-unicast off "" || status=1 ;;
    *) log "unknown case $c"; status=1 ;;
  esac
done
exit "$status"
