#!/usr/bin/env bash
# Build the JMH uber-jar and run every micro-benchmark with modest settings; results go to docs/jmh/:
#   results.json                JMH's JSON, all benchmarks
#   results-no-superword.json   the block floating point loops again with -XX:-UseSuperWord
#   results.md                  Markdown summary: ns/op, GB/s, host, date, the SuperWord comparison
#
#   bench/jmh/run.sh                        -f 1 -wi 3 -i 5 -w 1s -r 1s, about 5 minutes
#   bench/jmh/run.sh -f 1 -i 3 Lanes        any JMH options and benchmark patterns instead
#   SWITCHML_JMH_OUT=/tmp/jmh bench/jmh/run.sh    write elsewhere
#   SWITCHML_JMH_NO_BUILD=1 bench/jmh/run.sh      reuse bench/jmh/target/jmh-benchmarks.jar
#
# The jar also runs on its own: java -jar bench/jmh/target/jmh-benchmarks.jar -h (plain JMH, no summary).
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
if [ -z "${JAVA_HOME:-}" ] || [ ! -x "$JAVA_HOME/bin/javac" ]; then
  JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64
fi
export JAVA_HOME
JAR="$ROOT/bench/jmh/target/jmh-benchmarks.jar"
OUT="${SWITCHML_JMH_OUT:-$ROOT/docs/jmh}"

if [ -z "${SWITCHML_JMH_NO_BUILD:-}" ]; then
  echo "run.sh: building $JAR with $JAVA_HOME ..." >&2
  (cd "$ROOT" && ./mvnw -q -B -DskipTests -pl bench/jmh -am package)
fi

if [ "$#" -eq 0 ]; then
  set -- -f 1 -wi 3 -i 5 -w 1s -r 1s
fi
echo "run.sh: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$JAVA_HOME/bin/java" -cp "$JAR" io.switchml.bench.jmh.BenchReport --out "$OUT" "$@"
