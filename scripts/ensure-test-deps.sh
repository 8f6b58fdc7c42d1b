#!/usr/bin/env bash
# ensure-test-deps.sh: make sure the test suite's non-Maven dependencies are present.
#   PyTorch (CPU, with Gloo) for /usr/bin/python3, used by the PyTorch bridge test (PyTorchBridgeTest).
# Idempotent: when `/usr/bin/python3 -c 'import torch'` already works it returns at once without
# touching apt. Otherwise it runs `apt-get update` and `apt-get install -y python3-torch` (Debian 12,
# about 60 s, about 1 GiB); that needs root (CI runs as root) or sudo.
set -euo pipefail

PYTHON=/usr/bin/python3

have_torch() {
  [ -x "$PYTHON" ] && "$PYTHON" -c 'import torch' >/dev/null 2>&1
}

if have_torch; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-test-deps: $PYTHON cannot import torch and apt-get is not available; install PyTorch for $PYTHON by hand" >&2
  exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
  else
    echo "ensure-test-deps: $PYTHON cannot import torch; run as root (or with sudo) to install python3-torch" >&2
    exit 1
  fi
fi

echo "ensure-test-deps: installing python3-torch with apt-get (about a minute) ..." >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >&2
"${SUDO[@]}" apt-get install -y -q --no-install-recommends python3-torch >&2

if ! have_torch; then
  echo "ensure-test-deps: python3-torch was installed but '$PYTHON -c \"import torch\"' still fails" >&2
  exit 1
fi
echo "ensure-test-deps: torch $("$PYTHON" -c 'import torch; print(torch.__version__)') ready" >&2
