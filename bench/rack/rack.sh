#!/usr/bin/env bash
# rack.sh: an emulated rack in network namespaces, sourced by run.sh or used by hand.
#
#   bench/rack/rack.sh up [--workers 4] [--rate 1gbit|none] [--appliance-rate none|same|RATE] [--mtu 1500]
#   bench/rack/rack.sh loss FRACTION          random loss on every bridge port, both directions
#   bench/rack/rack.sh down                   delete this prefix's namespaces (RACK_PREFIX, default swrack-$USER)
#   bench/rack/rack.sh down-stale             delete swrack-<pid>-* namespaces whose creating run.sh is gone
#   bench/rack/rack.sh status
#
# Topology: namespace <prefix>-sw holds the bridge br0 (the ToR switch). The appliance namespace <prefix>-ap and
# each worker namespace <prefix>-w<rank> has one veth, eth0, whose peer is a bridge port (p-ap, p-w<rank>).
# Veths are created directly inside their namespaces, so nothing appears in the caller's namespace.
# Addresses: appliance 10.77.0.1, worker rank r 10.77.0.(11+r), /24.
# Rate: tbf on both ends of every worker veth (upload: eth0 in the worker; download: p-w<r> on the bridge), so
# each worker link is limited in both directions. The appliance link is unlimited unless --appliance-rate says
# otherwise. Loss: nftables in the bridge namespace, `numgen random` on iifname and oifname of every port.

RACK_SUBNET_PREFIX=10.77.0
RACK_APPLIANCE_ADDR=$RACK_SUBNET_PREFIX.1
RACK_TBF_BURST=${RACK_TBF_BURST:-256kb}
RACK_TBF_LATENCY=${RACK_TBF_LATENCY:-20ms}

rack_worker_addr() { echo "$RACK_SUBNET_PREFIX.$((11 + $1))"; }
rack_ns_sw() { echo "$RACK_PREFIX-sw"; }
rack_ns_ap() { echo "$RACK_PREFIX-ap"; }
rack_ns_w() { echo "$RACK_PREFIX-w$1"; }

# Every namespace of this prefix that exists now.
rack_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${RACK_PREFIX}-(sw|ap|w[0-9]+)$" || true
}

rack_log() { echo "rack: $*" >&2; }

