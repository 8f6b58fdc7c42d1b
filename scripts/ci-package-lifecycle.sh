#!/usr/bin/env bash
# ci-package-lifecycle.sh: install, upgrade, remove and purge the Debian package in a throwaway root, and run the
# appliance from the installed unit's ExecStart line after the install and after the upgrade.
#
#   scripts/ci-package-lifecycle.sh [DEB]      (as root; CI runs it after ci-package-check.sh, see .ci/run)
#
# The throwaway root is this machine's own file system under an overlay (lower: /, upper: a temporary directory)
# in new mount, network and PID namespaces, entered with chroot: dpkg, its maintainer scripts, adduser, openssl
# and the JDK are the host's, every write lands in the temporary upper directory, and the network namespace has
# only its own loopback (no port conflicts with the host). Nothing outside the temporary directory changes.
#
# 1. dpkg -i DEB: the user, the state directory, the credentials and TLS files
# 2. the appliance started from the ExecStart= of the installed switchml-appliance.service, as its User= in its
#    WorkingDirectory= with a private /tmp (PrivateTmp=), answers GET /health with "status": "up"; SIGTERM stops it
# 3. an administrator's change to a conffile; dpkg -i of the same package with a higher version (VERSION+upgrade1,
#    repacked with dpkg-deb): the new version is installed, the conffile change, credentials, TLS key and uid are
#    kept; the appliance starts again from the unit's ExecStart
# 4. dpkg -r: the program goes, the configuration stays; dpkg --purge: no file, user or group is left
# DEB defaults to the newest dist/target/switchml_*_amd64.deb (build it with ./switchml build). About 40 s.
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
DEB=${1:-$({ ls -t "$ROOT"/dist/target/switchml_*_amd64.deb 2>/dev/null || true; } | head -n 1)}

