#!/usr/bin/env bash
# Figures against fleet size. For each N (default 2 4 8 16): a fresh lab of N hosts (inventories/fleet/fleet.py:
# fleet-gpu1..N on 127.0.0.1:2301.., 8x and 2x simulated RTX PRO 6000 alternating), the first converge of
# deploy.yml (benchmark gate included, with a results dir of its own so every host's deploy is a first one), the
# no-op re-run (must report changed=0 on every host, else the script stops), one drift check of all hosts
# (playbooks/drift.yml --check --diff + scripts/drift_report.py; must be clean), then the hosts are removed.
# Prints the table with each figure's ratio to the smallest N and writes it as JSON (FLEET_BENCH_JSON, default
# docs/measurements/fleet.json); load average, cores, forks, commit and the per-play seconds go in each row.
#   lab/bench-fleet.sh                          N = 2 4 8 16
#   lab/bench-fleet.sh 2 4                      only those sizes
#   lab/bench-fleet.sh 2 16 -- -e deploy_serial=4      arguments after -- go to both deploy runs
#   FLEET_BENCH_KEEP_ROWS=1 lab/bench-fleet.sh 8      add a size to the rows already measured
# Logs: .cache/lab/fleet/<N>/{up,converge,noop}.log, drift.json, drift-report.json, benchmark/ (the gate's results).
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$LAB_ROOT"
export PATH="$LAB_ROOT/.venv/bin:$PATH" ANSIBLE_CONFIG="$LAB_ROOT/ansible.cfg"

sizes=() extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then shift; extra=("$@"); break; fi
  sizes+=("$1"); shift
done
[ ${#sizes[@]} -gt 0 ] || sizes=(2 4 8 16)
json="${FLEET_BENCH_JSON:-docs/measurements/fleet.json}"
logs="$LAB_CACHE/fleet"
rows="$logs/rows.jsonl"
helper=(python3 "$LAB_DIR/fleet_bench.py")
inventory=inventories/fleet
mkdir -p "$logs" "$(dirname "$json")"
# A label of its own: molecule's default scenario removes every container labelled sglang-lab when it ends.
export LAB_LABEL=sglang-lab-fleet
# FLEET_BENCH_KEEP_ROWS=1 adds to the rows of an earlier run (a size measured again replaces its row); each row
# carries its own date, load and commit.
[ "${FLEET_BENCH_KEEP_ROWS:-0}" = 1 ] || : > "$rows"

lab_hosts() { FLEET_SIZE=$1 "$inventory/fleet.py" --lab-hosts; }
largest="$(printf '%s\n' "${sizes[@]}" | sort -n | tail -n 1)"
lab_hosts "$largest" > /dev/null   # refuses a size the port range cannot hold, before anything starts
# Every host's systemd holds a few inotify instances, all under root's limit (Debian: 128): past about 20
# containers on one machine a host fails to boot (systemd exits, "container state improper").
want=$((8 * (largest + $(podman ps --quiet | wc -l))))
if [ "$(cat /proc/sys/fs/inotify/max_user_instances)" -lt "$want" ]; then
  echo "bench-fleet: fs.inotify.max_user_instances is below $want; raise it first:" \
       "sysctl -w fs.inotify.max_user_instances=1024" >&2
  exit 2
fi
# Never leave fleet hosts behind (only ours: down.sh removes exactly the names it is given).
cleanup() { LAB_HOSTS="$(lab_hosts "$largest")" "$LAB_DIR/down.sh" > /dev/null || true; }
trap cleanup EXIT

now() { date +%s.%N; }
since() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }
used_mib() { free -m | awk '/^Mem:/ {print $3}'; }
loadavg() { awk '{printf "[%s, %s, %s]", $1, $2, $3}' /proc/loadavg; }
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs/measurements' || echo -dirty)"
forks="$(ansible-config dump 2>/dev/null | awk -F' = ' '/^DEFAULT_FORKS/ {print $2}')"

deploy() {  # deploy N LOG: deploy.yml on the fleet of N, timed per task (profile_tasks) into LOG
  FLEET_SIZE=$1 ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks \
    ansible-playbook -i "$inventory" deploy.yml -l blackwell \
      -e "sglang_benchmark_results_dir=$logs/$1/benchmark" "${extra[@]}" > "$2" 2>&1
}

fail() {  # fail LOG MESSAGE
  tail -n 40 "$1" >&2
  echo "bench-fleet: $2 (log: $1)" >&2
  exit 1
}

for n in "${sizes[@]}"; do
  dir="$logs/$n"
  rm -rf "$dir"; mkdir -p "$dir"
  export LAB_HOSTS; LAB_HOSTS="$(lab_hosts "$n")"
  echo "== $n hosts: $LAB_HOSTS"
  load_before="$(loadavg)" mem_before="$(used_mib)"
  "$LAB_DIR/down.sh" > /dev/null
  t=$(now); "$LAB_DIR/up.sh" > "$dir/up.log" 2>&1 || fail "$dir/up.log" "lab up failed"; up=$(since "$t")

  t=$(now); deploy "$n" "$dir/converge.log" || fail "$dir/converge.log" "first converge failed"; first=$(since "$t")
  "${helper[@]}" recap "$dir/converge.log" "$n" || fail "$dir/converge.log" "first converge: bad recap"
  mem_converged="$(used_mib)"

  t=$(now); deploy "$n" "$dir/noop.log" || fail "$dir/noop.log" "no-op re-run failed"; noop=$(since "$t")
  "${helper[@]}" recap "$dir/noop.log" "$n" --no-change ||
    fail "$dir/noop.log" "the no-op re-run changed something: not idempotent"

  t=$(now)
  FLEET_SIZE=$n ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \
    ansible-playbook playbooks/drift.yml --check --diff -i "$inventory" -l blackwell > "$dir/drift.json" 2> "$dir/drift.err" || true
  drift_rc=0
  python scripts/drift_report.py "$dir/drift.json" --json "$dir/drift-report.json" --quiet || drift_rc=$?
  drift=$(since "$t")
  [ "$drift_rc" = 0 ] || fail "$dir/drift-report.json" "drift check not clean right after a converge (exit $drift_rc)"

  "${helper[@]}" row hosts="$n" first_converge_s="$first" noop_s="$noop" drift_s="$drift" up_s="$up" \
    first_converge_plays="$("${helper[@]}" phases "$dir/converge.log")" \
    noop_plays="$("${helper[@]}" phases "$dir/noop.log")" \
    loadavg_before="$load_before" loadavg_after="$(loadavg)" cores="$(nproc)" forks="$forks" \
    mem_used_mib_before="$mem_before" mem_used_mib_converged="$mem_converged" \
    commit="$commit" date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    deploy_args="${extra[*]:-}" >> "$rows"
  "$LAB_DIR/down.sh" > /dev/null
  echo "   first converge ${first} s, no-op ${noop} s, drift ${drift} s (lab up ${up} s)"
  "${helper[@]}" table "$rows" "$json" > /dev/null   # after every size: a run cut short keeps what finished
done

echo "== fleet bench, $(nproc) cores, forks $forks, commit $commit${extra[*]:+, deploy args: ${extra[*]}}"
"${helper[@]}" table "$rows" "$json"
echo "(JSON: $json; logs: $logs/<N>/)"
