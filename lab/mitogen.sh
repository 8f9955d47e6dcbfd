#!/usr/bin/env bash
# Prints the folder of Mitogen's strategy plugins (mitogen_linear, mitogen_free, ...), installing the version pinned
# in lab/mitogen-requirements.txt first if it is not there yet: into .cache/lab/mitogen-<hash of that file>, a
# folder of its own (pip --target), never into .venv. Nothing uses Mitogen unless told to:
#   ANSIBLE_STRATEGY_PLUGINS="$(lab/mitogen.sh)" ANSIBLE_STRATEGY=mitogen_linear ansible-playbook ...
# (lab/bench-fleet.sh does this for its FLEET_BENCH_MITOGEN=1 runs only). The strategy plugin puts its own
# folder's parent on sys.path, so the controller's .venv needs nothing installed.
set -euo pipefail
. "$(dirname "$0")/env.sh"
requirements="$LAB_DIR/mitogen-requirements.txt"
target="$LAB_CACHE/mitogen-$(sha256sum "$requirements" | cut -c1-12)"
if [ ! -d "$target/ansible_mitogen/plugins/strategy" ]; then
  rm -rf "$target.tmp"
  "$LAB_ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
    --target "$target.tmp" -r "$requirements" >&2
  mv "$target.tmp" "$target"
fi
echo "$target/ansible_mitogen/plugins/strategy"
