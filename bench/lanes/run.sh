#!/usr/bin/env bash
# bench/lanes/run.sh [CALLS]: one rank's per-element work of a 100 MB all-reduce (KernelCold.java), call by call from
# a fresh JVM each time: the Java loops with the JIT as usual and with C1 only (-XX:TieredStopAtLevel=1), the Java
# loops' maxAbsBits as well (-Dswitchml.lanes.native=false), and the native kernels. Uses the built class path
# (dist/target/package-lib: run ./switchml --version first) and the JDK the launcher finds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=$root/dist/target/package-lib
calls=${1:-6}
java=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java
cp="$(ls "$lib"/protocol-*.jar | head -1):$(ls "$lib"/agrona-*.jar | head -1)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"${java%/java}/javac" -d "$out" -cp "$cp" "$here/KernelCold.java"
opts=(--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --enable-native-access=ALL-UNNAMED -cp "$cp:$out")
echo "java, JIT as usual:      $("$java" "${opts[@]}" -Dswitchml.lanes.native=false KernelCold java "$calls")"
echo "java, C1 only:           $("$java" "${opts[@]}" -Dswitchml.lanes.native=false -XX:TieredStopAtLevel=1 KernelCold java "$calls")"
echo "native, JIT as usual:    $("$java" "${opts[@]}" KernelCold native "$calls")"
echo "native, C1 only:         $("$java" "${opts[@]}" -XX:TieredStopAtLevel=1 KernelCold native "$calls")"