# rack_tbf NS DEV RATE: limit DEV's egress in NS to RATE ("none" removes any limit).
rack_tbf() {
  local ns=$1 dev=$2 rate=$3
  ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
  if [ "$rate" != none ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$RACK_TBF_BURST" latency "$RACK_TBF_LATENCY"
  fi
}

# rack_link NS IFNAME PORT MTU: a veth whose end IFNAME lives in NS and whose end PORT is a bridge port.
rack_link() {
  local ns=$1 ifname=$2 port=$3 mtu=$4 sw
  sw=$(rack_ns_sw)
  ip link add name "$ifname" netns "$ns" mtu "$mtu" type veth peer name "$port" netns "$sw" mtu "$mtu"
  ip netns exec "$sw" ip link set "$port" master br0
  ip netns exec "$sw" ip link set "$port" up
  ip netns exec "$ns" ip link set "$ifname" up
}

# rack_up WORKERS RATE APPLIANCE_RATE MTU: build the rack. RACK_PREFIX must be set.
rack_up() {
  local workers=$1 rate=$2 appliance_rate=$3 mtu=$4 sw ap ns r
  sw=$(rack_ns_sw)
  ap=$(rack_ns_ap)
  [ -z "$(rack_namespaces)" ] || { rack_log "namespaces of prefix $RACK_PREFIX already exist; run down first"; return 1; }
  ip netns add "$sw"
  ip netns exec "$sw" ip link set lo up
  # A ToR forwards frames without running the host's IP firewall on them: when br_netfilter is loaded its
  # per-namespace switches default to 1, which sends every bridged frame through the iptables hooks (several
  # microseconds per frame on these cores, for every system alike). Loss uses the bridge family, unaffected.
  local knob
  for knob in bridge-nf-call-iptables bridge-nf-call-ip6tables bridge-nf-call-arptables; do
    ip netns exec "$sw" sysctl -qw "net.bridge.$knob=0" 2>/dev/null || true
  done
  ip netns exec "$sw" ip link add br0 type bridge
  ip netns exec "$sw" ip link set br0 mtu "$mtu"
  ip netns exec "$sw" ip link set br0 up

  ip netns add "$ap"
  ip netns exec "$ap" ip link set lo up
  rack_link "$ap" eth0 p-ap "$mtu"
  ip netns exec "$ap" ip addr add "$RACK_APPLIANCE_ADDR/24" dev eth0
  ip netns exec "$ap" ip route add 224.0.0.0/4 dev eth0
  [ "$appliance_rate" = same ] && appliance_rate=$rate
  rack_tbf "$ap" eth0 "$appliance_rate"
  rack_tbf "$sw" p-ap "$appliance_rate"

  for ((r = 0; r < workers; r++)); do
    ns=$(rack_ns_w "$r")
    ip netns add "$ns"
    ip netns exec "$ns" ip link set lo up
    rack_link "$ns" eth0 "p-w$r" "$mtu"
    ip netns exec "$ns" ip addr add "$(rack_worker_addr "$r")/24" dev eth0
    ip netns exec "$ns" ip route add 224.0.0.0/4 dev eth0
    rack_tbf "$ns" eth0 "$rate"
    rack_tbf "$sw" "p-w$r" "$rate"
  done
  # No port learning delay: forward at once.
  ip netns exec "$sw" ip link set br0 type bridge forward_delay 0 2>/dev/null || true
  rack_wait_reachable "$workers"
}

# Every worker reaches the appliance and worker 0 (the bridge may take a moment to forward).
rack_wait_reachable() {
  local workers=$1 r deadline=$((SECONDS + 15))
  command -v ping >/dev/null || { sleep 1; return 0; }
  for ((r = 0; r < workers; r++)); do
    until ip netns exec "$(rack_ns_w "$r")" ping -c1 -W1 -q "$RACK_APPLIANCE_ADDR" >/dev/null 2>&1 &&
      ip netns exec "$(rack_ns_w "$r")" ping -c1 -W1 -q "$(rack_worker_addr 0)" >/dev/null 2>&1; do
      [ $SECONDS -lt $deadline ] || { rack_log "worker $r cannot reach the appliance or worker 0"; return 1; }
      sleep 0.2
    done
  done
}

# rack_loss FRACTION: drop this fraction of frames at random on every bridge port, in both directions
# (a frame crossing the bridge passes two lossy ports: its sender's and its receiver's).
rack_loss() {
  local fraction=$1 sw per_million
  sw=$(rack_ns_sw)
  ip netns exec "$sw" nft delete table bridge rackloss 2>/dev/null || true
  per_million=$(awk -v f="$fraction" 'BEGIN { printf "%d", f * 1000000 + 0.5 }')
  [ "$per_million" -gt 0 ] || return 0
  ip netns exec "$sw" nft -f - <<EOF
table bridge rackloss {
  chain fw {
    type filter hook forward priority 0; policy accept;
    iifname "p-*" numgen random mod 1000000 < $per_million counter drop
    oifname "p-*" numgen random mod 1000000 < $per_million counter drop
  }
}
EOF
}

# Frames dropped by the loss rules so far.
rack_loss_drops() {
  { ip netns exec "$(rack_ns_sw)" nft list table bridge rackloss 2>/dev/null || true; } |
    awk '/counter packets/ { for (i = 1; i <= NF; i++) if ($i == "packets") s += $(i + 1) } END { printf "%.0f\n", s }'
}

# rack_offload on|off WORKERS: TSO/GSO/GRO on every veth end. Off means the bridge, tbf and the loss rules see
# MTU-sized wire frames; on lets TCP pass 64 KB segments (cheaper per byte, but one "lost frame" is then 64 KB).
rack_offload() {
  local mode=$1 workers=$2 r sw
  sw=$(rack_ns_sw)
  ip netns exec "$(rack_ns_ap)" ethtool -K eth0 tso "$mode" gso "$mode" gro "$mode" >/dev/null 2>&1 || true
  ip netns exec "$sw" ethtool -K p-ap tso "$mode" gso "$mode" gro "$mode" >/dev/null 2>&1 || true
  for ((r = 0; r < workers; r++)); do
    ip netns exec "$(rack_ns_w "$r")" ethtool -K eth0 tso "$mode" gso "$mode" gro "$mode" >/dev/null 2>&1 || true
    ip netns exec "$sw" ethtool -K "p-w$r" tso "$mode" gso "$mode" gro "$mode" >/dev/null 2>&1 || true
  done
}

# snmp_sums [NS...]: "TcpRetransSegs UdpInDatagrams UdpRcvbufErrors UdpSndbufErrors" summed over the namespaces
# (over the caller's namespace when none is given), from /proc/net/snmp.
snmp_sums() {
  local ns
  {
    if [ $# -eq 0 ]; then cat /proc/net/snmp; else for ns in "$@"; do ip netns exec "$ns" cat /proc/net/snmp; done; fi
  } | awk '
    /^(Tcp|Udp):/ {
      if (!($1 in hdr)) { hdr[$1] = 1; for (i = 2; i <= NF; i++) name[$1, i] = $i; next }
      for (i = 2; i <= NF; i++) v[$1 name[$1, i]] += $i
      delete hdr[$1]
    }
    END { printf "%.0f %.0f %.0f %.0f\n", v["Tcp:RetransSegs"], v["Udp:InDatagrams"], v["Udp:RcvbufErrors"], v["Udp:SndbufErrors"] }'
}

# Packets dropped by the qdiscs (tbf) on every veth end of the rack so far.
rack_qdisc_drops() {
  local workers=$1 r sw
  sw=$(rack_ns_sw)
  {
    ip netns exec "$(rack_ns_ap)" tc -s qdisc show dev eth0
    ip netns exec "$sw" tc -s qdisc show
    for ((r = 0; r < workers; r++)); do ip netns exec "$(rack_ns_w "$r")" tc -s qdisc show dev eth0; done
  } 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "dropped") { v = $(i + 1); sub(/,/, "", v); s += v } } END { printf "%.0f\n", s }'
}

