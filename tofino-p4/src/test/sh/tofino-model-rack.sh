#!/usr/bin/env bash
# tofino-model-rack.sh: the tofino-model backend end to end in the emulated rack (bench/rack's topology: a bridge
# namespace as the ToR, the appliance and each worker in its own namespace on a veth). The appliance runs with
# switchml.appliance.backends=tofino-model,software: each job is installed through P4Runtime (gRPC over TCP on
# loopback) into the Java model of the Tofino pipeline, which then aggregates the job's packets on the shard's thread
# in place of the slot pool. 4 workers all-reduce known float32 tensors (quantized to int32, MAC off as on a switch)
# with 1% random loss on every bridge port, checking every result within n/f; once at k=64 (one pass) and once at
# k=256 (four passes, by recirculation). Prints "TOFINO_RACK key=value ..." lines; exits non-zero on any failure.
#
# Needs root, iproute2, nftables and a built class path:
#   SWITCHML_CP=<class path with every module> JAVA=<java 25> tofino-p4/src/test/sh/tofino-model-rack.sh
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
: "${SWITCHML_CP:?set SWITCHML_CP to the class path}"
JAVA=${JAVA:-java}
WORKERS=${TOFINO_RACK_WORKERS:-4}
LOSS=${TOFINO_RACK_LOSS:-0.01}
ELEMENTS=${TOFINO_RACK_ELEMENTS:-1000000}
ITERATIONS=${TOFINO_RACK_ITERATIONS:-3}
export RACK_PREFIX=${RACK_PREFIX:-tfr$$}
WORK=$(mktemp -d /tmp/tofino-rack.XXXXXX)
JVM_FLAGS=(--add-modules=jdk.incubator.vector --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --enable-native-access=ALL-UNNAMED
  --sun-misc-unsafe-memory-access=allow --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
  -Dchronicle.analytics.disable=true -Dchronicle.announcer.disable=true -XX:+UseSerialGC -XX:TieredStopAtLevel=1)

# shellcheck source=../../../../bench/rack/rack.sh
source "$ROOT/bench/rack/rack.sh"

log() { echo "tofino-rack: $*" >&2; }

PIDS=()
trap 'rack_test_cleanup "${TOFINO_RACK_KEEP:-}"' EXIT

[ "$(id -u)" -eq 0 ] || { log "needs root (network namespaces)"; exit 2; }

rack_up "$WORKERS" none none 1500
rack_loss "$LOSS"

run_case() {
  local name=$1 k=$2 r rc=0 ap_pid pids=() failed=0
  local dir="$WORK/$name"
  mkdir -p "$dir"
  cat > "$dir/appliance.properties" <<EOF
switchml.appliance.backends=tofino-model,software
switchml.appliance.mac=off
EOF
  ip netns exec "$(rack_ns_ap)" "$JAVA" "${JVM_FLAGS[@]}" -Xmx512m -cp "$SWITCHML_CP" io.switchml.dist.SwitchMl appliance \
    --config "$dir/appliance.properties" --bind "$RACK_APPLIANCE_ADDR" --data-port 7471 --control-port 7470 --http-port 7472 \
    --dir "$dir/state" --insecure-control > "$dir/appliance.log" 2>&1 &
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
  for ((r = 0; r < WORKERS; r++)); do
    ip netns exec "$(rack_ns_w "$r")" timeout -k 5 120 "$JAVA" "${JVM_FLAGS[@]}" -Xmx1g -cp "$SWITCHML_CP" io.switchml.dist.SwitchMl \
      worker run --appliance "$RACK_APPLIANCE_ADDR" --control-port 7470 --job "tofino-$name" --token "tofino-rack-token-$$" \
      --world "$WORKERS" --rank "$r" --type float32 --elements "$ELEMENTS" --iterations "$ITERATIONS" --warmups 1 \
      -k "$k" -s 32 --mac off > "$dir/rank$r.out" 2> "$dir/rank$r.err" &
    pids+=($!)
    PIDS+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { rc=$?; failed=1; log "$name: rank $r exited $rc: $(cat "$dir/rank$r.out" "$dir/rank$r.err" | tail -5)"; }
  done
  ip netns exec "$(rack_ns_ap)" bash -c 'exec 3<>/dev/tcp/'"$RACK_APPLIANCE_ADDR"'/7470; echo JOBS >&3; head -1 <&3' \
    > "$dir/jobs.txt" 2>&1 || true
  kill -TERM "$ap_pid" 2>/dev/null || true
  wait "$ap_pid" 2>/dev/null || true
  for ((r = 0; r < WORKERS; r++)); do
    grep -h '^RESULT' "$dir/rank$r.out" | sed "s/^/TOFINO_RACK case=$name /" || true
  done
  grep -ho 'backend=[a-z-]*' "$dir/appliance.log" | sort -u | sed "s/^/TOFINO_RACK case=$name placement /" || true
  grep -h 'tofino' "$dir/appliance.log" | sed "s/^/TOFINO_RACK case=$name log /" || true
  local drops
  drops=$(rack_loss_drops)
  [ "$drops" -gt 0 ] || { log "$name: the loss rules dropped nothing"; failed=1; }
  echo "TOFINO_RACK case=$name loss_drops=$drops failed=$failed"
  return "$failed"
}

status=0
run_case k64 64 || status=1
run_case k256 256 || status=1
exit "$status"
