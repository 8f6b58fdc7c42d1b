#!/usr/bin/env bash
# stage-lib.sh TARGET JAVA_HOME EPOCH SKIP_AOT: run by the dist build (package phase, after copy-dependencies).
#
# 1. Copies switchml.jar into TARGET/package-lib, which then holds the whole class path, laid out as the package
#    installs it (/usr/lib/switchml, lib/ of the archive) and as both launchers run it, and the launcher's JIT
#    directives (packaging/lib/jit-directives.json) beside it.
# 2. Replaces picocli's jar with picocli built from its own sources jar (TARGET/picocli-sources, fetched by the
#    dist build) by this JDK's javac: picocli ships Java 5 class files, which the AOT cache cannot hold, so every
#    command's JVM loaded and verified its ~170 classes from the jar (the old verifier) before parsing its command
#    line. Built for Java 25 they come from the cache like the rest: `switchml --version` took 346 ms instead of 424
#    and `switchml ops --help` 304 instead of 399, about 0.1 CPU-s less each (medians of 10 interleaved runs,
#    2026-11-26, docs/bench/worker-transport-2026-11-25.md, session 33). Same version, same sources, same licence;
#    the build fails when the classes it compiled are not those of the released jar (anonymous classes aside).
# 3. Sets every jar's modification time to EPOCH, the time the .deb gives its entries (jdeb outputTimestamp): an
#    AOT cache records the size and modification time of each jar of its class path and the JVM refuses it
#    ("timestamp has changed") when an installed jar differs. The archive keeps these times as they are.
# 4. Unless SKIP_AOT is true (-Dswitchml.aot.skip=true), trains the AOT cache TARGET/package-lib/switchml.aot
#    with the installed launcher itself (SWITCHML_AOT=train), so that JVM options and class path order are
#    the ones it will be used with. The run is `switchml aot-train` (AotTrainCommand): every command's usage,
#    `worker serve` agents all-reducing for a client through their socket and shared memory, then a short demo
#    (appliance and 4 workers in one JVM). JEP 514: the JVM writes the cache when it exits; JEP 515: with the
#    method profiles of the data path. About 15 s.
#    40 all-reduces per agent, not 10: the cache decides which data-path methods C2 compiles early at run time, and
#    which it records varies from one training run to the next. Seven caches trained with 10 and six with 40, three
#    loopback cells each (4 worker JVMs and the appliance on 2 cores, 100 MB; 2026-11-26): each cache gave about the same
#    first all-reduce in every cell, and the per-cache medians were 384-600 ms with 10 (median 429, two caches near
#    600) against 315-461 ms with 40 (median 386). 100 all-reduces did no better (408 and 468).
set -euo pipefail
target=$1 java_home=$2 epoch=$3 skip=$4
root=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../.." && pwd)
lib=$target/package-lib

cp -p "$target/switchml.jar" "$lib/switchml.jar"
cp "$root/packaging/lib/jit-directives.json" "$lib/jit-directives.json"

picocli_jars=("$lib"/picocli-*.jar)
if [ "${#picocli_jars[@]}" -ne 1 ] || ! [ -f "${picocli_jars[0]}" ]; then
  echo "[picocli] expected one picocli jar in $lib, found: ${picocli_jars[*]}" >&2
  exit 1
fi
picocli_jar=${picocli_jars[0]}
picocli_version=${picocli_jar##*/picocli-}
picocli_version=${picocli_version%.jar}
picocli_sources=$target/picocli-sources/picocli-$picocli_version-sources.jar
picocli_work=$target/picocli-build
if ! [ -f "$picocli_sources" ]; then
  echo "[picocli] $picocli_sources is missing (dist/pom.xml's execution picocli-sources fetches it)" >&2
  exit 1
fi
rm -rf "$picocli_work"
mkdir -p "$picocli_work/src" "$picocli_work/classes"
(cd "$picocli_work/src" && "$java_home/bin/jar" xf "$picocli_sources")
if ! "$java_home/bin/javac" --release 25 -nowarn -proc:none -encoding UTF-8 -d "$picocli_work/classes" \
    "$picocli_work/src"/picocli/*.java >"$picocli_work/javac.log" 2>&1; then
  cat "$picocli_work/javac.log" >&2
  echo "[picocli] compiling $picocli_sources failed" >&2
  exit 1
fi
named_classes() { grep '^picocli/.*\.class$' | grep -Ev '\$[0-9]+(\$|\.class$)' | sort; }
if ! diff <("$java_home/bin/jar" tf "$picocli_jar" | named_classes) \
    <(cd "$picocli_work/classes" && find picocli -name '*.class' | named_classes) >"$picocli_work/classes.diff"; then
  cat "$picocli_work/classes.diff" >&2
  echo "[picocli] the classes built from $picocli_sources are not those of $picocli_jar" >&2
  exit 1
fi
{
  echo "Implementation-Title: picocli"
  echo "Implementation-Vendor: Remko Popma"
  echo "Implementation-Version: $picocli_version"
  echo "Created-By: the switchml build, from picocli-$picocli_version-sources.jar (javac --release 25)"
} >"$picocli_work/MANIFEST.MF"
rm -f "$picocli_jar"
"$java_home/bin/jar" --create --date "$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)" --file "$picocli_jar" \
  --manifest "$picocli_work/MANIFEST.MF" -C "$picocli_work/classes" picocli
picocli_classes=$(find "$picocli_work/classes" -name '*.class' | wc -l)
echo "[picocli] picocli-$picocli_version.jar built from its sources for Java 25 ($picocli_classes classes)"
touch -d "@$epoch" "$lib"/*.jar
rm -f "$lib/switchml.aot" "$lib/switchml.aot.jdk"

if [ "$skip" = true ]; then
  echo "[aot] switchml.aot: skipped (switchml.aot.skip)"
  exit 0
fi
log=$target/aot-train.log
start=$SECONDS
# The heap default is the launcher's; the run checks every result, so a wrong one fails the build.
if ! JAVA_HOME=$java_home SWITCHML_LIB=$lib SWITCHML_AOT=train SWITCHML_JAVA_OPTS= \
    "$root/packaging/bin/switchml" aot-train --size-mb 16 --iterations 40 >"$log" 2>&1 ||
    ! [ -s "$lib/switchml.aot" ]; then
  tail -n 40 "$log" >&2
  rm -f "$lib/switchml.aot" "$lib/switchml.aot.jdk"
  echo "[aot] training the AOT cache failed (log: $log); -Dswitchml.aot.skip=true builds without one" >&2
  exit 1
fi
echo "[aot] $(grep -o 'AOTCache creation is complete.*' "$log") in $((SECONDS - start)) s (log: $log)"
