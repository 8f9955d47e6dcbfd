#!/usr/bin/env bash
# Wall time of one drift check (playbooks/drift.yml --check --diff with the JSON callback, then
# scripts/drift_report.py), for one lab host and for all of them; the median of DRIFT_BENCH_RUNS runs (default 3).
# Needs a lab that is up and converged (lab/up.sh, then deploy.yml); changes nothing on it.
#   lab/bench-drift.sh                                      the default lab (inventories/lab)
#   DRIFT_BENCH_INVENTORY=inventories/lab-drift lab/bench-drift.sh     the drift lab (molecule/drift's hosts)
set -euo pipefail
cd "$(dirname "$0")/.."
inventory="${DRIFT_BENCH_INVENTORY:-inventories/lab}"
runs="${DRIFT_BENCH_RUNS:-3}"
ansible=.venv/bin
[ -x "$ansible/ansible-playbook" ] || { echo "bench-drift: no .venv (make setup)" >&2; exit 2; }
mapfile -t hosts < <("$ansible/ansible-inventory" -i "$inventory" --list | python3 -c \
  'import json, sys; print("\n".join(json.load(sys.stdin)["blackwell"]["hosts"]))')
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# One check, timed; prints the seconds and the reporter's verdict.
check() {  # check LIMIT
  local start end rc
  start=$(date +%s.%N)
  ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \
    "$ansible/ansible-playbook" playbooks/drift.yml --check --diff -i "$inventory" -l "$1" > "$out/run.json" || true
  rc=0
  "$ansible/python" scripts/drift_report.py "$out/run.json" --json "$out/report.json" --quiet || rc=$?
  end=$(date +%s.%N)
  printf '%.1f %s\n' "$(echo "$end - $start" | bc)" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$out/report.json")/exit$rc"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

bench() {  # bench LABEL LIMIT
  local times=() verdicts=() line
  for _ in $(seq "$runs"); do
    line="$(check "$2")"
    times+=("${line%% *}"); verdicts+=("${line#* }")
  done
  printf '%-22s median %6.1f s   runs: %s   (%s)\n' "$1" "$(printf '%s\n' "${times[@]}" | median)" \
    "${times[*]}" "$(printf '%s\n' "${verdicts[@]}" | sort | uniq -c | awk '{print $2 " x" $1}' | paste -sd, -)"
}

echo "drift check (playbook + reporter), $inventory, $runs run(s) each, $(nproc) cores, $(date -u +%Y-%m-%d)"
bench "1 host (${hosts[0]})" "${hosts[0]}"
bench "all ${#hosts[@]} hosts" blackwell
