#!/usr/bin/env bash
# The static checks of make test, each a timed stage: the modules' documentation (ansible-doc), every playbook's
# syntax, the collection built and ansible-test sanity on its installed copy (scripts/sanity.sh; ansible-lint
# needs that build), ansible-lint (production profile).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
. scripts/ci-stage.sh

# Functions run by ci_stage: set -e does not stop them there (a command before ||), so each returns its failure.
ansible_doc() {
  local module
  for module in library/*.py; do
    ansible-doc -M library "$(basename "$module" .py)" > /dev/null || return
  done
}

syntax_checks() {
  local playbook
  for playbook in deploy.yml playbooks/*.yml tests/roles/tests_*.yml; do
    ansible-playbook --syntax-check "$playbook" || return
  done
}

# molecule/default/converge.yml imports gpufleet.sglang.deploy: lint finds it in the collection sanity.sh built.
lint() {
  ANSIBLE_COLLECTIONS_PATH="$PWD/.cache/collections:$PWD/build" ansible-lint
}

ci_stage checks/ansible-doc ansible_doc
ci_stage checks/syntax syntax_checks
ci_stage checks/sanity ./scripts/sanity.sh
ci_stage checks/ansible-lint lint
