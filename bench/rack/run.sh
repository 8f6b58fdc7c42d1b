#!/usr/bin/env bash
# bench/rack/run.sh: SwitchML vs PyTorch Gloo vs OpenMPI all-reduce on an emulated rack (network namespaces, a
# bridge as the ToR, tbf-limited worker links, nftables loss) and on plain loopback. Writes
# docs/bench/results-<date>.{json,md} and docs/bench/chart-<date>.svg. See bench/rack/README.md.
#
#   sudo bench/rack/run.sh            the full matrix (36 minutes on 2 cores)
#   sudo bench/rack/run.sh --quick    a smoke run (a few minutes)
set -euo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=rack.sh
source "$HERE/rack.sh"

PY=/usr/bin/python3

WORKERS=4
RATES=1gbit,none
APPLIANCE_RATE=none
LOSSES=0,0.0001,0.001,0.01
SIZES=100MB,1MB
SYSTEMS=switchml,gloo,mpi
HOST_WARMUP_MS=8000
HOST_SHM=huge
JUMBO=1
MTU=
LOOPBACK=1
RACK=1
ITERATIONS=
WARMUPS=
LANES=
SLOTS=
MAC=off
RTO_MS=
FAST_RETRANSMIT=on
MULTICAST=on
SHARDS=1
SHARD_CPUS=default
OFFLOAD=auto
MPI_LOOPBACK_BTL=tcp
OUT_DIR=$ROOT/docs/bench
TAG=
INSTALL=1
BUILD=1
CELL_TIMEOUT=600
PRIOR_JOB=0
REPEAT=1
QUICK=0

usage() {
  cat <<'EOF'
Usage: bench/rack/run.sh [options]          (as root: it creates network namespaces)

One command for the whole comparison: installs what it needs from Debian, builds SwitchML, then for every link
rate builds a rack of namespaces (appliance + N workers on a bridge), and for every loss rate, tensor size and
system runs a checked all-reduce benchmark; then the same on plain loopback. Every namespace it creates is
deleted at the end, also on Ctrl-C or SIGTERM.

Matrix
  --workers N            workers (default 4)
  --rates LIST           worker link rates, tc syntax, "none" = unlimited (default 1gbit,none)
  --appliance-rate R     the appliance's own link: none (default: unlimited, like an appliance on a faster
                         ToR port), same (= the worker rate) or a tc rate such as 4gbit
  --loss LIST            random loss per bridge port and direction, fractions (default 0,0.0001,0.001,0.01)
  --sizes LIST           float32 tensor sizes, MB = 10^6 bytes (default 100MB,1MB)
  --systems LIST         subset of switchml,gloo,mpi,switchml-host,switchml-node (default the first three).
                         switchml-host: the ranks are Python processes (as a training job's are) served by
                         long-lived host agents ('switchml worker host'), started and warmed up before the cells
                         as systemd starts one at boot: one for all ranks on loopback, one per worker namespace
                         in the rack; one worker of the job per rank. switchml-node (loopback only): the same
                         ranks as the ranks of one node (torchrun's LOCAL_WORLD_SIZE), summed in the agent and
                         sent to the appliance as one worker
  --host-warm-up-ms N    the host agent's warm-up before it takes jobs (default 8000)
  --host-shm huge|dev    the host agents' shared memory (--shm-dir): huge (default), a tmpfs mounted for the run
                         with huge=within_size, as the package's run-switchml-shm.mount gives the packaged agent
                         (needs root); dev: /dev/shm, a tmpfs of 4 KiB pages unless the host's shmem THP says more
  --jumbo / --no-jumbo   MTU 9000 and k=2233 (default) / MTU 1500 and k=366
  --mtu N                explicit rack MTU (k follows: (MTU-28-40)/4)
  --no-loopback          skip the loopback runs      --loopback-only   skip the rack
Measurement
  --iterations N         timed all-reduces per cell (default: 10 for >=50MB, 20 for >=10MB, else 50)
  --warmups N            untimed ones first (default: ~1.5 GB worth, at least 3: 15 x 100MB, 1500 x 1MB)
  -k N / -s N            SwitchML elements per packet / pool size (default: k from the MTU, 8176 on loopback;
                         s: the workers' default 32, or the link's bandwidth x 1 ms in packets where more)
  --mac on|off           SwitchML packet MAC (default off: a trusted rack, as with a switch)
  --rto-ms N             SwitchML workers' initial retransmission timeout (default: the worker's, 20 ms; a value
                         below the worker's 10 ms minimum lowers the minimum too)
  --shards N             appliance data-plane shards (threads, one UDP port each; default 1)
  --shard-cpus LIST|none the appliance's shard threads' CPUs (--shard-cpus of 'switchml appliance'); default: CPU 1
                         for one shard on a host of 2 or more CPUs, as the packaged configuration pins it; none:
                         unpinned (unpinned on loopback, about one cell in four ran every call at 1.5x: the shard
                         thread moved between the cores the ranks share and copied at half speed; session 31)
  --multicast on|off     the appliance multicasts each result once to the job's group, as the paper's switch
                         does (default on; the rack routes 224.0.0.0/4 to its links, and on loopback lo gets
                         the multicast flag and that route for the run, both undone at the end); off: one
                         unicast copy per worker
  --fast-retransmit on|off  SwitchML workers resend a slot once later results show it missing, and probe a
                         silent tail (default on); off: the retransmission timer alone, as in the paper
  --offload auto|on|off  TSO/GSO/GRO on the veths; auto (default): on at loss 0, off with loss so that loss
                         hits MTU-sized wire frames, not 64 KB TCP segments
  --mpi-loopback-btl B   tcp (default) or vader (shared memory) for OpenMPI on loopback
  --cell-timeout SEC     give up on one system's run after this long (default 600)
  --prior-job            before each SwitchML cell, its appliance runs one throwaway job of the cell's shape (a
                         `worker bench` JVM per worker: the cell's tensor, 1 warm-up and 2 calls), so that the cell's
                         job meets an appliance that has served a job before, as a long-running one has; default off:
                         every cell's appliance is fresh, and its first job pays the appliance's JIT
  --repeat N             run every cell N times, the systems interleaved; the report takes each cell's median
                         run by TAT p50 and lists every run's p50 (default 1; use 3 on a noisy machine)
Other
  --quick                smoke run: --rates 1gbit --loss 0,0.01 --iterations 3 --warmups 1 (+ loopback)
  --out DIR              where results go (default docs/bench)
  --tag NAME             appended to the result file names (--quick uses "quick")
  --no-install           do not apt-get missing packages     --no-build   use the existing build

Environment: SWITCHML_BENCH_JAVA_OPTS adds JVM options to SwitchML's appliance and workers, for experiments
(e.g. -Dswitchml.worker.idle.spins=0); the report records it.
EOF
}

ORIG_ARGS="$*"
die() { echo "run.sh: $*" >&2; exit 2; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --rates|--rate) RATES=$2; shift 2 ;;
    --appliance-rate) APPLIANCE_RATE=$2; shift 2 ;;
    --loss) LOSSES=$2; shift 2 ;;
    --sizes|--size) SIZES=$2; shift 2 ;;
    --systems) SYSTEMS=$2; shift 2 ;;
    --host-warm-up-ms) HOST_WARMUP_MS=$2; shift 2 ;;
    --host-shm) HOST_SHM=$2; shift 2 ;;
    --jumbo) JUMBO=1; shift ;;
    --no-jumbo) JUMBO=0; shift ;;
    --mtu) MTU=$2; shift 2 ;;
    --no-loopback) LOOPBACK=0; shift ;;
    --loopback-only) RACK=0; shift ;;
    --iterations) ITERATIONS=$2; shift 2 ;;
    --warmups) WARMUPS=$2; shift 2 ;;
    -k|--lanes) LANES=$2; shift 2 ;;
    -s|--slots) SLOTS=$2; shift 2 ;;
    --mac) MAC=$2; shift 2 ;;
    --rto-ms) RTO_MS=$2; shift 2 ;;
    --fast-retransmit) FAST_RETRANSMIT=$2; shift 2 ;;
    --multicast) MULTICAST=$2; shift 2 ;;
    --shards) SHARDS=$2; shift 2 ;;
    --shard-cpus) SHARD_CPUS=$2; shift 2 ;;
    --offload) OFFLOAD=$2; shift 2 ;;
    --mpi-loopback-btl) MPI_LOOPBACK_BTL=$2; shift 2 ;;
    --cell-timeout) CELL_TIMEOUT=$2; shift 2 ;;
    --prior-job) PRIOR_JOB=1; shift ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done

