#!/usr/bin/env bash
# fallback-checks.sh: the AOT cache fallbacks (docs/bench/aot-2026-11-25.md, "Fallbacks"), on an unpacked copy of
# the distribution archive that the build made (dist/target/switchml-*-dist.tar.gz); run after ./mvnw install.
set -u
export JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64
unset SWITCHML_LIB
T=$(mktemp -d); tar xzf $(cd "$(dirname "$0")/../.." && pwd)/dist/target/switchml-*-dist.tar.gz -C "$T"; D=$(echo "$T"/switchml-*); S="$D/bin/switchml"
run() { # label, then env assignments via env
  local label=$1; shift
  local out rc
  out=$(env "$@" "$S" worker --version 2>&1); rc=$?
  echo "== $label: rc=$rc; used: $(grep -c 'Using AOT-linked classes: true' <<<"$out"); tried: $(grep -c 'trying to map' <<<"$out")"
  grep -E "error|warning" <<<"$out" | grep -v Skipping | head -4 | sed 's/^/   /'
  grep -E "^switchml " <<<"$out" | sed 's/^/   /'
}
L="SWITCHML_JAVA_OPTS=-Xmx256m -Xlog:aot=info"
run "matching cache" "$L"
run "SWITCHML_AOT=off" "$L" SWITCHML_AOT=off
run "SWITCHML_AOT=bogus" "$L" SWITCHML_AOT=bogus
cp "$D/lib/switchml.aot.jdk" "$T/jdk.bak"; echo "Other Vendor 25.0.9+1" > "$D/lib/switchml.aot.jdk"
run "cache of another JDK (switchml.aot.jdk differs)" "$L"
cp "$T/jdk.bak" "$D/lib/switchml.aot.jdk"
run "other GC in SWITCHML_JAVA_OPTS" "SWITCHML_JAVA_OPTS=-Xmx256m -XX:-UseParallelGC -XX:+UseSerialGC -Xlog:aot=info"
run "other --add-opens in SWITCHML_JAVA_OPTS" "SWITCHML_JAVA_OPTS=-Xmx256m --add-opens=java.base/java.io=ALL-UNNAMED -Xlog:aot=info"
run "large heap (-Xmx40g, no compressed oops)" "SWITCHML_JAVA_OPTS=-Xmx40g -Xlog:aot=info"
touch "$D/lib/picocli-4.7.7.jar"
run "a jar touched (mtime differs)" "$L"
touch -d @1767225600 "$D/lib/picocli-4.7.7.jar"
run "jar time restored" "$L"
head -c 1000000 "$D/lib/switchml.aot" > "$T/trunc"; cp "$T/trunc" "$D/lib/switchml.aot"
run "truncated cache file" "$L"
echo garbage > "$D/lib/switchml.aot"
run "garbage cache file" "$L"
rm -rf "$T"
