#!/usr/bin/env bash
# Times the lab: a fresh start (down + up), the first converge of deploy.yml on the lab hosts, and
# the no-op re-run (which must report changed=0). Extra arguments go to ansible-playbook, e.g.
#   lab/bench.sh -e fusion_patch_state=absent
# Logs: .cache/lab/bench-converge-{1,2}.log
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$LAB_ROOT"
export PATH="$LAB_ROOT/.venv/bin:$PATH" ANSIBLE_CONFIG="$LAB_ROOT/ansible.cfg"

"$LAB_DIR/down.sh" > /dev/null
t=$SECONDS; "$LAB_DIR/up.sh"; up=$((SECONDS - t))

run() {  # run N: converge once, log to a file, print the recap
  local log="$LAB_CACHE/bench-converge-$1.log" t=$SECONDS
  if ! ansible-playbook -i inventories/lab/hosts.yml deploy.yml -l blackwell "${@:2}" > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "bench: converge $1 failed (log: $log)" >&2
    exit 1
  fi
  echo $((SECONDS - t))
}
first=$(run 1 "$@")
second=$(run 2 "$@")

echo "== lab bench ($(echo "$LAB_HOSTS" | wc -w) hosts, $(nproc) cores)"
echo "lab up (fresh containers): ${up} s"
echo "first converge:            ${first} s"
echo "no-op re-run:              ${second} s"
grep -E '^lab-gpu[0-9]+ +:' "$LAB_CACHE/bench-converge-2.log"
if grep -E '^lab-gpu[0-9]+ +:' "$LAB_CACHE/bench-converge-2.log" | grep -vq 'changed=0 '; then
  echo "bench: the re-run changed something: not idempotent" >&2
  exit 1
fi
