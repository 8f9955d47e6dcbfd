#!/usr/bin/env bash
# Each role alone on a lab host of its own (role-gpu1 :2261, inventories/roles): for every ROLE named (default: each
# tests/roles/tests_<role>.yml), its test playbook converges and verifies the role, then runs again and must change
# nothing (idempotence). The host is made fresh first and removed at the end (ROLE_TESTS_KEEP=1 keeps it).
#   lab/test-roles.sh                   every role that has a test playbook
#   lab/test-roles.sh gpu_preflight     that role only
# Logs: .cache/lab/roles/<role>.log (first run) and <role>-again.log.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$LAB_ROOT"
export PATH="$LAB_ROOT/.venv/bin:$PATH" ANSIBLE_CONFIG="$LAB_ROOT/ansible.cfg"
export LAB_HOSTS="role-gpu1:2261:rtxpro6000-8x-pcie"
logs="$LAB_CACHE/roles"
mkdir -p "$logs"

roles=("$@")
if [ ${#roles[@]} -eq 0 ]; then
  for playbook in tests/roles/tests_*.yml; do
    name="${playbook##*/tests_}"; roles+=("${name%.yml}")
  done
fi
for role in "${roles[@]}"; do
  [ -f "tests/roles/tests_$role.yml" ] || { echo "test-roles: no tests/roles/tests_$role.yml" >&2; exit 2; }
done

cleanup() { [ "${ROLE_TESTS_KEEP:-0}" = 1 ] || "$LAB_DIR/down.sh" > /dev/null || true; }
trap cleanup EXIT
"$LAB_DIR/down.sh" > /dev/null
"$LAB_DIR/up.sh" > "$logs/up.log" 2>&1 || { tail -n 20 "$logs/up.log" >&2; echo "test-roles: lab up failed" >&2; exit 1; }

failed=()
for role in "${roles[@]}"; do
  run=(ansible-playbook -i inventories/roles "tests/roles/tests_$role.yml")
  if ! "${run[@]}" > "$logs/$role.log" 2>&1; then
    tail -n 30 "$logs/$role.log" >&2
    echo "test-roles: $role: converge and verify failed (log: $logs/$role.log)" >&2
    failed+=("$role"); continue
  fi
  if ! "${run[@]}" > "$logs/$role-again.log" 2>&1 ||
     ! grep -Eq '^role-gpu1 +: ok=[0-9]+ +changed=0 ' "$logs/$role-again.log"; then
    tail -n 30 "$logs/$role-again.log" >&2
    echo "test-roles: $role: the second run changed something or failed: not idempotent (log: $logs/$role-again.log)" >&2
    failed+=("$role"); continue
  fi
  echo "test-roles: $role: converged, verified, idempotent"
done
[ ${#failed[@]} -eq 0 ] || { echo "test-roles: failed: ${failed[*]}" >&2; exit 1; }
