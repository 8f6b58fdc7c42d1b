#!/usr/bin/env bash
# bench/tofino/run.sh: what can honestly be reported about the Tofino target without a switch.
#
#   sudo bench/tofino/run.sh
#
# Runs the tofino-model backend in the namespace rack (tofino-p4/src/test/sh/tofino-model-rack.sh: 4 workers, 1% loss,
# k=64 and k=256) and prints, per k, the pipeline passes and recirculations per packet that the model counted, next to
# what the program's structure predicts, and the paper's per-pass latency applied to them (labelled as the paper's).
# The model's packets per second are a Java interpreter's on a shared core, not a switch's: not printed.
# The model's exactness against SlotPool is TofinoModelDifferentialTest (./switchml test runs it).
set -euo pipefail
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench/tofino: takes no options: $1 (--help)" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "bench/tofino: needs root (namespaces)" >&2; exit 2; }
"$ROOT/scripts/ensure-test-deps.sh" --build
"$ROOT/switchml" build
JAVA=$(ls -d /usr/lib/jvm/temurin-25-jdk-amd64/bin/java 2>/dev/null || command -v java)
OUT=$(mktemp)
SWITCHML_CP="$ROOT/dist/target/switchml.jar:$ROOT/dist/target/lib/*" JAVA="$JAVA" bash "$ROOT/tofino-p4/src/test/sh/tofino-model-rack.sh" > "$OUT" 2>&1 \
  || { cat "$OUT"; echo "bench/tofino: the rack run failed" >&2; exit 1; }
WORKERS=4
for k in 64 256; do
  line=$(grep "case=k$k log .*pipeline counters:" "$OUT" || true)
  [ -n "$line" ] || { cat "$OUT"; exit 1; }
  packets=$(sed -n 's/.* packets=\([0-9]*\).*/\1/p' <<< "$line")
  passes=$(sed -n 's/.* passes=\([0-9]*\).*/\1/p' <<< "$line")
  recirc=$(sed -n 's/.* recirculations=\([0-9]*\).*/\1/p' <<< "$line")
  ok=$(grep -c "case=k$k RESULT.*ok=true" "$OUT" || true)
  blocks=$((k / 64))
  awk -v k="$k" -v p="$packets" -v s="$passes" -v r="$recirc" -v b="$blocks" -v n="$WORKERS" -v ok="$ok" 'BEGIN {
    printf "k=%d: %d packets through the model, %.3f passes and %.3f recirculations per packet (ranks ok: %d/%d)\n", k, p, s / p, r / p, ok, n
    printf "      predicted for updates alone: %.3f passes per update ((n+1)/n x %d blocks; probes (one pass), short last chunks and shadow answers move the measured figure either way)\n", (n + 1) / n * b, b
    printf "      paper (NSDI 21, 520 ns per pass, not measured here): completing packet %d passes = %.1f us of pipeline time\n", 2 * b, 2 * b * 0.52
  }'
done
rm -f "$OUT"