# Packets dropped because a CPU's input backlog was full (netdev_max_backlog), whole host, from softnet_stat.
softnet_drops() {
  local total=0 hex
  while read -r _ hex _; do total=$((total + 16#$hex)); done < /proc/net/softnet_stat
  echo "$total"
}

# Kill every process still inside one of this prefix's namespaces (they were started by us), then delete them.
# rack_test_cleanup KEEP: the EXIT trap of a rack test script (trap 'rack_test_cleanup "${X_KEEP:-}"' EXIT): kill the
# script's PIDS, take the rack down and remove WORK unless KEEP is set, then exit with the script's own status. The
# trap runs under errexit too, so a failing clean-up step would otherwise become the script's status (a test that
# passed exiting 1); a WORK that cannot be removed is logged, with what is left.
rack_test_cleanup() {
  local rc=$? keep=${1:-} pid
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rack_down >/dev/null 2>&1 || true
  if [ -z "$keep" ] && ! rm -rf "$WORK" 2>/dev/null; then
    log "clean-up: could not remove $WORK: $(find "$WORK" 2>/dev/null | head -5 | tr '\n' ' ')"
  fi
  exit "$rc"
}

rack_down() {
  local ns pid pids
  for ns in $(rack_namespaces); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  done
  for ns in $(rack_namespaces); do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.3
    done
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ns in $(rack_namespaces); do
    ip netns del "$ns" 2>/dev/null || rack_log "could not delete namespace $ns"
  done
}

# Namespaces named swrack-<pid>-* whose run.sh (pid) is no longer alive: left by a run killed with SIGKILL.
rack_down_stale() {
  local p pid
  for p in $(ip netns list 2>/dev/null | awk '{print $1}' | sed -n 's/^\(swrack-[0-9][0-9]*\)-\(sw\|ap\|w[0-9]*\)$/\1/p' | sort -u); do
    pid=${p#swrack-}
    if ! kill -0 "$pid" 2>/dev/null; then
      rack_log "deleting stale namespaces of $p"
      RACK_PREFIX=$p rack_down
    fi
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  RACK_PREFIX=${RACK_PREFIX:-swrack-${USER:-root}}
  cmd=${1:-status}
  shift || true
  case "$cmd" in
    up)
      workers=4 rate=1gbit appliance_rate=none mtu=1500
      while [ $# -gt 0 ]; do
        case "$1" in
          --workers) workers=$2; shift 2 ;;
          --rate) rate=$2; shift 2 ;;
          --appliance-rate) appliance_rate=$2; shift 2 ;;
          --mtu) mtu=$2; shift 2 ;;
          *) echo "rack.sh up: unknown option $1" >&2; exit 2 ;;
        esac
      done
      rack_up "$workers" "$rate" "$appliance_rate" "$mtu"
      echo "rack $RACK_PREFIX up: appliance $RACK_APPLIANCE_ADDR in $(rack_ns_ap), workers in $RACK_PREFIX-w0.. from $(rack_worker_addr 0)"
      ;;
    loss) rack_loss "$1" ;;
    down) rack_down ;;
    down-stale) rack_down_stale ;;
    status) rack_namespaces ;;
    *) echo "usage: rack.sh up|loss|down|down-stale|status" >&2; exit 2 ;;
  esac
fi
