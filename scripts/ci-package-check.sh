#!/usr/bin/env bash
# ci-package-check.sh: install the Debian package, check its units, run the installed appliance the way
# switchml-appliance.service would, then purge the package and check that nothing is left.
#
#   scripts/ci-package-check.sh            (as root; CI runs it after ./switchml test, see .ci/run)
#
# 1. builds dist/target/switchml_*_amd64.deb when it is missing or older than a source, unit or packaging file
# 2. dpkg -i; checks the user, the state directory, the launcher, the conffiles and the JDK discovery
# 3. systemd-analyze verify on the installed units (and an exposure ceiling from systemd-analyze security)
# 4. starts /usr/bin/switchml appliance as the switchml user with no capabilities, the unit's CPUAffinity
#    and a clean environment, NOTIFY_SOCKET pointing at a stand-in listener (systemd is not PID 1 here);
#    expects READY=1, WATCHDOG=1, HTTP 200 "status": "up" on /health, the shard pinned; SIGTERM: STOPPING=1, clean exit
# 5. dpkg --purge; checks that no file, user, group or file owned by the old uid is left
# Idempotent: a switchml package left installed by an earlier run is purged first. Cleans up on failure
# (trap). Exits non-zero on the first failed check. Takes about 30 s once the package is built.
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
PKG=switchml
UNIT_DIR=/usr/lib/systemd/system
APPLIANCE_UNIT=$UNIT_DIR/switchml-appliance.service
WORKER_UNIT=$UNIT_DIR/switchml-worker@.service
HOST_UNIT=$UNIT_DIR/switchml-worker-host.service
SHM_UNIT=$UNIT_DIR/run-switchml-shm.mount
CONFIG=/etc/switchml/appliance.properties
STATE_DIR=/var/lib/switchml
READY_TIMEOUT_S=60
STOP_TIMEOUT_S=30
# Ceiling for `systemd-analyze security` exposure (0 safest .. 10): a regression guard for the sandboxing.
MAX_EXPOSURE=3.0

WORK=
APP_PID=
LISTENER_PID=
INSTALLED_BY_US=0
STEP=

step() {
  STEP=$1
  echo "== $1"
}

ok() {
  echo "   ok    $1"
}

note() {
  echo "   note  $1"
}

fail() {
  echo "   FAIL  $1" >&2
  exit 1
}

# check DESCRIPTION COMMAND...: run the command quietly; ok or fail naming the check.
check() {
  local description=$1
  shift
  if "$@" >/dev/null 2>&1; then
    ok "$description"
  else
    fail "$description"
  fi
}

stop_pid() {
  local pid=$1
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}