fail() {
  echo "   FAIL  $1" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (namespaces, overlay, chroot); CI runs as root"
[ -n "$DEB" ] && [ -f "$DEB" ] || fail "no package: pass DEB or build dist/target/switchml_*_amd64.deb (./switchml build)"
for tool in unshare chroot dpkg-deb setpriv curl; do
  command -v "$tool" >/dev/null || fail "$tool is needed"
done

WORK=$(mktemp -d /var/tmp/switchml-lifecycle.XXXXXX)
cleanup() {
  local rc=$?   # the EXIT trap keeps the verdict: a failed removal is reported, not turned into a failure
  rm -rf "$WORK" || echo "ci-package-lifecycle: could not remove $WORK" >&2
  exit "$rc"
}
trap cleanup EXIT

# The upgrade: the same payload under a higher version, as a rebuilt package with a new version would be.
VERSION=$(dpkg-deb -f "$DEB" Version)
UPGRADE_VERSION=$VERSION+upgrade1
dpkg --compare-versions "$UPGRADE_VERSION" gt "$VERSION" || fail "$UPGRADE_VERSION sorts after $VERSION"
dpkg-deb -R "$DEB" "$WORK/repack"
sed -i "s/^Version: .*/Version: $UPGRADE_VERSION/" "$WORK/repack/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz -b "$WORK/repack" "$WORK/upgrade.deb" >/dev/null
rm -rf "$WORK/repack"
cp "$DEB" "$WORK/install.deb"

mkdir "$WORK/upper" "$WORK/overlay-work" "$WORK/root"
cat >"$WORK/inner.sh" <<'INNER'
#!/bin/bash
# Runs inside the throwaway root (chroot), as PID 1's child of a new PID namespace.
set -euo pipefail
VERSION=$1 UPGRADE_VERSION=$2
UNIT=/usr/lib/systemd/system/switchml-appliance.service
CONFIG=/etc/switchml/appliance.properties
APP_PID=

step() { echo "== $1"; }
ok() { echo "   ok    $1"; }
fail() {
  echo "   FAIL  $1" >&2
  [ -s /root/appliance.log ] && { echo "---- appliance output (last 30 lines)" >&2; tail -n 30 /root/appliance.log >&2; }
  exit 1
}
check() {
  local description=$1
  shift
  if "$@" >/dev/null 2>&1; then ok "$description"; else fail "$description"; fi
}
stop_appliance() {
  if [ -n "$APP_PID" ] && kill -0 "$APP_PID" 2>/dev/null; then
    kill -TERM "$APP_PID"
    local rc=0
    wait "$APP_PID" || rc=$?
    APP_PID=
    [ "$rc" -eq 0 ] || [ "$rc" -eq 143 ] || fail "the appliance exits 0 or 143 after SIGTERM, got $rc"
    ok "SIGTERM: the appliance exited with $rc"
  fi
}
trap 'kill -KILL $APP_PID 2>/dev/null || true' EXIT
unit_value() { sed -n "s/^$1=//p" "$UNIT" | tail -n 1; }
config_value() {
  sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\\(.*[^[:space:]]\\)[[:space:]]*\$/\\1/p" "$CONFIG" | tail -n 1
}

# Starts what the installed unit's ExecStart= names, as its User=/Group= in its WorkingDirectory=, with a clean
# environment (no NOTIFY_SOCKET: the service manager's part is checked by ci-package-check.sh), and waits for
# GET /health to answer "status": "up".
run_unit_exec_start() {
  local exec_start user group dir bind port deadline code
  exec_start=$(unit_value ExecStart)
  user=$(unit_value User) group=$(unit_value Group) dir=$(unit_value WorkingDirectory)
  [ -n "$exec_start" ] && [ -n "$user" ] && [ -n "$dir" ] || fail "ExecStart=, User= and WorkingDirectory= in $UNIT"
  case "$exec_start" in
    *'%'* | *'$'* | [-@:+!]*) fail "ExecStart=$exec_start has specifiers, variables or prefixes this check does not expand" ;;
  esac
  bind=$(config_value switchml.appliance.bind) port=$(config_value switchml.appliance.http.port)
  [ -n "$bind" ] && [ -n "$port" ] || fail "bind address and HTTP port in $CONFIG"
  # PrivateTmp=yes: the service gets its own /tmp and /var/tmp (Chronicle makes a directory in /tmp), as here.
  [ "$(unit_value PrivateTmp)" = yes ] || fail "the unit has PrivateTmp=yes (this check runs the service with a private /tmp)"
  : >/root/appliance.log
  # ExecStart is split on whitespace as systemd splits an unquoted command line.
  unshare --mount --propagation private bash -c 'mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /var/tmp &&
    cd "$1" && shift && exec setpriv --reuid="$1" --regid="$2" --init-groups --no-new-privs \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$PWD" LANG=C.UTF-8 "${@:3}"' \
    _ "$dir" "$user" "${group:-$user}" $exec_start >/root/appliance.log 2>&1 &
  APP_PID=$!
  deadline=$((SECONDS + 90))
  code=
  while [ "$SECONDS" -lt "$deadline" ]; do
    kill -0 "$APP_PID" 2>/dev/null || fail "ExecStart=$exec_start exited early"
    code=$(curl -s -o /root/health.json -w '%{http_code}' --max-time 2 "http://$bind:$port/health" || true)
    [ "$code" = 200 ] && break
    sleep 0.5
  done
  [ "$code" = 200 ] && grep -Eq '"status": *"up"' /root/health.json ||
    fail "GET http://$bind:$port/health after ExecStart=$exec_start: $code $(head -c 200 /root/health.json 2>/dev/null)"
  [ "$(stat -c %U "/proc/$APP_PID")" = "$user" ] || fail "the appliance runs as $user"
  # the packet MACs' native library (inside the protocol jar, loaded from the private /tmp) works as the unit's user:
  # the "ready" line names it, logged after the data path rehearsal (which may still run when /health answers)
  while [ "$SECONDS" -lt "$deadline" ] && ! grep -q 'appliance ready' /root/appliance.log; do
    kill -0 "$APP_PID" 2>/dev/null || fail "ExecStart=$exec_start exited before its ready line"
    sleep 0.5
  done
  grep -Eq 'packet MACs SipHash-2-4, (up to (4|16) packets at once \(native library|one packet at a time \(native library: no AVX2)' \
    /root/appliance.log || fail "packet MACs' native library not in use: $(grep -o 'packet MACs[^;]*' /root/appliance.log)"
  ok "ExecStart=$exec_start (as $user in $dir): GET /health -> 200 \"up\" after $((SECONDS - deadline + 90)) s; $(grep -o 'packet MACs[^;]*' /root/appliance.log | head -1)"
}

export DEBIAN_FRONTEND=noninteractive
ip link set lo up

step "dpkg -i switchml $VERSION (throwaway root)"
dpkg -i /root/install.deb >/root/dpkg.log 2>&1 || { cat /root/dpkg.log >&2; fail "dpkg -i"; }
[ "$(dpkg-query -W -f='${Status} ${Version}' switchml)" = "install ok installed $VERSION" ] ||
  fail "installed: $(dpkg-query -W -f='${Status} ${Version}' switchml)"
ok "install ok installed $VERSION"
check "user and group switchml, state directory /var/lib/switchml switchml 750" \
  bash -c "getent passwd switchml && getent group switchml && [ \"\$(stat -c '%U %a' /var/lib/switchml)\" = 'switchml 750' ]"
