#!/usr/bin/env bash
# The parsers' fuzz tests with a long budget (CI runs them with 200 k inputs per parser and 3 k control lines over TCP):
#   bench/fuzz/run.sh [ITERATIONS] [SEED]
# ITERATIONS (default 1,000,000): inputs per parser for ParserFuzzTest and mutated control lines over TCP for
# ControlFuzzTest (about 3,000 lines a second here). A failure prints its seed; replay it with SEED.
# Seeded mutation, not coverage-guided: Jazzer 0.24.0 resolves here but its JUnit engine failed test discovery
# with JUnit 5.11 on JDK 25 when tried (2026-11-25).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
case "${1:-}" in -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ "$#" -le 2 ] || { echo "bench/fuzz: at most ITERATIONS and SEED, got $# arguments (--help)" >&2; exit 2; }
ITERATIONS=${1:-1000000}
SEED=${2:-}
[[ "$ITERATIONS" =~ ^[1-9][0-9]*$ ]] || { echo "bench/fuzz: ITERATIONS must be a positive integer: $ITERATIONS" >&2; exit 2; }
[ -z "$SEED" ] || [[ "$SEED" =~ ^-?[0-9]+$ ]] || { echo "bench/fuzz: SEED must be an integer: $SEED" >&2; exit 2; }
cd "$ROOT"
./mvnw -q -B -DskipTests install -pl protocol,appliance -am
./mvnw -B -pl protocol,appliance verify -Dtest='ParserFuzzTest,ControlFuzzTest' -Dsurefire.failIfNoSpecifiedTests=false \
  -Dswitchml.fuzz.iterations="$ITERATIONS" ${SEED:+-Dswitchml.test.seed="$SEED"} | grep -E 'Tests run|FAIL|seed=' || true
