#!/usr/bin/env bash
# Figures against fleet size. For each N (default 2 4 8 16): a fresh lab of N hosts (inventories/fleet/fleet.py:
# fleet-gpu1..N on 127.0.0.1:2301.., 8x and 2x simulated RTX PRO 6000 alternating), the first converge of
# deploy.yml (benchmark gate included, with a results dir of its own so every host's deploy is a first one), then
#   noop        the no-op re-run on the default path (the fast path)        must report changed=0 on every host
#   noop_full   the same with -e deploy_fast_path=false (the full roles)     must report changed=0 on every host
#   drift       one drift check of all hosts (playbooks/drift.yml --check --diff + scripts/drift_report.py)
#   drift_full  the same with -e deploy_fast_path=false                       both must be clean
# (any of these failing stops the script), then noop and drift again with OpenSSH's default key exchange
# (noop_default_kex, drift_default_kex: -e ansible_ssh_extra_args= drops the lab inventory's KexAlgorithms; the row's
# ssh_kex is the lab's, ssh_kex_default OpenSSH's first: on this machine sntrup761x25519, several times the CPU of a
# connection on both ends, and the lab's hosts share its cores with the controller), then the hosts are removed.
# Each run is timed (wall seconds), its controller CPU measured (user+sys of ansible-playbook and every process
# under it, its ssh control masters included: lab/fleet_bench.py timed) and its ssh round trips counted per host
# (lab/count-ssh.sh as Ansible's ssh/sftp/scp; a module run is an ssh run whose remote command starts Python).
# With FLEET_BENCH_MITOGEN=1 the four run again under Mitogen's mitogen_linear strategy (lab/mitogen.sh installs the
# pinned mitogen into .cache/lab on first use), timed and CPU only (Mitogen keeps one connection a host, so there is
# nothing to count); a Mitogen drift run's report is compared with the linear run's of the same path
# (<run>_report_as_linear).
# Prints the table with each figure's ratio to the smallest N and writes it as JSON (FLEET_BENCH_JSON, default
# docs/measurements/fleet.json); load average, cores, forks, commit and the per-play seconds go in each row.
#   lab/bench-fleet.sh                          N = 2 4 8 16
#   lab/bench-fleet.sh 2 4                      only those sizes
#   lab/bench-fleet.sh 2 16 -- -e deploy_serial=4      arguments after -- go to every deploy run
#   FLEET_BENCH_KEEP_ROWS=1 lab/bench-fleet.sh 8      add a size to the rows already measured
#   FLEET_BENCH_MITOGEN=1 lab/bench-fleet.sh 2        also the Mitogen runs
# Logs: .cache/lab/fleet/<N>/: up.log, converge.log, <run>.log (deploy runs) or <run>.json, <run>.err and
# <run>-report.json (drift runs), <run>.ssh.log (count-ssh.sh), <run>.time.json (wall and CPU), benchmark/.
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
# The key exchange the fleet inventory sets (every run but the *_default_kex ones) and the one OpenSSH offers first.
ssh_kex="$(FLEET_SIZE=1 ansible-inventory -i "$inventory" --host fleet-gpu1 2>/dev/null | python3 -c '
import json, re, sys
found = re.search(r"KexAlgorithms=(\S+)", json.load(sys.stdin).get("ansible_ssh_extra_args", ""))
print(found.group(1) if found else "")')"
ssh_kex_default="$(ssh -G 127.0.0.1 2>/dev/null | awk '/^kexalgorithms / {split($2, kex, ","); print kex[1]}')"

# The deploy and drift commands (FLEET_SIZE, exported per size, picks the fleet); ARGS... after the playbook's own.
deploy_cmd() {  # deploy_cmd N ARGS...: deploy.yml on the fleet of N, timed per task (profile_tasks)
  local n=$1; shift
  cmd=(env ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks ansible-playbook -i "$inventory" deploy.yml
       -l blackwell -e "sglang_benchmark_results_dir=$logs/$n/benchmark" "$@" "${extra[@]}")
}
# The drift check is given the deploy's variables (the results dir, the arguments after --), as an operator's
# inventory gives both the same: a variable the deploy had and the check lacks is an input that differs.
drift_cmd() {  # drift_cmd ARGS...: the drift check of the fleet (ansible.posix.json output for the reporter)
  cmd=(env ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json
       ansible-playbook playbooks/drift.yml --check --diff -i "$inventory" -l blackwell
       -e "sglang_benchmark_results_dir=$logs/$n/benchmark" "$@" "${extra[@]}")
}

