#!/usr/bin/env bash
# All tests: unit + real-wheel integration (pytest), ansible-lint (production profile),
# playbook syntax checks, the module's documentation, and the built collection (ansible-test sanity here; install,
# ansible-doc by FQCN and playbook syntax in tests/integration/test_collection_install.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"

echo "== ansible-doc"
for module in library/*.py; do
  ansible-doc -M library "$(basename "$module" .py)" > /dev/null
done

echo "== syntax checks"
for playbook in deploy.yml playbooks/*.yml; do
  ansible-playbook --syntax-check "$playbook"
done

echo "== collection: build (make collection; ansible-lint below needs it), ansible-test sanity on its installed copy"
./scripts/sanity.sh

echo "== ansible-lint (production profile)"
# molecule/default/converge.yml imports gpufleet.sglang.deploy: lint finds it in the collection built above.
ANSIBLE_COLLECTIONS_PATH="$PWD/.cache/collections:$PWD/build" ansible-lint

echo "== benchmark client venv (SGLang's real client, for the benchmark gate tests)"
./scripts/bench-client.sh

echo "== pytest"
python -m pytest "$@"