if [ "$QUICK" = 1 ]; then
  RATES=1gbit
  LOSSES=0,0.01
  ITERATIONS=${ITERATIONS:-3}
  WARMUPS=${WARMUPS:-1}
  TAG=${TAG:-quick}
fi
[ -n "$MTU" ] || { [ "$JUMBO" = 1 ] && MTU=9000 || MTU=1500; }
RACK_LANES=${LANES:-$(((MTU - 28 - 40) / 4))}
# s is the workers' own default pool size, 32, or the bandwidth-delay product of a worker link with an assumed 1 ms
# round trip where that is more (83 at MTU 1500 and 1 Gbit/s): what a job gets unless it asks otherwise. Until session
# 56 the rack used the BDP alone, at least 16 (16 at 1 Gbit/s with jumbo frames), from a time when s = 64 doubled the
# 1 Gbit/s TAT through spurious retransmissions. With today's loss recovery, 4 interleaved rounds at 1 Gbit/s, 100 MB
# (docs/bench/pool-size-2026-11-29-s56.md): loss-free 837-849 ms with s = 32 against 840-861 with 16, and at 1 % loss
# 1.07x the loss-free TAT in every round against 1.12-1.13x: a lost packet idles its slot until the probe brings it
# back, and 16 slots are only the BDP, so the link idles with it.
rack_slots_for() {
  local bits
  bits=$(rate_bits "$1")
  if [ -n "$SLOTS" ]; then echo "$SLOTS"
  elif [ "$bits" -eq 0 ]; then echo 32
  else awk -v b="$bits" -v m="$MTU" 'BEGIN { s = b * 0.001 / (8 * (m + 14)); s = (s == int(s)) ? s : int(s) + 1; print (s < 32) ? 32 : s }'
  fi
}
LOOP_LANES=${LANES:-8176}
LOOP_SLOTS=${SLOTS:-32}
case "$MAC" in on|off) ;; *) die "--mac must be on or off" ;; esac
case "$FAST_RETRANSMIT" in on|off) ;; *) die "--fast-retransmit must be on or off" ;; esac
case "$MULTICAST" in on|off) ;; *) die "--multicast must be on or off" ;; esac
[[ "$SHARDS" =~ ^[1-9][0-9]*$ ]] || die "--shards must be a positive integer"
if [ "$SHARD_CPUS" = default ]; then
  if [ "$SHARDS" = 1 ] && [ "$(nproc)" -ge 2 ]; then SHARD_CPUS=1; else SHARD_CPUS=none; fi
fi
[ "$SHARD_CPUS" = none ] || [[ "$SHARD_CPUS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--shard-cpus must be a list of CPUs (1 or 2,3) or none"
case "$OFFLOAD" in auto|on|off) ;; *) die "--offload must be auto, on or off" ;; esac
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "--repeat must be a positive integer"
[[ "$WORKERS" =~ ^[0-9]+$ ]] && [ "$WORKERS" -ge 2 ] && [ "$WORKERS" -le 200 ] || die "--workers must be 2..200"
for s in ${SYSTEMS//,/ }; do case "$s" in switchml|gloo|mpi|switchml-host|switchml-node) ;; *) die "unknown system $s" ;; esac; done
[[ "$HOST_WARMUP_MS" =~ ^[0-9]+$ ]] || die "--host-warm-up-ms must be a number of milliseconds"
case "$HOST_SHM" in huge|dev) ;; *) die "--host-shm must be huge or dev: $HOST_SHM" ;; esac
has_system() { [[ ",$SYSTEMS," == *",$1,"* ]]; }

[ "$(id -u)" = 0 ] || die "must run as root (it creates network namespaces)"

# ---------------------------------------------------------------------------------------------------------------
# Dependencies from Debian, and a frozen copy of the SwitchML build

install_deps() {
  local missing=()
  command -v ip >/dev/null || missing+=(iproute2)
  command -v tc >/dev/null || missing+=(iproute2)
  command -v nft >/dev/null || missing+=(nftables)
  command -v ethtool >/dev/null || missing+=(ethtool)
  command -v ping >/dev/null || missing+=(iputils-ping)
  command -v timeout >/dev/null || missing+=(coreutils)
  [ -x "$PY" ] || missing+=(python3)
  command -v cc >/dev/null || command -v clang >/dev/null || missing+=(clang)
  if has_system gloo; then "$PY" -c 'import torch.distributed' 2>/dev/null || missing+=(python3-torch); fi
  if has_system mpi; then
    command -v mpirun >/dev/null || missing+=(openmpi-bin)
    "$PY" -c 'import mpi4py, numpy' 2>/dev/null || missing+=(python3-mpi4py python3-numpy)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$INSTALL" = 1 ] || die "missing packages: ${missing[*]} (run without --no-install, or apt-get install them)"
  log "installing from Debian: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
}