# measure NAME: runs "${cmd[@]}" (stdout/stderr as the caller redirects them) under fleet_bench.py timed
# ($dir/NAME.time.json: wall, user+sys CPU), with control masters of its own (a fresh ControlPath folder, stopped
# and counted at the end); unless counting=0, count-ssh.sh logs each ssh/sftp/scp run into $dir/NAME.ssh.log.
# run_env (e.g. Mitogen's strategy settings) goes into the command's environment. Returns the command's status.
counting=1 run_env=()
measure() {
  local name=$1 control status=0
  local -a vars=()
  control="$(mktemp -d /tmp/fleet-cp.XXXXXX)"   # short: a control socket's path must fit 108 bytes
  vars=(ANSIBLE_SSH_CONTROL_PATH_DIR="$control" "${run_env[@]}")
  if [ "$counting" = 1 ]; then
    : > "$dir/$name.ssh.log"
    vars+=(COUNT_SSH_LOG="$dir/$name.ssh.log" ANSIBLE_SSH_EXECUTABLE="$LAB_DIR/count-ssh.sh"
           ANSIBLE_SFTP_EXECUTABLE="$LAB_DIR/count-sftp.sh" ANSIBLE_SCP_EXECUTABLE="$LAB_DIR/count-scp.sh")
  fi
  env "${vars[@]}" "${helper[@]}" timed "$dir/$name.time.json" --control-dir "$control" -- "${cmd[@]}" || status=$?
  rm -rf "$control"
  return "$status"
}

# The figures of a measured run NAME into the row: NAME_s (SECONDS), NAME_cpu_s_per_host and, when counted,
# NAME_module_runs_per_host (the busiest host's) and NAME_ssh (every kind: max/mean/min over the hosts).
figures=()
record() {  # record NAME SECONDS
  local name=$1 runs
  figures+=("${name}_s=$2" "${name}_cpu_s_per_host=$("${helper[@]}" cpu "$dir/$1.time.json" "$n")")
  if [ "$counting" = 1 ]; then
    runs="$("${helper[@]}" runs "$dir/$name.ssh.log" "$n")" ||
      fail "$dir/$name.ssh.log" "$name: the ssh log does not count the $n hosts"
    figures+=("${name}_module_runs_per_host=$("${helper[@]}" runs "$dir/$name.ssh.log" "$n" --max module)"
              "${name}_ssh=$runs")
  fi
}

noop_run() {  # noop_run NAME ARGS...: a re-run of deploy.yml measured as NAME; it must change nothing on any host
  local name=$1 t; shift
  deploy_cmd "$n" "$@"
  t=$(now); measure "$name" > "$dir/$name.log" 2>&1 || fail "$dir/$name.log" "$name: the no-op re-run failed"
  record "$name" "$(since "$t")"
  "${helper[@]}" recap "$dir/$name.log" "$n" --no-change ||
    fail "$dir/$name.log" "$name: the no-op re-run changed something: not idempotent"
}

drift_run() {  # drift_run NAME ARGS...: a drift check of every host measured as NAME (with its report); must be clean
  local name=$1 t rc=0; shift
  drift_cmd "$@"
  t=$(now)
  measure "$name" > "$dir/$name.json" 2> "$dir/$name.err" || true   # the reporter judges the run
  python scripts/drift_report.py "$dir/$name.json" --json "$dir/$name-report.json" --quiet || rc=$?
  record "$name" "$(since "$t")"
  [ "$rc" = 0 ] || fail "$dir/$name-report.json" "$name: drift check not clean right after a converge (exit $rc)"
  # Under Mitogen the same checks as the linear strategy's run of the same path, or the row says they differ
  # (ansible.posix.json writes a task object per host for a strategy other than linear, and has lost results so).
  if [ "$name" != "${name%_mitogen}" ]; then
    if "${helper[@]}" same-report "$dir/${name%_mitogen}-report.json" "$dir/$name-report.json" \
         2> "$dir/$name-report-diff.txt"; then
      figures+=("${name}_report_as_linear=true")
    else
      figures+=("${name}_report_as_linear=false")
      echo "bench-fleet: WARNING: $name's drift report differs from ${name%_mitogen}'s ($dir/$name-report-diff.txt)" >&2
    fi
  fi
}