cleanup() {
  local rc=$?
  stop_pid "$APP_PID"
  stop_pid "$LISTENER_PID"
  if [ "$rc" -ne 0 ]; then
    echo "ci-package-check: FAILED at: $STEP" >&2
    if [ -n "$WORK" ]; then
      for log in appliance.log notify.log listener.err; do
        if [ -s "$WORK/$log" ]; then
          echo "---- $log (last 40 lines)" >&2
          tail -n 40 "$WORK/$log" >&2
        fi
      done
    fi
    if [ "$INSTALLED_BY_US" = 1 ] && dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q installed; then
      echo "ci-package-check: purging the package after the failure" >&2
      dpkg --purge "$PKG" >/dev/null 2>&1 || true
    fi
  fi
  if [ -n "$WORK" ]; then
    if mountpoint -q "$WORK/shm" 2>/dev/null; then umount "$WORK/shm" || true; fi
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Property value from the installed appliance configuration.
config_value() {
  sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\\(.*[^[:space:]]\\)[[:space:]]*\$/\\1/p" "$CONFIG" | tail -n 1
}

# Setting from the installed appliance unit.
unit_value() {
  sed -n "s/^$1=\\(.*\\)\$/\\1/p" "$APPLIANCE_UNIT" | tail -n 1
}

# A Java 25 or newer for the stand-in listener, found the way the installed launcher finds one.
find_java() {
  local candidate major
  for candidate in "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*; do
    [ -n "$candidate" ] && [ -x "$candidate/bin/java" ] && [ -r "$candidate/release" ] || continue
    major=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$candidate/release")
    if [ -n "$major" ] && [ "$major" -ge 25 ]; then
      echo "$candidate/bin/java"
      return 0
    fi
  done
  return 1
}

# wait_for_line FILE REGEX SECONDS [PID]: poll FILE for an extended regex; give up early if PID exits.
wait_for_line() {
  local file=$1 regex=$2 seconds=$3 pid=${4:-}
  local deadline=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if grep -Eq "$regex" "$file" 2>/dev/null; then
      return 0
    fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      return 1
    fi
    sleep 0.2
  done
  grep -Eq "$regex" "$file" 2>/dev/null
}

port_in_use() {
  local proto=$1 port=$2
  [ -n "$(ss -Hn"$proto"l "sport = :$port" 2>/dev/null)" ]
}

# ---------------------------------------------------------------------------------------------------------
step "prerequisites"
[ "$(id -u)" -eq 0 ] || fail "must run as root (dpkg -i, a system user); CI runs as root"
missing=()
for tool in systemd-analyze curl setpriv taskset ss openssl lintian man; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  note "installing what provides: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends systemd curl util-linux iproute2 openssl lintian man-db >/dev/null
fi
ok "systemd-analyze ($(systemd-analyze --version | head -n 1)), curl, setpriv, taskset, ss, $(lintian --version), man-db"
JAVA=$(find_java) || fail "no Java 25 or newer in JAVA_HOME or /usr/lib/jvm"
ok "java for the stand-in listener: $JAVA"

# ---------------------------------------------------------------------------------------------------------
step "package"
newest_deb() {
  { ls -t "$ROOT"/dist/target/${PKG}_*_amd64.deb 2>/dev/null || true; } | head -n 1
}
DEB=$(newest_deb)
stale=
if [ -n "$DEB" ]; then
  stale=$(find "$ROOT" -path "$ROOT/.git" -prune -o -path '*/target' -prune -o \
    \( -name pom.xml -o -path '*/src/main/*' -o -path "$ROOT/packaging/*" -o -path "$ROOT/systemd/*" \) \
    -type f -newer "$DEB" -print -quit)
fi
if [ -z "$DEB" ] || [ -n "$stale" ]; then
  if [ -n "$stale" ]; then
    note "building the package: ${stale#"$ROOT"/} is newer than $(basename "$DEB")"
  else
    note "building the package: none built yet"
  fi
  "$ROOT/switchml" build
  DEB=$(newest_deb)
  [ -n "$DEB" ] || fail "the build made no dist/target/${PKG}_*_amd64.deb"
fi
ok "$(basename "$DEB") ($(du -h "$DEB" | cut -f1)): $(dpkg-deb -f "$DEB" Version), $(dpkg-deb -f "$DEB" Architecture), Depends: $(dpkg-deb -f "$DEB" Depends)"
ARCHIVE=$({ ls -t "$ROOT"/dist/target/switchml-*-dist.tar.gz 2>/dev/null || true; } | head -n 1)
[ -n "$ARCHIVE" ] || fail "no distribution archive dist/target/switchml-*-dist.tar.gz"
check "distribution archive $(basename "$ARCHIVE") has bin/switchml, lib/switchml.jar, etc/switchml, systemd units" \
  bash -c "tar tzf '$ARCHIVE' | grep -q '/bin/switchml\$' && tar tzf '$ARCHIVE' | grep -q '/lib/switchml.jar\$' &&
    tar tzf '$ARCHIVE' | grep -q '/etc/switchml/appliance.properties\$' &&
    tar tzf '$ARCHIVE' | grep -q '/systemd/switchml-appliance.service\$' &&
    tar tzf '$ARCHIVE' | grep -q '/systemd/switchml-worker@.service\$' &&
    tar tzf '$ARCHIVE' | grep -q '/systemd/switchml-worker-host.service\$' &&
    tar tzf '$ARCHIVE' | grep -q '/systemd/run-switchml-shm.mount\$'"
check "distribution archive has the Python package: python/pyproject.toml, python/switchml/backend.py" \
  bash -c "tar tzf '$ARCHIVE' | grep -q '/python/pyproject.toml\$' && tar tzf '$ARCHIVE' | grep -q '/python/switchml/backend.py\$'"

check "distribution archive has the man pages (share/man/man1/switchml-ops.1.gz) and bash completion" \
  bash -c "tar tzf '$ARCHIVE' | grep -q '/share/man/man1/switchml-ops.1.gz\$' &&
    tar tzf '$ARCHIVE' | grep -q '/share/bash-completion/completions/switchml\$'"
check "distribution archive has the Grafana dashboard and alerting rules (grafana/)" \
  bash -c "tar tzf '$ARCHIVE' | grep -q '/grafana/switchml-appliance.json\$' &&
    tar tzf '$ARCHIVE' | grep -q '/grafana/switchml-alerts.yml\$'"

# ---------------------------------------------------------------------------------------------------------
step "lintian"
# Debian's checks at their default level: no error, and no warning that packaging/deb/share/lintian-overrides
# (installed with the package, each with its reason) does not name. Lintian says it should not run as root.
lintian_rc=0
lintian --fail-on error,warning --info --display-info "$DEB" >"${TMPDIR:-/tmp}/switchml-lintian.$$" 2>&1 || lintian_rc=$?
lintian_out=$(grep -v -e '^N:' -e 'running with root privileges is not recommended' "${TMPDIR:-/tmp}/switchml-lintian.$$" || true)
rm -f "${TMPDIR:-/tmp}/switchml-lintian.$$"
if [ "$lintian_rc" -ne 0 ] || grep -q '^[EW]:' <<<"$lintian_out"; then
  echo "$lintian_out" >&2
  fail "lintian $(basename "$DEB"): exit $lintian_rc, $(grep -c '^E:' <<<"$lintian_out" || true) error(s), $(grep -c '^W:' <<<"$lintian_out" || true) warning(s)"
fi
ok "lintian $(basename "$DEB"): 0 errors, 0 warnings, $(grep -c '^I:' <<<"$lintian_out" || true) info tag(s), $(lintian --show-overrides "$DEB" 2>/dev/null | grep -c '^O:' || true) overridden (with reasons)"

if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q "installed\|config-files"; then
  note "purging a $PKG package left by an earlier run"
  dpkg --purge "$PKG" >/dev/null
fi
WORK=$(mktemp -d /tmp/switchml-package-check.XXXXXX)
# The switchml user must reach $WORK/run, where the stand-in notify socket goes.
chmod 0711 "$WORK"

# ---------------------------------------------------------------------------------------------------------
step "dpkg -i"
INSTALLED_BY_US=1
dpkg -i "$DEB" >"$WORK/dpkg-install.log" 2>&1 || { cat "$WORK/dpkg-install.log" >&2; fail "dpkg -i $(basename "$DEB")"; }
check "dpkg status: install ok installed" bash -c "dpkg-query -W -f='\${Status}' $PKG | grep -qx 'install ok installed'"
for path in /usr/bin/switchml /usr/lib/switchml/switchml.jar "$APPLIANCE_UNIT" "$WORKER_UNIT" "$CONFIG" \
  /etc/switchml/worker.env /usr/share/doc/switchml/README.md /usr/share/doc/switchml/examples/worker-INSTANCE.env \
  /usr/share/doc/switchml/grafana/switchml-appliance.json /usr/share/doc/switchml/grafana/switchml-alerts.yml; do
  check "installed $path" test -f "$path"
done
check "/usr/bin/switchml is executable" test -x /usr/bin/switchml
# The Python package, for Debian's python3: import switchml registers the torch.distributed backend.
PYPKG=/usr/lib/python3/dist-packages/switchml
for module in __init__ backend client requests errors agent config; do
  check "installed $PYPKG/$module.py" test -f "$PYPKG/$module.py"
done
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  imported=$(cd / && env -i PATH=/usr/bin:/bin /usr/bin/python3 -c \
    "import switchml, torch.distributed as d; assert 'SWITCHML' in d.Backend._plugins; print(switchml.__file__)" 2>&1) ||
    fail "import switchml with Debian's python3 registers backend switchml: $imported"
  [ "$imported" = "$PYPKG/__init__.py" ] || fail "python3 imports the packaged switchml, not $imported"
  ok "python3 -c 'import switchml' (from /) loads $PYPKG and registers backend switchml"
else
  note "no torch for /usr/bin/python3 (python3-torch): the packaged switchml module is not imported"
fi
if /usr/bin/python3 -c "import setuptools" 2>/dev/null && /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
  cp -r "$ROOT/worker-agent/python" "$WORK/pysrc"
  rm -rf "$WORK/pysrc/build" "$WORK/pysrc"/*.egg-info
  check "pyproject.toml builds a wheel offline (pip wheel --no-index --no-build-isolation) holding switchml/backend.py" \
    bash -c "/usr/bin/python3 -m pip wheel -q --no-deps --no-index --no-build-isolation -w '$WORK/wheel' '$WORK/pysrc' &&
      /usr/bin/python3 -m zipfile -l '$WORK'/wheel/switchml-*.whl | grep -q 'switchml/backend.py'"
else
  note "no pip/setuptools for /usr/bin/python3: the wheel build is not checked"
fi
check "conffiles registered: $CONFIG, /etc/switchml/worker.env" \
  bash -c "dpkg-query -W -f='\${Conffiles}' $PKG | grep -q ' $CONFIG ' && dpkg-query -W -f='\${Conffiles}' $PKG | grep -q ' /etc/switchml/worker.env '"
IFS=: read -r _ _ SWITCHML_UID SWITCHML_GID _ SWITCHML_HOME SWITCHML_SHELL < <(getent passwd switchml) ||
  fail "user switchml exists"
check "system user switchml (uid $SWITCHML_UID < 1000, home $SWITCHML_HOME, shell $SWITCHML_SHELL)" \
  test "$SWITCHML_UID" -lt 1000 -a "$SWITCHML_HOME" = "$STATE_DIR" -a "$SWITCHML_SHELL" = /usr/sbin/nologin
check "group switchml (gid $SWITCHML_GID)" test "$(getent group switchml | cut -d: -f3)" = "$SWITCHML_GID"
check "$STATE_DIR is switchml:switchml 750" test "$(stat -c '%U:%G %a' "$STATE_DIR")" = "switchml:switchml 750"
# A command as the package's user, with the environment a unit's ExecStart gets (no JAVA_HOME).
as_switchml() { setpriv --reuid=switchml --regid=switchml --init-groups env -i PATH=/usr/bin:/bin "$@"; }
version=$(as_switchml /usr/bin/switchml --version 2>&1) ||
  fail "switchml --version as switchml, without JAVA_HOME: $version"
ok "launcher finds a JDK without JAVA_HOME: switchml --version -> $version"
# The AOT cache (packaging/README.md, "Start-up: the AOT cache"): shipped, and used by the installed launcher when
# this JDK made it; a cache the JVM refuses would show as [error][aot] lines (it goes on without it).
check "AOT cache installed: /usr/lib/switchml/switchml.aot and switchml.aot.jdk" \
  test -s /usr/lib/switchml/switchml.aot -a -s /usr/lib/switchml/switchml.aot.jdk
aot_log=$(as_switchml SWITCHML_JAVA_OPTS="-Xmx256m -Xlog:aot=info" /usr/bin/switchml --version 2>&1) || fail "switchml --version with -Xlog:aot: $aot_log"
if grep -q "Using AOT-linked classes: true" <<<"$aot_log"; then
  ok "the installed launcher starts the JVM from the AOT cache (made by $(cat /usr/lib/switchml/switchml.aot.jdk))"
elif grep -q "trying to map" <<<"$aot_log"; then
  fail "the JVM refused the installed AOT cache: $(grep -E '\[(error|warning) *\]\[aot\]' <<<"$aot_log" | head -n 3)"
else
  note "the AOT cache was made by another JDK ($(cat /usr/lib/switchml/switchml.aot.jdk)): the launcher starts without it"
fi
# The JIT directives (packaging/bin/switchml, JIT_FLAGS): installed, read by the JVM of a data-path command (HotSpot
# says so on stderr, never on stdout) with the AOT cache still accepted, left out for the others and with
# SWITCHML_JIT_DIRECTIVES=off.
check "JIT directives installed: /usr/lib/switchml/jit-directives.json" test -s /usr/lib/switchml/jit-directives.json
jit_out=$(as_switchml SWITCHML_JAVA_OPTS="-Xmx256m -Xlog:aot=info:stderr" /usr/bin/switchml worker --help 2>"$WORK/jit.err") ||
  fail "switchml worker --help: $(cat "$WORK/jit.err")"
grep -q "compiler directives added" "$WORK/jit.err" && ! grep -q "directives" <<<"$jit_out" ||
  fail "the JVM of switchml worker did not read the JIT directives, or said so on stdout (stderr: $(cat "$WORK/jit.err"))"
if grep -q "Using AOT-linked classes: true" <<<"$aot_log" && ! grep -q "Using AOT-linked classes: true" "$WORK/jit.err"; then
  fail "the JVM refused the AOT cache with the JIT directives: $(grep -E '\[(error|warning) *\]\[aot\]' "$WORK/jit.err" | head -n 3)"
fi
jit_ops=$(as_switchml /usr/bin/switchml ops --help 2>&1 >/dev/null) || fail "switchml ops --help: $jit_ops"
jit_off=$(as_switchml SWITCHML_JIT_DIRECTIVES=off /usr/bin/switchml worker --help 2>&1 >/dev/null) ||
  fail "SWITCHML_JIT_DIRECTIVES=off switchml worker --help: $jit_off"
! grep -q "directives" <<<"$jit_ops$jit_off" ||
  fail "JIT directives read by switchml ops or with SWITCHML_JIT_DIRECTIVES=off: $jit_ops$jit_off"
set +e
jit_bad=$(as_switchml SWITCHML_JIT_DIRECTIVES=maybe /usr/bin/switchml worker --help 2>&1)
jit_bad_rc=$?
set -e
[ "$jit_bad_rc" -eq 2 ] && grep -q "SWITCHML_JIT_DIRECTIVES must be on or off" <<<"$jit_bad" ||
  fail "SWITCHML_JIT_DIRECTIVES=maybe: exit 2 naming the variable (got $jit_bad_rc: $jit_bad)"
ok "the launcher gives the JVM the JIT directives for data-path commands only (AOT cache accepted with them); SWITCHML_JIT_DIRECTIVES=off and a bad value work"
# Packet MACs in lanes (packaging/README.md, "Start-up: packet MACs in vector lanes"): by default the native library
# in the protocol jar, no JVM option; the JDK's vector module only with SWITCHML_MAC_LANES=on (data-path commands, which
# then start without the AOT cache), never for the ops CLI.
lanes_app=$(as_switchml /usr/bin/switchml appliance --help 2>&1 >/dev/null) || fail "switchml appliance --help: $lanes_app"
lanes_host=$(as_switchml /usr/bin/switchml worker host --help 2>&1 >/dev/null) || fail "switchml worker host --help: $lanes_host"
lanes_serve=$(as_switchml /usr/bin/switchml worker serve --help 2>&1 >/dev/null) || fail "switchml worker serve --help: $lanes_serve"
lanes_on=$(as_switchml SWITCHML_MAC_LANES=on /usr/bin/switchml worker serve --help 2>&1 >/dev/null) || fail "SWITCHML_MAC_LANES=on: $lanes_on"
lanes_off=$(as_switchml SWITCHML_MAC_LANES=off /usr/bin/switchml appliance --help 2>&1 >/dev/null) || fail "SWITCHML_MAC_LANES=off: $lanes_off"
grep -q "Using incubator modules: jdk.incubator.vector" <<<"$lanes_on" &&
  ! grep -q "incubator" <<<"$lanes_app$lanes_host$lanes_serve$lanes_off$jit_ops" ||
  fail "vector module: only with SWITCHML_MAC_LANES=on: $lanes_app | $lanes_host | $lanes_serve | $lanes_on | $lanes_off"
! grep -q '\[error *\]\[aot\]' <<<"$lanes_app$lanes_host$lanes_on$lanes_off" || fail "AOT cache errors: $lanes_app$lanes_on$lanes_off"
unzip -l /usr/lib/switchml/protocol-*.jar 2>/dev/null | grep -q 'native/linux-amd64/libswitchml_native.so' ||
  fail "the native library (packet MACs, lane kernels) is not in the installed protocol jar"
lanes_bad_rc=0
lanes_bad=$(as_switchml SWITCHML_MAC_LANES=maybe /usr/bin/switchml --version 2>&1) || lanes_bad_rc=$?
[ "$lanes_bad_rc" -eq 2 ] && grep -q "SWITCHML_MAC_LANES must be auto, on or off" <<<"$lanes_bad" ||
  fail "SWITCHML_MAC_LANES=maybe: exit 2 naming the variable (got $lanes_bad_rc: $lanes_bad)"
ok "packet MACs in lanes: the native library in the installed protocol jar, no JVM option by default; the vector module only with SWITCHML_MAC_LANES=on; a bad value exits 2"
# The worker commands' JIT (packaging/bin/switchml, SWITCHML_WORKER_JIT): C1 only for worker commands by default on
# x86-64, C2 kept for the appliance, for 16-bit job types and with SWITCHML_WORKER_JIT=full; a bad value exits 2.
tiered_stop() { as_switchml SWITCHML_JAVA_OPTS="-Xmx256m -XX:+PrintFlagsFinal" "$@" 2>&1 | awk '$2 == "TieredStopAtLevel" {print $4}'; }
jit_worker=$(tiered_stop /usr/bin/switchml worker serve --help)
jit_app=$(tiered_stop /usr/bin/switchml appliance --help)
jit_full=$(tiered_stop env SWITCHML_WORKER_JIT=full /usr/bin/switchml worker host --help)
jit_half=$(tiered_stop /usr/bin/switchml worker run --type bfloat16 --help)
[ "$jit_worker" = 1 ] && [ "$jit_app" = 4 ] && [ "$jit_full" = 4 ] && [ "$jit_half" = 4 ] ||
  fail "TieredStopAtLevel: worker serve $jit_worker (want 1), appliance $jit_app, SWITCHML_WORKER_JIT=full $jit_full, worker run --type bfloat16 $jit_half (want 4)"
wjit_bad_rc=0
wjit_bad=$(as_switchml SWITCHML_WORKER_JIT=maybe /usr/bin/switchml --version 2>&1) || wjit_bad_rc=$?
[ "$wjit_bad_rc" -eq 2 ] && grep -q "SWITCHML_WORKER_JIT must be auto, quick or full" <<<"$wjit_bad" ||
  fail "SWITCHML_WORKER_JIT=maybe: exit 2 naming the variable (got $wjit_bad_rc: $wjit_bad)"
ok "worker commands start with the JIT at C1 (TieredStopAtLevel=1), the appliance, 16-bit job types and SWITCHML_WORKER_JIT=full with C2; a bad value exits 2"
if unshare -m true 2>/dev/null; then
  set +e
  nojdk=$(unshare -m bash -c 'mount -t tmpfs none /usr/lib/jvm && env -i PATH=/usr/bin:/bin JAVA_HOME=/nonexistent /usr/bin/switchml --version' 2>&1)
  nojdk_rc=$?
  set -e
  [ "$nojdk_rc" -eq 2 ] && grep -q "no Java 25 or newer found" <<<"$nojdk" ||
    fail "without a JDK the launcher exits 2 with a clear message (got $nojdk_rc: $nojdk)"
  ok "without a JDK (empty /usr/lib/jvm): exit 2, \"$(head -n 1 <<<"$nojdk")\""
else
  note "cannot make a mount namespace here: the no-JDK message is not checked"
fi
# Man pages: every command's renders with man-db (man -l, no warnings from groff), and `man switchml-ops` finds it.
for page in switchml switchml-appliance switchml-worker switchml-worker-serve switchml-ops switchml-ops-status; do
  file=/usr/share/man/man1/$page.1.gz
  [ -f "$file" ] || fail "man page $file installed"
  rendered=$(MANWIDTH=100 LC_ALL=C.UTF-8 man --warnings -l "$file" 2>"$WORK/man.err") || fail "man -l $file: $(cat "$WORK/man.err")"
  [ ! -s "$WORK/man.err" ] || fail "man -l $file: warnings: $(head -n 3 "$WORK/man.err")"
  grep -q '^NAME' <<<"$rendered" && grep -q "^ *$page - " <<<"$rendered" && grep -q '^SYNOPSIS' <<<"$rendered" ||
    fail "man -l $file renders NAME ($page - ...) and SYNOPSIS: $(head -n 8 <<<"$rendered")"
done
man_ops=$(MANWIDTH=100 man switchml-ops 2>&1) && grep -q -- '--json' <<<"$man_ops" || fail "man switchml-ops finds the page, with --json: $man_ops"
ok "man pages: $(ls /usr/share/man/man1/switchml*.1.gz | wc -l) installed; man -l renders NAME and SYNOPSIS without warnings; man switchml-ops"
# Bash completion: the installed script sources in a plain bash and completes subcommands and options.
complete_words() {
  bash -c 'source /usr/share/bash-completion/completions/switchml || exit 9
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _complete_switchml switchml "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null; printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
completed=$(complete_words switchml o) || fail "bash completion script sources (exit $?)"
[ "$completed" = ops ] || fail "completion of 'switchml o' is ops, got: $completed"
completed=$(complete_words switchml ops st)
[ "$completed" = status ] || fail "completion of 'switchml ops st' is status, got: $completed"
completed=$(complete_words switchml appliance --con)
grep -qx -- '--config' <<<"$completed" || fail "completion of 'switchml appliance --con' offers --config, got: $completed"
ok "bash completion: 'switchml o' -> ops, 'switchml ops st' -> status, 'switchml appliance --con' -> $(tr '\n' ' ' <<<"$completed")"

resolved=$(as_switchml /usr/bin/switchml appliance --config "$CONFIG" --print-config 2>&1) || fail "packaged configuration is valid: $resolved"
grep -qx "switchml.appliance.dir=$STATE_DIR" <<<"$resolved" || fail "packaged configuration sets switchml.appliance.dir=$STATE_DIR"
ok "packaged configuration is valid (--print-config), switchml.appliance.dir=$STATE_DIR"
check "credentials file /etc/switchml/credentials is switchml:switchml 600 with an operator and a tenant line" \
  bash -c "[ \"\$(stat -c '%U:%G %a' /etc/switchml/credentials)\" = 'switchml:switchml 600' ] && grep -q '^operator ' /etc/switchml/credentials && grep -q '^tenant default ' /etc/switchml/credentials"
grep -qx "switchml.appliance.control.credentials.file=/etc/switchml/credentials" <<<"$resolved" ||
  fail "packaged configuration turns control authorization on"
ok "packaged configuration turns control authorization on"
check "control-channel TLS: /etc/switchml/tls/appliance.p12 and password switchml:switchml 600, ca.pem readable by all" \
  bash -c "[ \"\$(stat -c '%U:%G %a' /etc/switchml/tls/appliance.p12)\" = 'switchml:switchml 600' ] && [ \"\$(stat -c '%U:%G %a' /etc/switchml/tls/password)\" = 'switchml:switchml 600' ] && [ \"\$(stat -c '%a' /etc/switchml/tls/ca.pem)\" = 644 ] && openssl x509 -in /etc/switchml/tls/ca.pem -noout -ext subjectAltName | grep -q 'IP Address:127.0.0.1'"

# ---------------------------------------------------------------------------------------------------------
step "systemd-analyze verify"
# A template cannot be verified as such: verify an instance of it, linked next to the template's name.
mkdir "$WORK/units"
ln -s "$WORKER_UNIT" "$WORK/units/switchml-worker@ci.service"
for unit in "$APPLIANCE_UNIT" "$WORK/units/switchml-worker@ci.service" "$HOST_UNIT" "$SHM_UNIT"; do
  if ! systemd-analyze verify "$unit" >"$WORK/verify.log" 2>&1; then
    cat "$WORK/verify.log" >&2
    fail "systemd-analyze verify $(basename "$unit")"
  fi
  if grep -q . "$WORK/verify.log"; then
    cat "$WORK/verify.log" >&2
    fail "systemd-analyze verify $(basename "$unit") printed warnings"
  fi
  ok "systemd-analyze verify $(basename "$unit"): clean"
done
for unit in "$APPLIANCE_UNIT" "$WORK/units/switchml-worker@ci.service" "$HOST_UNIT"; do
  if systemd-analyze security --offline=true "$unit" >"$WORK/security.log" 2>&1 ||
    grep -q "Overall exposure level" "$WORK/security.log"; then
    exposure=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) \(.*\)$/\1 \2/p' "$WORK/security.log")
    [ -n "$exposure" ] || { cat "$WORK/security.log" >&2; fail "systemd-analyze security $(basename "$unit")"; }
    awk -v e="${exposure%% *}" -v max="$MAX_EXPOSURE" 'BEGIN { exit !(e <= max) }' ||
      { cat "$WORK/security.log" >&2; fail "exposure of $(basename "$unit") $exposure is above $MAX_EXPOSURE"; }
    ok "systemd-analyze security $(basename "$unit"): exposure $exposure (ceiling $MAX_EXPOSURE)"
  else
    cat "$WORK/security.log" >&2
    fail "systemd-analyze security --offline=true $(basename "$unit")"
  fi
done

# The shared-memory mount as its unit would make it (no systemd here to start it): its Options= on a tmpfs, and a file
# written there mapped by huge pages
SHM_OPTIONS=$(sed -n 's/^Options=//p' "$SHM_UNIT")
[ "$(sed -n 's/^Where=//p' "$SHM_UNIT")" = /run/switchml/shm ] || fail "$SHM_UNIT: Where= is not /run/switchml/shm"
mkdir "$WORK/shm"
mount -t "$(sed -n 's/^Type=//p' "$SHM_UNIT")" -o "$SHM_OPTIONS" switchml-shm "$WORK/shm" ||
  fail "$(basename "$SHM_UNIT"): mount -o $SHM_OPTIONS failed"
pmd=$(python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
os.posix_fallocate(fd, 0, 4 << 20)
m = mmap.mmap(fd, 4 << 20)
m[:] = b"\1" * (4 << 20)
print(sum(int(l.split()[1]) for l in open("/proc/self/smaps") if l.startswith("ShmemPmdMapped:")))' "$WORK/shm/probe")
umount "$WORK/shm"
[ "$pmd" -ge 4096 ] || fail "$(basename "$SHM_UNIT"): 4 MiB written on its tmpfs are not on huge pages (ShmemPmdMapped ${pmd} kB)"
ok "$(basename "$SHM_UNIT"): mounts with $SHM_OPTIONS; 4 MiB written there are mapped by huge pages (${pmd} kB)"

# ---------------------------------------------------------------------------------------------------------
step "run the installed appliance as switchml-appliance.service would"
BIND=$(config_value switchml.appliance.bind)
HTTP_PORT=$(config_value switchml.appliance.http.port)
DATA_PORT=$(config_value switchml.appliance.data.port)
CONTROL_PORT=$(config_value switchml.appliance.control.port)
SHARD_CPUS=$(config_value switchml.appliance.shard.cpus)
AFFINITY=$(unit_value CPUAffinity)
WATCHDOG_SEC=$(unit_value WatchdogSec)
[ -n "$BIND" ] && [ -n "$HTTP_PORT" ] || fail "bind address and HTTP port in $CONFIG"
[ "$(unit_value User)" = switchml ] || fail "the unit runs as User=switchml"
[ "$(unit_value ExecStart)" = "/usr/bin/switchml appliance --config $CONFIG" ] || fail "the unit's ExecStart is the one run here"
for port in "t:$CONTROL_PORT" "t:$HTTP_PORT" "u:$DATA_PORT"; do
  if port_in_use "${port%%:*}" "${port#*:}"; then
    fail "port ${port#*:} is free (something already listens there: stop it, or another appliance, first)"
  fi
done
ok "ports $CONTROL_PORT/tcp $HTTP_PORT/tcp $DATA_PORT/udp on $BIND are free"

install -d -o switchml -g switchml -m 0700 "$WORK/run"
# Chronicle (the journal) creates a working directory when it loads: /tmp/target unless told otherwise
TMP_TARGET_BEFORE=$([ -e /tmp/target ] && echo yes || echo no)
NOTIFY_SOCKET_PATH=$WORK/run/notify.sock
setpriv --reuid=switchml --regid=switchml --init-groups \
  "$JAVA" --enable-native-access=ALL-UNNAMED -XX:+PerfDisableSharedMem -cp "/usr/lib/switchml/*" \
  io.switchml.service.NotifySocketListener "$NOTIFY_SOCKET_PATH" --exit-on=STOPPING=1 \
  --timeout-ms=$(((READY_TIMEOUT_S + STOP_TIMEOUT_S + 30) * 1000)) >"$WORK/notify.log" 2>"$WORK/listener.err" &
LISTENER_PID=$!
wait_for_line "$WORK/listener.err" "^listening on " 20 "$LISTENER_PID" || fail "stand-in notify listener bound $NOTIFY_SOCKET_PATH"
ok "stand-in NOTIFY_SOCKET listener on $NOTIFY_SOCKET_PATH (pid $LISTENER_PID)"

# Like the unit: User=switchml, no capabilities (CapabilityBoundingSet= empty), NoNewPrivileges, the unit's
# CPUAffinity, WorkingDirectory=/var/lib/switchml, and a clean environment without JAVA_HOME. WATCHDOG_USEC
# is 2 s instead of the unit's WatchdogSec so that pings show up quickly.
cd "$STATE_DIR"
setpriv --reuid=switchml --regid=switchml --init-groups --no-new-privs --inh-caps=-all --bounding-set=-all \
  taskset -c "${AFFINITY:-0-$(($(nproc) - 1))}" \
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$STATE_DIR" LANG=C.UTF-8 \
  NOTIFY_SOCKET="$NOTIFY_SOCKET_PATH" WATCHDOG_USEC=2000000 \
  /usr/bin/switchml appliance --config "$CONFIG" >"$WORK/appliance.log" 2>&1 &
APP_PID=$!
APP_STARTED=$SECONDS
cd "$ROOT"
ok "started /usr/bin/switchml appliance --config $CONFIG (pid $APP_PID, CPUAffinity=${AFFINITY:-unset}, unit WatchdogSec=$WATCHDOG_SEC)"

wait_for_line "$WORK/notify.log" '(^|\\n)READY=1(\\n|$)' "$READY_TIMEOUT_S" "$APP_PID" ||
  fail "READY=1 within ${READY_TIMEOUT_S}s"
ok "READY=1 $((SECONDS - APP_STARTED))s after the start: $(grep -E '(^|\\n)READY=1' "$WORK/notify.log" | head -n 1)"
check "the JVM is the main process (the launcher exec'd java: /proc/$APP_PID/exe is java)" \
  bash -c "readlink /proc/$APP_PID/exe | grep -q '/bin/java\$'"
check "it runs as switchml with no capabilities" \
  bash -c "[ \"\$(stat -c %U /proc/$APP_PID)\" = switchml ] && grep -q '^CapEff:[[:space:]]*0*\$' /proc/$APP_PID/status && grep -q '^CapBnd:[[:space:]]*0*\$' /proc/$APP_PID/status"
wait_for_line "$WORK/notify.log" '(^|\\n)WATCHDOG=1(\\n|$)' 10 "$APP_PID" || fail "WATCHDOG=1 within 10s (WATCHDOG_USEC=2 s)"
ok "WATCHDOG=1 pings arrive"
check "no AOT cache errors in the appliance's output" bash -c "! grep -q '\[error *\]\[aot\]' '$WORK/appliance.log'"
check "Chronicle's working directory is $STATE_DIR/journal/.chronicle, not a new /tmp/target" \
  bash -c "[ -d '$STATE_DIR/journal/.chronicle' ] && { [ $TMP_TARGET_BEFORE = yes ] || [ ! -e /tmp/target ]; }"

http_code=$(curl -sS -o "$WORK/health.body" -w '%{http_code}' --max-time 5 "http://$BIND:$HTTP_PORT/health") ||
  fail "GET http://$BIND:$HTTP_PORT/health"
[ "$http_code" = 200 ] && grep -Eq '"status": *"up"' "$WORK/health.body" ||
  fail "GET /health: expected 200 and \"status\": \"up\", got $http_code: $(head -c 300 "$WORK/health.body")"
ok "GET http://$BIND:$HTTP_PORT/health -> $http_code $(tr -d '\n' <"$WORK/health.body" | head -c 200)"
http_code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "http://$BIND:$HTTP_PORT/metrics") || http_code=none
[ "$http_code" = 200 ] || fail "GET /metrics: expected 200, got $http_code"
ok "GET http://$BIND:$HTTP_PORT/metrics -> 200"
check "counters file $STATE_DIR/counters.dat owned by switchml" \
  bash -c "[ \"\$(stat -c %U $STATE_DIR/counters.dat)\" = switchml ]"

if [ -n "$SHARD_CPUS" ] && [ "$(nproc)" -gt "${SHARD_CPUS%%,*}" ]; then
  grep -q "shard 0 pinned to cpu ${SHARD_CPUS%%,*}" "$WORK/appliance.log" ||
    fail "shard 0 pinned to cpu ${SHARD_CPUS%%,*} (switchml.appliance.shard.cpus=$SHARD_CPUS)"
  # Linux keeps 15 characters of a thread name: "switchml-shard-0" reads "switchml-shard-".
  shard_tid=$( (grep -l '^switchml-shard' /proc/"$APP_PID"/task/*/comm 2>/dev/null || true) | head -n 1 | cut -d/ -f5)
  [ -n "$shard_tid" ] || fail "shard thread (switchml-shard-0) found in /proc/$APP_PID/task"
  ok "shard 0 (tid $shard_tid) $(taskset -cp "$shard_tid" | sed 's/.*: /on CPUs /'), main thread $(taskset -cp "$APP_PID" | sed 's/.*: /on CPUs /')"
