#!/usr/bin/env bash
# make test (and .ci/run): every test, each stage timed, with independent work overlapped. On 2 cores most of
# the time is waiting (servers starting, the benchmark's paced tokens, pip and apt downloads, systemd), so:
#   1. setup: the toolchain (.venv) and the lab's host packages
#   2. at once: the static checks (scripts/checks.sh), the benchmark client venv (scripts/bench-client.sh) and the
#      lab's image, SSH key and wheelhouse (made here once, so the two molecule scenarios never make them together)
#   3. as soon as each has what it needs: molecule default (the lab; hosts lab-gpu*, its collection built in folders
#      of its own), molecule drift then the per-role tests, and molecule collection (the lab and the client venv;
#      hosts drift-gpu* and user-gpu*), pytest (the client venv; pytest-xdist, one test file per worker)
# molecule default is the longest lane and mostly waits on its hosts; the CPU-bound lanes (checks, pytest) run at a
# lower priority (nice 10) so its tasks are not queued behind them (both still finish well before it).
# Every lane runs to its end even when another failed; each lane's output is printed whole when it ends, and the
# stage lines (wall and CPU seconds) again at the end. CI_PYTEST_WORKERS sets pytest's workers (0: no xdist).
# Where the time goes, as data in reports/ci: pytest's durations (pytest-junit.xml), each Ansible task's of the
# molecule lanes and the per-role tests (task-times/, scripts/ci_callbacks/ci_task_times.py); the end of the log
# (scripts/ci-summary.py) lists the slowest twenty of them, the stages, the machine's CPU use (cpu.txt,
# scripts/ci_cpu_usage.py) and the total against the 30-minute budget.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
export CI_LOGS="$PWD/reports/ci"
rm -rf "$CI_LOGS"
. scripts/ci-stage.sh
ci_start=$SECONDS
# The whole machine's CPU, sampled beside the lanes (the lab hosts' processes are in no stage's figure).
python scripts/ci_cpu_usage.py record "$CI_LOGS/cpu.txt" &
cpu_recorder=$!

ci_stage setup ./scripts/setup-dev.sh
ci_stage host-deps ./lab/install-host-deps.sh

lab_prep() {
  ./lab/build-image.sh && ./lab/ssh-key.sh && ./lab/fill-wheelhouse.sh
}

# Each task's time of the ansible-playbook runs COMMAND makes (nested ones included), under LABEL in
# $CI_LOGS/task-times: only in the lanes named here, so no other test's Ansible output changes.
with_task_times() {
  local label=$1
  shift
  ANSIBLE_CALLBACK_PLUGINS="$PWD/scripts/ci_callbacks" ANSIBLE_CALLBACKS_ENABLED=ci_task_times \
    CI_TASK_TIMES_DIR="$CI_LOGS/task-times" CI_TASK_TIMES_LABEL="$label" "$@"
}

# molecule prints no time per step: ci-molecule-steps.py adds a stage line for each.
molecule_test() {
  with_task_times "molecule-$1" molecule test -s "$1" 2>&1 | python scripts/ci-molecule-steps.py "molecule-$1"
}

pytest_run() {
  local workers=${CI_PYTEST_WORKERS:-2}
  local timing=(--durations=20 --junitxml="$CI_LOGS/pytest-junit.xml" -o junit_duration_report=total)
  if [ "$workers" -gt 0 ]; then
    nice -n 10 python -m pytest -n "$workers" --dist loadfile "${timing[@]}"
  else
    nice -n 10 python -m pytest "${timing[@]}"
  fi
}

ci_lane prep-lab lab_prep
ci_lane prep-bench-client ./scripts/bench-client.sh
ci_lane checks nice -n 10 ./scripts/checks.sh

failed=()
skipped=()
lab_ok=true
# Each role alone (lab/test-roles.sh, tests/roles, on a host of its own) follows drift in its lane: drift ends well
# before default, the longest lane. collection (a user of the tarball, on its own hosts) is a lane of its own: its
# hosts wait on their servers and SSH far more than they use the CPU.
molecule_drift_then_roles() {
  local rc=0
  molecule_test drift || rc=1
  ci_stage roles with_task_times roles ./lab/test-roles.sh || rc=1
  return $rc
}

molecule_lanes=(molecule-default molecule-drift+roles molecule-collection)
ci_lane_wait prep-lab || { failed+=(prep-lab); lab_ok=false; }
if $lab_ok; then
  ci_lane molecule-default molecule_test default  # its gate comes minutes after the client venv is ready
fi
client_ok=true
ci_lane_wait prep-bench-client || { failed+=(prep-bench-client); client_ok=false; }
ci_lane pytest pytest_run   # without the client, the benchmark gate tests fail and say so
if $lab_ok && $client_ok; then
  # Their deploys run the gate from the client venv.
  ci_lane molecule-drift+roles molecule_drift_then_roles
  ci_lane molecule-collection molecule_test collection
fi
for lane in "${molecule_lanes[@]}"; do
  [ -n "${CI_LANE_PIDS[$lane]:-}" ] || skipped+=("$lane")
done

ci_lane_wait checks || failed+=(checks)
ci_lane_wait pytest || failed+=(pytest)
for lane in "${molecule_lanes[@]}"; do
  if [ -n "${CI_LANE_PIDS[$lane]:-}" ]; then
    ci_lane_wait "$lane" || failed+=("$lane")
  fi
done

# The slowest twenty items, the stages and the total against the budget (a figure: the clock fails nothing).
kill "$cpu_recorder" 2> /dev/null && wait "$cpu_recorder" || true
python scripts/ci-summary.py --total "$((SECONDS - ci_start))" || ci_summary
if [ "${#skipped[@]}" -gt 0 ]; then
  echo "== ci: not run (what they need failed): ${skipped[*]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  ci_failure_excerpt "${failed[@]}"
  echo "== ci: FAILED: ${failed[*]}"
  exit 1
fi
echo "== ci: all passed"