fail() {  # fail LOG MESSAGE
  tail -n 40 "$1" >&2
  echo "bench-fleet: $2 (log: $1)" >&2
  exit 1
}

mitogen=() mitogen_version=""
if [ "${FLEET_BENCH_MITOGEN:-0}" = 1 ]; then   # installed (once) before any host starts, so a failure costs nothing
  mitogen=(ANSIBLE_STRATEGY_PLUGINS="$("$LAB_DIR/mitogen.sh")" ANSIBLE_STRATEGY=mitogen_linear)
  mitogen_version="$(awk '/^mitogen==/ {sub(/^mitogen==/, "", $1); print $1}' "$LAB_DIR/mitogen-requirements.txt")"
fi
full=(-e deploy_fast_path=false)   # the full roles; the default is the fast path

for n in "${sizes[@]}"; do
  export FLEET_SIZE=$n
  dir="$logs/$n"
  rm -rf "$dir"; mkdir -p "$dir"
  export LAB_HOSTS; LAB_HOSTS="$(lab_hosts "$n")"
  echo "== $n hosts: $LAB_HOSTS"
  load_before="$(loadavg)" mem_before="$(used_mib)"
  "$LAB_DIR/down.sh" > /dev/null
  t=$(now); "$LAB_DIR/up.sh" > "$dir/up.log" 2>&1 || fail "$dir/up.log" "lab up failed"; up=$(since "$t")

  deploy_cmd "$n"
  t=$(now); "${cmd[@]}" > "$dir/converge.log" 2>&1 || fail "$dir/converge.log" "first converge failed"
  first=$(since "$t")
  "${helper[@]}" recap "$dir/converge.log" "$n" || fail "$dir/converge.log" "first converge: bad recap"
  mem_converged="$(used_mib)"

  figures=() counting=1 run_env=()
  noop_run noop
  noop_run noop_full "${full[@]}"
  drift_run drift
  drift_run drift_full "${full[@]}"
  default_kex=(-e '{"ansible_ssh_extra_args": ""}')
  noop_run noop_default_kex "${default_kex[@]}"
  drift_run drift_default_kex "${default_kex[@]}"
  if [ ${#mitogen[@]} -gt 0 ]; then
    counting=0 run_env=("${mitogen[@]}")
    noop_run noop_mitogen
    noop_run noop_full_mitogen "${full[@]}"
    drift_run drift_mitogen
    drift_run drift_full_mitogen "${full[@]}"
    counting=1 run_env=()
    figures+=(mitogen_version="$mitogen_version")
  fi

  "${helper[@]}" row hosts="$n" first_converge_s="$first" up_s="$up" "${figures[@]}" \
    first_converge_plays="$("${helper[@]}" phases "$dir/converge.log")" \
    noop_plays="$("${helper[@]}" phases "$dir/noop.log")" \
    noop_full_plays="$("${helper[@]}" phases "$dir/noop_full.log")" \
    loadavg_before="$load_before" loadavg_after="$(loadavg)" cores="$(nproc)" forks="$forks" \
    ssh_kex="$ssh_kex" ssh_kex_default="$ssh_kex_default" \
    mem_used_mib_before="$mem_before" mem_used_mib_converged="$mem_converged" \
    commit="$commit" date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    deploy_args="${extra[*]:-}" >> "$rows"
  "$LAB_DIR/down.sh" > /dev/null
  echo "   first converge ${first} s (lab up ${up} s);" \
       "$(printf '%s\n' "${figures[@]}" | grep -E '^[a-z0-9_]+_(s|module_runs_per_host)=' | tr '\n' ' ')"
  "${helper[@]}" table "$rows" "$json" > /dev/null   # after every size: a run cut short keeps what finished
done

echo "== fleet bench, $(nproc) cores, forks $forks, commit $commit${extra[*]:+, deploy args: ${extra[*]}}"
"${helper[@]}" table "$rows" "$json"
echo "(JSON: $json; logs: $logs/<N>/)"
