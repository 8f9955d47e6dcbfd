#!/usr/bin/env bash
# All tests: unit + real-wheel integration (pytest), ansible-lint (production profile),
# playbook syntax checks, and the module's documentation.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"

echo "== ansible-doc"
ansible-doc -M library sglang_fusion_patch > /dev/null
ansible-doc -M library nvidia_gpu_facts > /dev/null
ansible-doc -M library sglang_nccl_settings > /dev/null
ansible-doc -M library sglang_benchmark_gate > /dev/null

echo "== syntax checks"
for playbook in deploy.yml playbooks/*.yml; do
  ansible-playbook --syntax-check "$playbook"
done

echo "== ansible-lint (production profile)"
ansible-lint

echo "== benchmark client venv (SGLang's real client, for the benchmark gate tests)"
./scripts/bench-client.sh

echo "== pytest"
python -m pytest "$@"
