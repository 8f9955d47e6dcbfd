#!/usr/bin/env bash
# The default target for `make deploy`: a venv on this machine holding the real sglang and
# flashinfer-python wheels of the default production pin, installed with pip --no-deps (no torch,
# no GPU). It lets the patch run end to end anywhere; it is not a server.
set -euo pipefail
cd "$(dirname "$0")/.."
SGLANG_VERSION=${SGLANG_VERSION:-0.5.21}
FLASHINFER_VERSION=${FLASHINFER_VERSION:-0.6.18}
target=.cache/local-target/venv
if [ ! -x "$target/bin/python" ]; then
  python3 -m venv "$target"
fi
"$target/bin/python" -m pip install -q --no-deps "sglang==$SGLANG_VERSION" "flashinfer-python==$FLASHINFER_VERSION"
echo "local target: $target (sglang $SGLANG_VERSION, flashinfer-python $FLASHINFER_VERSION)"
