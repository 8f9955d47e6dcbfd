#!/usr/bin/env bash
# Download (once) the control node's toolchain, bare ansible-core and ansible-runner at requirements-dev.txt's pins
# and collection/requirements.txt's, with their dependencies, into DIR (default .cache/lab/wheelhouse/drift/controller, which the drift lab's hosts
# mount): the drift_schedule test installs it on a lab host, molecule/collection into a venv of its own.
# A stamp says which pins the folder holds; other pins replace it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.cache/lab/wheelhouse/drift/controller}
# and the collection's own control-node packages (collection/requirements.txt: the gate's charts)
pins=$(grep -E '^ansible-(core|runner)==' requirements-dev.txt; grep -E '^[A-Za-z0-9]' collection/requirements.txt)
mkdir -p "$(dirname "$dir")"
exec 9> "$(dirname "$dir")/.controller-wheels.lock"
flock 9
if [ "$(cat "$dir/.pins" 2>/dev/null)" != "$pins" ]; then
  rm -rf "$dir"
  # shellcheck disable=SC2086  # one pin a word
  python3 -m pip download -q --only-binary=:all: -d "$dir" $pins
  echo "$pins" > "$dir/.pins"
fi