check "credentials and TLS keystore made by postinst" test -s /etc/switchml/credentials -a -s /etc/switchml/tls/appliance.p12
run_unit_exec_start
stop_appliance

step "upgrade to $UPGRADE_VERSION"
echo "# an administrator's change, kept over upgrades" >>"$CONFIG"
before=$(sha256sum /etc/switchml/credentials /etc/switchml/tls/appliance.p12 "$CONFIG")
uid=$(id -u switchml)
dpkg -i /root/upgrade.deb </dev/null >/root/dpkg.log 2>&1 || { cat /root/dpkg.log >&2; fail "dpkg -i (upgrade)"; }
[ "$(dpkg-query -W -f='${Status} ${Version}' switchml)" = "install ok installed $UPGRADE_VERSION" ] ||
  fail "upgraded: $(dpkg-query -W -f='${Status} ${Version}' switchml)"
ok "install ok installed $UPGRADE_VERSION"
[ "$(sha256sum /etc/switchml/credentials /etc/switchml/tls/appliance.p12 "$CONFIG")" = "$before" ] ||
  fail "credentials, TLS keystore and the changed conffile are kept"
ok "the conffile change, the credentials and the TLS keystore are kept"
[ "$(id -u switchml)" = "$uid" ] || fail "the switchml user keeps its uid $uid"
ok "user switchml keeps uid $uid"
run_unit_exec_start
stop_appliance

step "dpkg -r, then dpkg --purge"
dpkg -r switchml >/root/dpkg.log 2>&1 || { cat /root/dpkg.log >&2; fail "dpkg -r"; }
check "after dpkg -r: the program is gone, the configuration stays (config-files)" \
  bash -c "[ ! -e /usr/bin/switchml ] && [ ! -e /usr/lib/switchml ] && [ -f $CONFIG ] &&
    dpkg-query -W -f='\${Status}' switchml | grep -q config-files"
dpkg --purge switchml >/root/dpkg.log 2>&1 || { cat /root/dpkg.log >&2; fail "dpkg --purge"; }
check "after dpkg --purge: not in dpkg's database" bash -c "! dpkg-query -W -f='\${Status}' switchml 2>/dev/null | grep -q 'installed\|config-files'"
for path in /usr/bin/switchml /usr/lib/switchml /usr/lib/systemd/system/switchml-appliance.service \
  /usr/share/doc/switchml /usr/share/man/man1/switchml.1.gz /usr/share/bash-completion/completions/switchml \
  /etc/switchml /var/lib/switchml; do
  [ ! -e "$path" ] || fail "purge removes $path"
done
ok "purge removed the program, units, docs, man pages, completion, /etc/switchml and /var/lib/switchml"
check "user and group switchml removed" bash -c "! getent passwd switchml && ! getent group switchml"
leftover=$(find /etc /usr /var /tmp /dev/shm -xdev -uid "$uid" -print 2>/dev/null | head -n 5)
[ -z "$leftover" ] || fail "files owned by the old uid $uid: $leftover"
ok "no file owned by the old uid $uid"
INNER

echo "ci-package-lifecycle: $(basename "$DEB") ($VERSION), upgrade to $UPGRADE_VERSION, in a throwaway root under $WORK"
rc=0
unshare --mount --net --pid --fork --propagation private bash -euo pipefail -c '
  W=$1 VERSION=$2 UPGRADE_VERSION=$3
  M=$W/root
  mount -t overlay overlay -o "lowerdir=/,upperdir=$W/upper,workdir=$W/overlay-work" "$M"
  mount -t proc proc "$M/proc"
  mount --rbind /dev "$M/dev"
  mount -t tmpfs tmpfs "$M/dev/shm"
  mount --rbind /sys "$M/sys"
  mount -t tmpfs tmpfs "$M/run"
  mount -t tmpfs tmpfs "$M/tmp"
  # the overlay shows this directory (it is under /) but not its own mounts: the upper layer must not be visible
  mount -t tmpfs tmpfs "$M$W"
  cp "$W/inner.sh" "$W/install.deb" "$W/upgrade.deb" "$M/root/"
  exec chroot "$M" /bin/bash /root/inner.sh "$VERSION" "$UPGRADE_VERSION"
' _ "$WORK" "$VERSION" "$UPGRADE_VERSION" || rc=$?
[ "$rc" -eq 0 ] || fail "in the throwaway root (exit $rc)"
echo "ci-package-lifecycle: all checks passed (${SECONDS}s)"
