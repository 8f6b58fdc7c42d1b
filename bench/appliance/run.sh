#!/usr/bin/env bash
# Appliance data-plane load benchmark on loopback: packets/s and aggregated Gbit/s per shard for
# 1 KiB (k=256) and jumbo (k=2233) payloads, and bytes allocated per packet on the shard threads.
#   bench/appliance/run.sh [--workers 4] [--shards 1] [--lanes 256,2233] [--transport auto|native|epoll|io_uring|nio] [--mac off] ... (--help: all)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
(cd "$ROOT" && "$ROOT/mvnw" -q -B -pl bench/appliance -am package -DskipTests)
exec "$JAVA_HOME/bin/java" --add-modules=jdk.incubator.vector --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --enable-native-access=ALL-UNNAMED \
  --sun-misc-unsafe-memory-access=allow --add-opens=java.base/java.lang.reflect=ALL-UNNAMED \
  --add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED \
  -Dchronicle.analytics.disable=true -Dchronicle.announcer.disable=true -XX:+UseParallelGC \
  -cp "$ROOT/bench/appliance/target/bench-appliance-0.1.0-SNAPSHOT.jar:$ROOT/bench/appliance/target/lib/*" \
  io.switchml.bench.ApplianceLoadBench "$@"