else
  note "shard pinning not checked (shard.cpus='$SHARD_CPUS', $(nproc) CPUs): $(grep -m1 'shard 0' "$WORK/appliance.log" || true)"
fi

# The operator's view with no options at all: ops finds the packaged state directory, the control port it
# announced, the operator credential and the TLS certificate the package made.
ops_out=$(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /usr/bin/switchml ops status 2>&1) ||
  fail "switchml ops status with no options finds the packaged appliance: $ops_out"
grep -q 'control channel TLS, authorization on' <<<"$ops_out" || fail "ops status shows TLS and authorization on: $ops_out"
ok "switchml ops status, no options: $(grep -m1 -E '^ *security' <<<"$ops_out" | tr -s ' ')"

kill -TERM "$APP_PID"
app_rc=0
deadline=$((SECONDS + STOP_TIMEOUT_S))
while kill -0 "$APP_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
  sleep 0.1
done
kill -0 "$APP_PID" 2>/dev/null && fail "the appliance exits within ${STOP_TIMEOUT_S}s of SIGTERM (TimeoutStopSec)"
wait "$APP_PID" || app_rc=$?
APP_PID=
[ "$app_rc" -eq 0 ] || [ "$app_rc" -eq 143 ] || fail "clean exit after SIGTERM: 0 or 143 (SuccessExitStatus=143), got $app_rc"
ok "SIGTERM: exited with $app_rc (a success for the unit: SuccessExitStatus=143)"
listener_rc=0
wait_for_line "$WORK/notify.log" '(^|\\n)STOPPING=1(\\n|$)' 10 || fail "STOPPING=1 after SIGTERM"
wait "$LISTENER_PID" || listener_rc=$?
LISTENER_PID=
[ "$listener_rc" -eq 0 ] || fail "stand-in listener saw STOPPING=1 and exited 0 (got $listener_rc)"
ok "STOPPING=1: $(grep -E '(^|\\n)STOPPING=1' "$WORK/notify.log" | head -n 1)"
note "notifications received: $(wc -l <"$WORK/notify.log") ($(grep -c 'WATCHDOG=1' "$WORK/notify.log") watchdog ping(s))"
grep -q "control authorization on: 2 credential(s) from /etc/switchml/credentials" "$WORK/appliance.log" ||
  fail "the packaged appliance starts with control authorization on"