# The launcher rebuilds whenever a source file is newer than the jar; other people editing the tree during a
# 30-minute run must not trigger a rebuild between cells. So run a copy of the launcher and the built jars.
snapshot_build() {
  if [ "$BUILD" = 1 ]; then
    log "building SwitchML (./switchml build)"
    if ! "$ROOT/switchml" build; then
      [ -f "$ROOT/dist/target/switchml.jar" ] || die "build failed and there is no earlier build"
      log "WARNING: build failed; using the existing dist/target build"
    fi
  fi
  [ -f "$ROOT/dist/target/switchml.jar" ] || die "no build at dist/target (run ./switchml build)"
  mkdir -p "$WORK/snap/dist/target" "$WORK/snap/packaging/bin"
  cp "$ROOT/switchml" "$WORK/snap/switchml"
  # the launcher runs packaging/bin/switchml over the staged class path and AOT cache in dist/target/package-lib;
  # -a keeps the jars' times, which the cache checks
  cp -a "$ROOT/packaging/bin/switchml" "$WORK/snap/packaging/bin/"
  cp -a "$ROOT/dist/target/switchml.jar" "$ROOT/dist/target/lib" "$ROOT/dist/target/package-lib" "$WORK/snap/dist/target/"
  SWITCHML="$WORK/snap/switchml"
  "$SWITCHML" worker bench --help >/dev/null 2>&1 || die "this build has no 'switchml worker bench'"
  BUILD_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  # the newest of the launcher's jar and the project's module jars it loads (dependencies do not count)
  BUILD_TIME=$(date -u -r "$(ls -t "$ROOT/dist/target/switchml.jar" "$ROOT"/dist/target/lib/*-SNAPSHOT.jar 2>/dev/null | head -1)" \
    +%Y-%m-%dT%H:%M:%SZ)
  BUILD_DIRTY=$([ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo true || echo false)
}

# corelat (corelat.c): the cache-line round trip between CPUs 0 and 1, 4 times a second during every cell. A
# virtual machine's two vCPUs may share a cache or not, and move between the two for seconds at a time; every byte
# of a loopback all-reduce crosses between them, so the bench records where they were (corelat.txt per cell).
CORELAT=
CORELAT_PID=
build_corelat() {
  local cc
  [ "$(nproc)" -ge 2 ] || { log "one CPU: no cross-CPU round trips recorded"; return 0; }
  cc=$(command -v cc || command -v clang) || die "no C compiler for corelat.c (cc or clang)"
  "$cc" -O2 -pthread -o "$WORK/corelat" "$HERE/corelat.c" || die "corelat.c did not compile with $cc"
  CORELAT=$WORK/corelat
}

# ---------------------------------------------------------------------------------------------------------------
# Clean-up: every process we started, every namespace we created

# Background jobs of this shell are the only processes signalled by pid (jobs -p: never a recycled pid).
cleanup() {
  local code=$? pid pids
  trap - EXIT INT TERM HUP
  pids=$(jobs -p)
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ "$RACK" = 1 ] && [ -n "${RACK_PREFIX:-}" ]; then
    rack_down
    [ -z "$(rack_namespaces)" ] && log "namespaces of $RACK_PREFIX deleted" || log "WARNING: left: $(rack_namespaces)"
  fi
  for pid in $pids; do wait "$pid" 2>/dev/null || true; done
  loopback_multicast_down
  host_shm_down
  # the build's copy (about 100 MB) is needed only while the JVMs run; the cells' logs and results stay
  if [ -n "${WORK:-}" ]; then rm -rf "$WORK/snap"; fi
  if [ $code -ne 0 ] && [ -n "${WORK:-}" ]; then log "work directory kept: $WORK"; fi
  exit $code
}

# Multicast results on loopback: lo needs the multicast flag and a route for 224.0.0.0/4; set what is missing
# and undo exactly that at the end.
LO_MULTICAST_SET=0
LO_ROUTE_SET=0
loopback_multicast_up() {
  if ! ip -o link show lo | grep -q MULTICAST; then ip link set lo multicast on && LO_MULTICAST_SET=1; fi
  if [ -z "$(ip route show 224.0.0.0/4)" ]; then ip route add 224.0.0.0/4 dev lo && LO_ROUTE_SET=1; fi
}
loopback_multicast_down() {
  if [ "$LO_ROUTE_SET" = 1 ]; then ip route del 224.0.0.0/4 dev lo 2>/dev/null || true; LO_ROUTE_SET=0; fi
  if [ "$LO_MULTICAST_SET" = 1 ]; then ip link set lo multicast off 2>/dev/null || true; LO_MULTICAST_SET=0; fi
}
MULTICAST_GROUP=
[ "$MULTICAST" = on ] && MULTICAST_GROUP=239.7.0.0

WORK=$(mktemp -d /tmp/swrack.XXXXXX)
RACK_PREFIX=swrack-$$
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

install_deps
snapshot_build
build_corelat
rack_down_stale

# ---------------------------------------------------------------------------------------------------------------
# Helpers

# bytes of "100MB" / "1MB" / "512KB" / "1000" (MB = 10^6 bytes)
size_bytes() {
  local s=${1^^}
  case "$s" in
    *GB) echo $(( ${s%GB} * 1000000000 )) ;;
    *MB) echo $(( ${s%MB} * 1000000 )) ;;
    *KB) echo $(( ${s%KB} * 1000 )) ;;
    *B) echo "${s%B}" ;;
    *) echo "$s" ;;
  esac
}

# bits per second of a tc rate ("1gbit", "500mbit", "none" -> 0)
rate_bits() {
  local r=${1,,}
  case "$r" in
    none) echo 0 ;;
    *gbit) awk -v v="${r%gbit}" 'BEGIN { printf "%.0f", v * 1e9 }' ;;
    *mbit) awk -v v="${r%mbit}" 'BEGIN { printf "%.0f", v * 1e6 }' ;;
    *kbit) awk -v v="${r%kbit}" 'BEGIN { printf "%.0f", v * 1e3 }' ;;
    *bit) echo "${r%bit}" ;;
    *) die "unsupported rate $1 (use gbit, mbit, kbit or bit)" ;;
  esac
}

