#!/usr/bin/env bash
# ensure-test-deps.sh: make sure the build's and the test suite's non-Maven dependencies are present.
#   PyTorch (CPU, with Gloo) for /usr/bin/python3, used by the PyTorch bridge test (PyTorchBridgeTest).
#   clang, llvm, libbpf-dev and bpftool, which build and inspect the XDP aggregator (smartnic-offload);
#   iproute2, nftables and unzip for the namespace tests (the XDP rack test).
#   prometheus (Debian's: promtool and the server), which GrafanaFilesTest uses to check the alerting rules and to
#   evaluate the dashboard's queries against a real scrape (the package's own server is disabled again on a systemd
#   host). With --build, only what the build needs (not PyTorch or
#   prometheus).
# Idempotent: when everything is there it returns at once without touching apt. Otherwise it runs
# `apt-get update` and `apt-get install -y` for what is missing (Debian 12; python3-torch takes about
# 60 s and 1 GiB); that needs root (CI runs as root) or sudo.
set -euo pipefail

PYTHON=/usr/bin/python3

have_torch() {
  [ -x "$PYTHON" ] && "$PYTHON" -c 'import torch' >/dev/null 2>&1
}

have_bpf_toolchain() {
  command -v clang >/dev/null 2>&1 && command -v llvm-strip >/dev/null 2>&1 && command -v bpftool >/dev/null 2>&1 &&
    [ -f /usr/include/bpf/bpf_helpers.h ] && command -v ip >/dev/null 2>&1 && command -v nft >/dev/null 2>&1 &&
    command -v unzip >/dev/null 2>&1
}

missing=()
# --build: only what building needs (the launcher's first build), not the test suite's PyTorch
[ "${1:-}" = --build ] || have_torch || missing+=(python3-torch)
[ "${1:-}" = --build ] || { [ -x /usr/bin/promtool ] && [ -x /usr/bin/prometheus ]; } || missing+=(prometheus)
have_bpf_toolchain || missing+=(clang llvm libbpf-dev bpftool iproute2 nftables unzip)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-test-deps: missing ${missing[*]} and apt-get is not available; install them by hand" >&2
  exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
  else
    echo "ensure-test-deps: missing ${missing[*]}; run as root (or with sudo) to install them" >&2
    exit 1
  fi
fi

echo "ensure-test-deps: installing ${missing[*]} with apt-get (about a minute) ..." >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >&2
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
# Debian's prometheus package enables and starts its server; the tests need only the binaries (they start their own
# server on a free port), so a host that runs systemd gets it stopped and disabled again
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  "${SUDO[@]}" systemctl disable --now prometheus.service >&2 2>/dev/null || true
  echo "ensure-test-deps: installed prometheus for its binaries and disabled its server" \
    "(systemctl enable --now prometheus to run it)" >&2
fi

if ! have_bpf_toolchain; then
  echo "ensure-test-deps: clang, llvm, libbpf-dev, bpftool and iproute2 were installed but one is still missing" >&2
  exit 1
fi
if [ "${1:-}" = --build ]; then
  exit 0
fi
if ! have_torch; then
  echo "ensure-test-deps: python3-torch was installed but '$PYTHON -c \"import torch\"' still fails" >&2
  exit 1
fi
echo "ensure-test-deps: torch $("$PYTHON" -c 'import torch; print(torch.__version__)') ready" >&2
