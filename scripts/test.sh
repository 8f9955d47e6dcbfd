#!/usr/bin/env bash
# make unit: the static checks (scripts/checks.sh: ansible-doc, syntax, the built collection's ansible-test sanity,
# ansible-lint production profile), the benchmark client venv (SGLang's real client, for the benchmark gate tests),
# then pytest (unit + real-wheel integration; arguments go to pytest), each a timed stage. The built collection's
# install, ansible-doc by FQCN and playbook syntax are in tests/integration/test_collection_install.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
. scripts/ci-stage.sh

./scripts/checks.sh
ci_stage unit/bench-client ./scripts/bench-client.sh
ci_stage unit/pytest python -m pytest "$@"