iterations_for() {
  local bytes=$1
  if [ -n "$ITERATIONS" ]; then echo "$ITERATIONS"; elif [ "$bytes" -ge 50000000 ]; then echo 10; elif [ "$bytes" -ge 10000000 ]; then echo 20; else echo 50; fi
}
warmups_for() {
  local bytes=$1
  # Warm up until every rank has reduced about 1.5 GB (at least 3 calls): 15 x 100 MB, 1500 x 1 MB, the same for
  # every system. What sets it is SwitchML's JIT on the busiest cell, loopback on 2 shared cores, where the C2
  # compiler threads compete with the all-reduce itself: a 60-call loopback run after 3 x 100 MB of warm-up
  # (2026-11-23) took 166-234 ms for its first 8 timed calls and 141-174 ms for the other 52, and the compilation
  # log put the agents' per-packet methods (ShardAgent.start, onResult, BlockExponents.of) in C2 only 4.8-6.6 s
  # into the JVM's life. 10 x 1 MB (session 2) and then 300 MB (session 3) were not enough. Gloo and OpenMPI are
  # native code and run the same after more warm-ups; a training job runs thousands of steps, so the steady
  # state is what the timed calls measure, and the first call's TAT is in each rank's JSON (firstTatMs) and in the report.
  if [ -n "$WARMUPS" ]; then echo "$WARMUPS"; else echo $(( (1500000000 + bytes - 1) / bytes > 3 ? (1500000000 + bytes - 1) / bytes : 3 )); fi
}