ok "the packaged appliance starts with control authorization on"
grep -q "control channel TLS on (/etc/switchml/tls/appliance.p12)" "$WORK/appliance.log" ||
  fail "the packaged appliance serves its control channel over TLS"
ok "the packaged appliance serves its control channel over TLS"
note "appliance output: $(tr '\n' ' ' <"$WORK/appliance.log" | head -c 600)"
rm -rf "$WORK/run"

# ---------------------------------------------------------------------------------------------------------
step "dpkg --purge"
dpkg --purge "$PKG" >"$WORK/dpkg-purge.log" 2>&1 || { cat "$WORK/dpkg-purge.log" >&2; fail "dpkg --purge $PKG"; }
INSTALLED_BY_US=0
check "package is gone from dpkg's database" bash -c "! dpkg-query -W -f='\${Status}' $PKG 2>/dev/null | grep -q 'installed\\|config-files'"
for path in /usr/bin/switchml /usr/lib/switchml "$APPLIANCE_UNIT" "$WORKER_UNIT" /etc/switchml "$STATE_DIR" \
  /usr/share/doc/switchml /run/switchml /usr/lib/python3/dist-packages/switchml; do
  check "removed $path" test ! -e "$path"
done
check "user switchml removed" bash -c "! getent passwd switchml"
check "group switchml removed" bash -c "! getent group switchml"
leftover=$(find /etc /usr /var /run /tmp /dev/shm -xdev \( -uid "$SWITCHML_UID" -o -gid "$SWITCHML_GID" \) -print 2>/dev/null | head -n 5)
[ -z "$leftover" ] || fail "files owned by the old uid $SWITCHML_UID or gid $SWITCHML_GID: $leftover"
ok "no file owned by the old uid $SWITCHML_UID / gid $SWITCHML_GID in /etc /usr /var /run /tmp /dev/shm"

STEP="done"
echo "ci-package-check: all checks passed (${SECONDS}s)"