# "user system idle" jiffies of the whole machine, for CPU utilisation during a cell.
cpu_jiffies() { awk '/^cpu / { printf "%.0f %.0f\n", $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat; }

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Sum of eth0 tx+rx bytes over the worker namespaces (what crossed the worker links).
wire_bytes() {
  local r total=0 n
  [ "$CUR_MODE" = rack ] || { echo 0; return; }
  for ((r = 0; r < WORKERS; r++)); do
    n=$(ip netns exec "$(rack_ns_w "$r")" cat /sys/class/net/eth0/statistics/tx_bytes /sys/class/net/eth0/statistics/rx_bytes | awk '{ s += $1 } END { printf "%.0f\n", s }')
    total=$((total + n))
  done
  echo "$total"
}

# "TcpRetransSegs UdpInDatagrams UdpRcvbufErrors UdpSndbufErrors" of the rack's namespaces, or of the host on loopback
snmp_now() {
  local r nss=()
  if [ "$CUR_MODE" = rack ]; then
    nss=("$(rack_ns_ap)")
    for ((r = 0; r < WORKERS; r++)); do nss+=("$(rack_ns_w "$r")"); done
  fi
  snmp_sums "${nss[@]}"
}

# netns exec in the rack, plain exec on loopback. Only in a background job (cmd &): it execs, so $! is the
# command's pid and a signal to it reaches the command.
in_ns() {
  local ns=$1
  shift
  if [ "$CUR_MODE" = rack ]; then exec ip netns exec "$ns" "$@"; else exec "$@"; fi
}

CELL_SEQ=0
# begin_cell SYSTEM: a fresh cell directory and its metadata; sets CELL
begin_cell() {
  local system=$1
  CELL_SEQ=$((CELL_SEQ + 1))
  CELL=$WORK/cells/$(printf '%03d' $CELL_SEQ)-$system-$CUR_MODE-$CUR_RATE-$CUR_LOSS-$CUR_SIZE-r$CUR_REPEAT
  mkdir -p "$CELL"
  {
    echo "system=$system"
    echo "repeat=$CUR_REPEAT"
    echo "mode=$CUR_MODE"
    echo "rate=$CUR_RATE"
    echo "rateBitsPerSec=$(rate_bits "$CUR_RATE")"
    echo "applianceRate=$CUR_APPLIANCE_RATE"
    echo "loss=$CUR_LOSS"
    echo "sizeBytes=$CUR_BYTES"
    echo "elements=$((CUR_BYTES / 4))"
    echo "workers=$WORKERS"
    echo "iterations=$CUR_ITER"
    echo "warmups=$CUR_WARM"
    echo "mtu=$CUR_MTU"
    echo "offload=$CUR_OFFLOAD"
    echo "startedAt=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "loadAvgBefore=$(cut -d' ' -f1 /proc/loadavg)"
  } > "$CELL/meta.txt"
  read -r CELL_BUSY0 CELL_IDLE0 < <(cpu_jiffies)
  CELL_T0=$(date +%s.%N)
  CELL_WIRE0=$(wire_bytes)
  CELL_SNMP0=$(snmp_now)
  CELL_DROPS0=0 CELL_QDROPS0=0
  if [ "$CUR_MODE" = rack ]; then CELL_DROPS0=$(rack_loss_drops) CELL_QDROPS0=$(rack_qdisc_drops "$WORKERS"); fi
  CELL_SOFTNET0=$(softnet_drops)
}

end_cell() {
  local busy1 idle1 t1 status=$1 drops1=0 qdrops1=0 a b
  read -r busy1 idle1 < <(cpu_jiffies)
  t1=$(date +%s.%N)
  if [ "$CUR_MODE" = rack ]; then drops1=$(rack_loss_drops) qdrops1=$(rack_qdisc_drops "$WORKERS"); fi
  read -r -a a <<< "$CELL_SNMP0"
  read -r -a b <<< "$(snmp_now)"
  {
    echo "exitStatus=$status"
    echo "wallSec=$(awk -v a="$CELL_T0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
    echo "cpuBusyFraction=$(awk -v b="$((busy1 - CELL_BUSY0))" -v i="$((idle1 - CELL_IDLE0))" 'BEGIN { printf "%.3f", ((b + i) > 0) ? b / (b + i) : 0 }')"
    echo "wireBytes=$(( $(wire_bytes) - CELL_WIRE0 ))"
    echo "tcpRetransSegs=$((b[0] - a[0]))"
    echo "udpInDatagrams=$((b[1] - a[1]))"
    echo "udpRcvbufErrors=$((b[2] - a[2]))"
    echo "udpSndbufErrors=$((b[3] - a[3]))"
    echo "lossDrops=$((drops1 - CELL_DROPS0))"
    echo "qdiscDrops=$((qdrops1 - CELL_QDROPS0))"
    echo "backlogDrops=$(( $(softnet_drops) - CELL_SOFTNET0 ))"
    echo "loadAvgAfter=$(cut -d' ' -f1 /proc/loadavg)"
  } >> "$CELL/meta.txt"
}

# top snapshots every 5 s while a cell runs, for CPU evidence (who uses the 2 cores), and corelat's samples
start_sampler() {
  ( while :; do top -b -n1 -w 160 | sed -n '3p;8,16p' >> "$CELL/top.txt"; echo >> "$CELL/top.txt"; sleep 5; done ) &
  SAMPLER=$!
  CORELAT_PID=
  if [ -n "$CORELAT" ]; then "$CORELAT" 0 1 250 > "$CELL/corelat.txt" 2> "$CELL/corelat.err" & CORELAT_PID=$!; fi
}
stop_sampler() {
  kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true
  if [ -n "$CORELAT_PID" ]; then kill -TERM "$CORELAT_PID" 2>/dev/null || true; wait "$CORELAT_PID" 2>/dev/null || true; fi
}

# wait for every pid; 0 when all exited 0
wait_all() {
  local rc=0 pid
  for pid in "$@"; do wait "$pid" || rc=$?; done
  return $rc
}

# ---------------------------------------------------------------------------------------------------------------
# The three systems

run_switchml() {
  local appliance_addr ctl_port data_port ap_pid ap_java ap_cpu0 r pids=() rc=0 lanes slots addr system=${1:-switchml}
  begin_cell "$system"
  if [ "$CUR_MODE" = rack ]; then
    appliance_addr=$RACK_APPLIANCE_ADDR ctl_port=7470 data_port=7471 lanes=$RACK_LANES slots=$(rack_slots_for "$CUR_RATE")
  else
    # a fixed data port below the ephemeral range (32768 and up here): the multicast port is the data port + 1000,
    # and with an ephemeral data port that could be a port some other socket already holds (a worker then failed to
    # join: "bind(0.0.0.0:35844) failed: errno 98", one cell in five of a run on 2026-11-26)
    appliance_addr=127.0.0.1 ctl_port=0 data_port=17471 lanes=$LOOP_LANES slots=$LOOP_SLOTS
  fi
  echo "lanes=$lanes" >> "$CELL/meta.txt"
  echo "slots=$slots" >> "$CELL/meta.txt"
  echo "rtoMs=${RTO_MS:-default}" >> "$CELL/meta.txt"
  echo "fastRetransmit=$FAST_RETRANSMIT" >> "$CELL/meta.txt"
  echo "multicast=$MULTICAST" >> "$CELL/meta.txt"
  echo "shards=$SHARDS" >> "$CELL/meta.txt"
  echo "shardCpus=$SHARD_CPUS" >> "$CELL/meta.txt"
  echo "javaOpts=${SWITCHML_BENCH_JAVA_OPTS:-}" >> "$CELL/meta.txt"
  mkdir -p "$CELL/appliance"
  SWITCHML_JAVA_OPTS="-Xmx1g ${SWITCHML_BENCH_JAVA_OPTS:-}" in_ns "$(rack_ns_ap)" "$PY" "$HERE/cpuwrap.py" --out "$CELL/appliance.cpu.json" -- \
    "$SWITCHML" appliance --bind "$appliance_addr" --data-port "$data_port" --control-port "$ctl_port" \
    --http-port -1 --dir "$CELL/appliance" --insecure-control --mac "$MAC" --shards "$SHARDS" $([ "$SHARD_CPUS" = none ] || echo "--shard-cpus $SHARD_CPUS") ${MULTICAST_GROUP:+--multicast "$MULTICAST_GROUP"} \
    > "$CELL/appliance.log" 2>&1 &
  ap_pid=$!
  for _ in $(seq 300); do
    grep -qs 'appliance ready' "$CELL/appliance.log" && break
    kill -0 "$ap_pid" 2>/dev/null || break
    sleep 0.2
  done
  if ! grep -qs 'appliance ready' "$CELL/appliance.log"; then
    log "appliance did not start: $(tail -3 "$CELL/appliance.log")"
    kill "$ap_pid" 2>/dev/null || true
    end_cell 99
    return 0
  fi
  ctl_port=$(sed -n 's/.*control tcp [^ ]*:\([0-9]*\).*/\1/p' "$CELL/appliance.log" | head -1)
  echo "priorJob=$PRIOR_JOB" >> "$CELL/meta.txt"
  [ "$PRIOR_JOB" = 0 ] || prior_job "$appliance_addr" "$ctl_port" "$lanes" "$slots"
  # the appliance's JVM (cpuwrap's child: the launchers exec it) and its CPU so far, its start-up and rehearsal: what
  # it uses from here to the ranks' end is the job's (on loopback, on the same cores as the ranks)
  ap_java=$(pgrep -P "$ap_pid" | head -1 || true)
  ap_cpu0=
  [ -z "$ap_java" ] || ap_cpu0=$(proc_cpu "$ap_java" 2>/dev/null || true)
  start_sampler
  if [ "$system" = switchml-host ] || [ "$system" = switchml-node ]; then
    echo "hostWarmUpMs=$HOST_WARMUP_MS" >> "$CELL/meta.txt"
    echo "hostShm=$HOST_SHM_DESC" >> "$CELL/meta.txt"
    local agents_cpu0=()
    if ! host_agents_alive; then
      # killed with everything in the worker namespaces (an MPI launch that hung is cleared that way): start again
      log "a host agent is gone: starting the host agents again"
      host_agents_down
      host_agents_up
    fi
    for ((r = 0; r < HOST_AGENTS; r++)); do agents_cpu0[r]=$(proc_cpu "${HOST_AGENT_PIDS[r]}"); done
    for ((r = 0; r < WORKERS; r++)); do
      OMP_NUM_THREADS=1 in_ns "$(rack_ns_w "$r")" timeout -k 10 "$CELL_TIMEOUT" \
        "$PY" "$HERE/cpuwrap.py" --out "$CELL/rank$r.cpu.json" -- \
        "$PY" "$HERE/switchml_host_allreduce.py" --host-agent "$(host_agent_socket "$r")" --job "cell$CELL_SEQ" \
        --token "rack-bench-$$-$CELL_SEQ" --world "$WORKERS" --rank "$r" --appliance "$appliance_addr:$ctl_port" \
        --elements "$((CUR_BYTES / 4))" --iterations "$CUR_ITER" --warmups "$CUR_WARM" -k "$lanes" -s "$slots" \
        --mac "$MAC" --system "$system" --local-world "$([ "$system" = switchml-node ] && echo "$WORKERS" || echo 1)" \
        --agent-pid "${HOST_AGENT_PIDS[$((HOST_AGENTS > 1 ? r : 0))]}" ${ap_java:+--appliance-pid "$ap_java"} \
        > "$CELL/rank$r.json" 2> "$CELL/rank$r.err" &
      pids+=($!)
    done
    wait_all "${pids[@]}" || rc=$?
    if host_agents_alive; then
      for ((r = 0; r < HOST_AGENTS; r++)); do
        host_agent_cpu_since "${HOST_AGENT_PIDS[r]}" "${agents_cpu0[r]}" > "$CELL/rankhost$r.cpu.json"
      done
    else
      log "a host agent died during the cell: its CPU is unknown, the cell fails"
      rc=1
    fi
    appliance_job_cpu "$ap_java" "$ap_cpu0"
    stop_sampler
    kill -TERM "$ap_pid" 2>/dev/null || true
    wait "$ap_pid" 2>/dev/null || true
    end_cell "$rc"
    return 0
  fi
  for ((r = 0; r < WORKERS; r++)); do
    worker_bench_rank "$r" "cell$CELL_SEQ" "$CUR_ITER" "$CUR_WARM" "$appliance_addr" "$ctl_port" "$lanes" "$slots" \
      "$PY" "$HERE/cpuwrap.py" --out "$CELL/rank$r.cpu.json" -- > "$CELL/rank$r.json" 2> "$CELL/rank$r.err" &
    pids+=($!)
  done
  wait_all "${pids[@]}" || rc=$?
  appliance_job_cpu "$ap_java" "$ap_cpu0"
  stop_sampler
  kill -TERM "$ap_pid" 2>/dev/null || true
  wait "$ap_pid" 2>/dev/null || true
  end_cell "$rc"
}

# One rank's `worker bench` in its worker's namespace, the cell's tensor: rank $1 of job $2, $3 timed calls after $4
# warm-ups, against the appliance at $5 with control port $6, k $7 and s $8; any further arguments are a command that
# runs it (cpuwrap.py and its options)
worker_bench_rank() {
  local r=$1 job=$2 iterations=$3 warmups=$4 addr=$5 port=$6 lanes=$7 slots=$8
  shift 8
  SWITCHML_JAVA_OPTS="-Xmx2g ${SWITCHML_BENCH_JAVA_OPTS:-}" in_ns "$(rack_ns_w "$r")" timeout -k 10 "$CELL_TIMEOUT" \
    "$@" "$SWITCHML" worker bench --appliance "$addr" --control-port "$port" --job "$job" \
    --token "rack-bench-$$-$job" --world "$WORKERS" --rank "$r" --type float32 --elements "$((CUR_BYTES / 4))" \
    --iterations "$iterations" --warmups "$warmups" --values peers -k "$lanes" -s "$slots" --mac "$MAC" \
    ${RTO_MS:+--rto-ms "$RTO_MS"} --fast-retransmit "$FAST_RETRANSMIT" --json
}

# --prior-job: one throwaway job of the cell's shape on the appliance at $1, control port $2, k $3 and s $4 (the cell's
# own job follows; the appliance's CPU for it is read after this one); a failure is logged and fails nothing
prior_job() {
  local r pids=() rc=0
  for ((r = 0; r < WORKERS; r++)); do
    worker_bench_rank "$r" "prior$CELL_SEQ" 2 1 "$1" "$2" "$3" "$4" > "$CELL/prior$r.json" 2> "$CELL/prior$r.err" &
    pids+=($!)
  done
  wait_all "${pids[@]}" || rc=$?
  [ "$rc" = 0 ] && log "prior job done" || log "the prior job failed (rc $rc): $(tail -2 "$CELL/prior0.err")"
}

# The appliance JVM $1's CPU since "utime stime" $2 (read when it said ready) into appliance.job.cpu.json; nothing when
# it is gone (the cell's report then has no such figure)
appliance_job_cpu() {
  [ -n "$1" ] && [ -n "$2" ] && [ -r "/proc/$1/stat" ] || return 0
  proc_cpu_since "$1" "$2" > "$CELL/appliance.job.cpu.json"
}

# The ranks as Python processes served by long-lived host agents: on loopback one agent for all ranks, in the rack one
# per worker namespace (each worker a host of one rank), started and warmed up before the cells.
run_switchml_host() {
  run_switchml switchml-host
}

# The same ranks as one node's: summed in the host agent, one worker of the job at the appliance (loopback only: a rack
# of several-rank nodes would need several ranks per worker namespace sharing its agent)
run_switchml_node() {
  if [ "$CUR_MODE" != loopback ]; then
    log "switchml-node: loopback only, skipped in the rack"
    return 0
  fi
  run_switchml switchml-node
}

# The host agents of the switchml-host and switchml-node systems: started once, before the loopback rounds (one for
# all ranks) or, in the rack, after the rack is up (one per worker namespace, for its one rank), and warmed up as a
# systemd-started agent is at boot; an agent's CPU time in a cell (the ranks' share of it) goes into the cell's worker
# CPU
HOST_AGENT_PIDS=()
HOST_AGENTS=0
HOST_AGENT_STARTS=0
host_agent_socket() { if [ "$CUR_MODE" = rack ]; then echo "$WORK/host-agent-w$1.sock"; else echo "$WORK/host-agent.sock"; fi; }
host_agents_up() {
  local r count=1 appliance=127.0.0.1 lanes=$LOOP_LANES slots=$LOOP_SLOTS
  HOST_AGENT_STARTS=$((HOST_AGENT_STARTS + 1))
  host_shm_up
  if [ "$CUR_MODE" = rack ]; then
    count=$WORKERS appliance=$RACK_APPLIANCE_ADDR lanes=$RACK_LANES slots=$(rack_slots_for "$CUR_RATE")
  fi
  for ((r = 0; r < count; r++)); do
    SWITCHML_JAVA_OPTS="-Xmx1g ${SWITCHML_BENCH_JAVA_OPTS:-}" in_ns "$(rack_ns_w "$r")" "$SWITCHML" worker host \
      --socket "$(host_agent_socket "$r")" --shm-dir "$HOST_SHM_DIR" --appliance "$appliance" --mac "$MAC" -k "$lanes" -s "$slots" \
      --warm-up-ms "$HOST_WARMUP_MS" ${RTO_MS:+--rto-ms "$RTO_MS"} --fast-retransmit "$FAST_RETRANSMIT" \
      > "$WORK/host-agent-$HOST_AGENT_STARTS-$r.log" 2>&1 &
    HOST_AGENT_PIDS[r]=$!
  done
  HOST_AGENTS=$count
  for ((r = 0; r < count; r++)); do
    for _ in $(seq $((HOST_WARMUP_MS / 200 + 150))); do
      grep -qs 'host ready' "$WORK/host-agent-$HOST_AGENT_STARTS-$r.log" && break
      kill -0 "${HOST_AGENT_PIDS[r]}" 2>/dev/null || break
      sleep 0.2
    done
    grep -qs 'host ready' "$WORK/host-agent-$HOST_AGENT_STARTS-$r.log" ||
      die "host agent $r did not start: $(tail -3 "$WORK/host-agent-$HOST_AGENT_STARTS-$r.log")"
    log "host agent $r: $(grep 'host ready' "$WORK/host-agent-$HOST_AGENT_STARTS-$r.log")"
  done
}
# The host agents' shared-memory directory: with --host-shm huge a tmpfs of huge pages mounted once for the run (as the
# package's run-switchml-shm.mount), else /dev/shm
HOST_SHM_DIR=
HOST_SHM_DESC=
HOST_SHM_MOUNTED=0
host_shm_up() {
  [ -z "$HOST_SHM_DIR" ] || return 0
  if [ "$HOST_SHM" = dev ]; then
    HOST_SHM_DIR=/dev/shm HOST_SHM_DESC="/dev/shm (shmem THP $(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null || echo unknown))"
    return 0
  fi
  mkdir -p "$WORK/shm"
  mount -t tmpfs -o huge=within_size,mode=1777,nosuid,nodev,noexec switchml-bench-shm "$WORK/shm" ||
    die "--host-shm huge: cannot mount a tmpfs with huge=within_size on $WORK/shm (root and a kernel with THP are needed; --host-shm dev uses /dev/shm)"
  HOST_SHM_MOUNTED=1 HOST_SHM_DIR=$WORK/shm HOST_SHM_DESC="tmpfs huge=within_size"
}
host_shm_down() {
  if [ "$HOST_SHM_MOUNTED" = 1 ]; then umount "$WORK/shm" 2>/dev/null || log "WARNING: $WORK/shm left mounted"; HOST_SHM_MOUNTED=0; fi
}
host_agents_down() {
  local r
  for ((r = 0; r < HOST_AGENTS; r++)); do kill -TERM "${HOST_AGENT_PIDS[r]}" 2>/dev/null || true; done
  for ((r = 0; r < HOST_AGENTS; r++)); do wait "${HOST_AGENT_PIDS[r]}" 2>/dev/null || true; done
  HOST_AGENTS=0
  HOST_AGENT_PIDS=()
}
host_agents_alive() {
  local r
  for ((r = 0; r < HOST_AGENTS; r++)); do [ -r "/proc/${HOST_AGENT_PIDS[r]}/stat" ] || return 1; done
}
# "utime stime" of process $1 in clock ticks (a host agent's or the appliance's JVM: the launchers exec it)
proc_cpu() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
# cpuwrap.py's JSON for host agent $1's CPU since "utime stime" $2, with its peak RSS
host_agent_cpu_since() { proc_cpu_since "$1" "$2" true; }
# the same for any process $1; $3: true to mark it a host agent's
proc_cpu_since() {
  local hz u0 s0 u1 s1
  hz=$(getconf CLK_TCK)
  read -r u0 s0 <<< "$2"
  read -r u1 s1 <<< "$(proc_cpu "$1")"
  awk -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v hz="$hz" -v rss="$(awk '/^VmHWM/ { print $2 }' "/proc/$1/status")" \
    -v agent="${3:-false}" \
    'BEGIN { printf "{\"userSec\": %.2f, \"systemSec\": %.2f, \"exitCode\": 0, \"maxRssKiB\": %d, \"hostAgent\": %s}\n", u / hz, s / hz, rss, agent }'
}

run_gloo() {
  local r pids=() rc=0 master port ifname
  begin_cell gloo
  if [ "$CUR_MODE" = rack ]; then
    master=$(rack_worker_addr 0) port=$((29500 + CELL_SEQ % 1000)) ifname=eth0
  else
    master=127.0.0.1 port=$(free_port) ifname=lo
  fi
  start_sampler
  for ((r = 0; r < WORKERS; r++)); do
    OMP_NUM_THREADS=1 in_ns "$(rack_ns_w "$r")" timeout -k 10 "$CELL_TIMEOUT" \
      "$PY" "$HERE/cpuwrap.py" --out "$CELL/rank$r.cpu.json" -- \
      "$PY" "$HERE/gloo_allreduce.py" --rank "$r" --world "$WORKERS" --master-addr "$master" --master-port "$port" \
      --ifname "$ifname" --elements "$((CUR_BYTES / 4))" --iterations "$CUR_ITER" --warmups "$CUR_WARM" \
      --timeout-sec "$CELL_TIMEOUT" > "$CELL/rank$r.json" 2> "$CELL/rank$r.err" &
    pids+=($!)
  done
  wait_all "${pids[@]}" || rc=$?
  stop_sampler
  end_cell "$rc"
}

# mpi_kill PID: end an MPI launch: the mpirun tree (PID is our job) and, in the rack, the daemonized orteds and
# ranks left in the worker namespaces (they can only be ours).
mpi_kill() {
  local r p
  kill -TERM "$1" 2>/dev/null || true
  sleep 1
  if [ "$CUR_MODE" = rack ]; then
    for ((r = 0; r < WORKERS; r++)); do
      for p in $(ip netns pids "$(rack_ns_w "$r")"); do kill -KILL "$p" 2>/dev/null || true; done
    done
  fi
  kill -KILL "$1" 2>/dev/null || true
}

run_mpi() {
  local rc=0 r args pid extra
  begin_cell mpi
  args=(--allow-run-as-root --oversubscribe -np "$WORKERS" --bind-to none -x OMP_NUM_THREADS=1)
  if [ "$CUR_MODE" = rack ]; then
    : > "$CELL/hosts"
    for ((r = 0; r < WORKERS; r++)); do echo "$(rack_worker_addr "$r") slots=1" >> "$CELL/hosts"; done
    args+=(--hostfile "$CELL/hosts" --map-by node --mca plm_rsh_agent "$HERE/mpi_rsh.sh" --mca plm_rsh_no_tree_spawn 1
      --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 -x RACK_PREFIX)
    echo "mpiBtl=tcp" >> "$CELL/meta.txt"
  else
    if [ "$MPI_LOOPBACK_BTL" = tcp ]; then
      args+=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    else
      args+=(--mca btl vader,self)
    fi
    echo "mpiBtl=$MPI_LOOPBACK_BTL" >> "$CELL/meta.txt"
  fi
  # Now and then one orted never starts or never reports back, and mpirun waits for it forever (seen in about
  # 1 of 30 launches here, loss or no loss). So wait up to 30 s for every rank to have started (a launch takes
  # 1 to 5 s), else kill the launch and try again, up to 3 times; the attempts are recorded.
  # RACK_MPI_ARGS (environment) adds mpirun options, e.g. "--mca plm_base_verbose 5" to debug a launch.
  read -r -a extra <<< "${RACK_MPI_ARGS:-}"
  args+=("${extra[@]}")
  start_sampler
  local attempt started
  for attempt in 1 2 3; do
    rc=0
    RACK_PREFIX=$RACK_PREFIX OMP_NUM_THREADS=1 in_ns "$(rack_ns_w 0)" timeout -k 10 "$CELL_TIMEOUT" \
      "$PY" "$HERE/cpuwrap.py" --out "$CELL/mpi.cpu.json" -- \
      mpirun "${args[@]}" "$PY" "$HERE/mpi_allreduce.py" --elements "$((CUR_BYTES / 4))" \
      --iterations "$CUR_ITER" --warmups "$CUR_WARM" > "$CELL/mpi.json" 2> "$CELL/mpi.err" &
    pid=$!
    started=0
    for _ in $(seq 150); do
      grep -qs 'ranks started' "$CELL/mpi.err" && { started=1; break; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if [ "$started" = 0 ] && kill -0 "$pid" 2>/dev/null; then
      log "mpi: not every rank started within 30 s; killing the launch"
      mpi_kill "$pid"
    fi
    wait "$pid" || rc=$?
    [ "$started" = 0 ] && [ "$attempt" -lt 3 ] || break
    log "mpi: launch failed (exit $rc: $(tail -1 "$CELL/mpi.err" 2>/dev/null)); trying again"
    mv "$CELL/mpi.err" "$CELL/mpi.err.$attempt"
    sleep 2
  done
  echo "mpiAttempts=$attempt" >> "$CELL/meta.txt"
  stop_sampler
  end_cell "$rc"
}

run_systems() {
  local size system
  for size in ${SIZES//,/ }; do
    CUR_SIZE=$size
    CUR_BYTES=$(size_bytes "$size")
    CUR_ITER=$(iterations_for "$CUR_BYTES")
    CUR_WARM=$(warmups_for "$CUR_BYTES")
    for ((CUR_REPEAT = 1; CUR_REPEAT <= REPEAT; CUR_REPEAT++)); do
      for system in ${SYSTEMS//,/ }; do
        log "$system: $CUR_MODE, rate $CUR_RATE, loss $CUR_LOSS, $size, $CUR_WARM+$CUR_ITER all-reduces" \
          "$([ "$REPEAT" -gt 1 ] && echo "(run $CUR_REPEAT of $REPEAT)")"
        "run_${system//-/_}"
        summarise_cell
      done
    done
  done
}

summarise_cell() {
  "$PY" "$HERE/aggregate.py" --summarise-cell "$CELL" >&2 || true
}

# ---------------------------------------------------------------------------------------------------------------
# The matrix

log "work directory $WORK; namespaces $RACK_PREFIX-*; $WORKERS workers; systems $SYSTEMS"
RUN_STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)

if [ "$RACK" = 1 ]; then
  for rate in ${RATES//,/ }; do
    CUR_MODE=rack CUR_RATE=$rate CUR_APPLIANCE_RATE=$APPLIANCE_RATE CUR_MTU=$MTU
    [ -n "$(rate_bits "$rate")" ] || exit 2
    log "rack: $WORKERS workers, links $rate, appliance link $APPLIANCE_RATE, MTU $MTU"
    rack_up "$WORKERS" "$rate" "$APPLIANCE_RATE" "$MTU"
    for loss in ${LOSSES//,/ }; do
      CUR_LOSS=$loss
      rack_loss "$loss"
      if [ "$OFFLOAD" = auto ]; then
        CUR_OFFLOAD=$(awk -v l="$loss" 'BEGIN { print (l > 0) ? "off" : "on" }')
      else
        CUR_OFFLOAD=$OFFLOAD
      fi
      rack_offload "$CUR_OFFLOAD" "$WORKERS"
      if has_system switchml-host && [ "$HOST_AGENTS" = 0 ]; then host_agents_up; fi
      run_systems
    done
    host_agents_down
    rack_down
  done
fi

if [ "$LOOPBACK" = 1 ]; then
  CUR_MODE=loopback CUR_RATE=none CUR_APPLIANCE_RATE=none CUR_LOSS=0 CUR_MTU=65536 CUR_OFFLOAD=host
  log "loopback: no namespaces, $WORKERS workers"
  [ "$MULTICAST" = on ] && loopback_multicast_up
  if has_system switchml-host || has_system switchml-node; then host_agents_up; fi
  run_systems
  host_agents_down
  loopback_multicast_down
fi

RUN_FINISHED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
mkdir -p "$OUT_DIR"
"$PY" "$HERE/aggregate.py" --cells "$WORK/cells" --out "$OUT_DIR" ${TAG:+--tag "$TAG"} \
  --command "${SWITCHML_BENCH_JAVA_OPTS:+SWITCHML_BENCH_JAVA_OPTS='$SWITCHML_BENCH_JAVA_OPTS' }bench/rack/run.sh${ORIG_ARGS:+ $ORIG_ARGS}" --started "$RUN_STARTED" --finished "$RUN_FINISHED" \
  --build "$BUILD_COMMIT" --build-dirty "$BUILD_DIRTY" --build-time "$BUILD_TIME" --workers "$WORKERS" --mtu "$MTU" \
  --appliance-rate "$APPLIANCE_RATE" --mac "$MAC" --multicast "$MULTICAST" --shard-cpus "$SHARD_CPUS" \
  --fast-retransmit "$FAST_RETRANSMIT" --offload "$OFFLOAD" --repeat "$REPEAT"
log "raw cells kept in $WORK/cells"
