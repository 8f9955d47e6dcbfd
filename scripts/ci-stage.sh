# shellcheck shell=bash
# Sourced by .ci/run, scripts/test-all.sh and scripts/test.sh: stage timings, so CI's cost stays visible.
#   ci_stage NAME COMMAND...       runs COMMAND (a program, or a function that returns its failure: set -e does
#                                  not stop a function run here); prints "== ci: stage NAME <wall> s (cpu <user+sys> s)", FAILED
#                                  with its status when it fails, and returns that status
#   ci_lane NAME COMMAND...        the same in the background, its output in $CI_LOGS/NAME.log (lanes run at once,
#                                  their output would interleave); ci_lane_wait NAME prints that log when it ends
# Every stage line is also appended to $CI_LOGS/stages.txt for the summary at the end (ci_summary).
CI_LOGS=${CI_LOGS:-$PWD/reports/ci}
export CI_LOGS
mkdir -p "$CI_LOGS"
declare -gA CI_LANE_PIDS=()

ci_stage() {
  local name=$1 rc=0 times line wall user sys
  shift
  times=$(mktemp)
  # bash's time keyword: wall and CPU (user, sys) of the command and everything it waited for.
  { TIMEFORMAT='%0R %1U %1S'; time "$@" 2>&3 3>&-; } 3>&2 2> "$times" || rc=$?
  read -r wall user sys < "$times" || true
  rm -f "$times"
  line="== ci: stage $name ${wall:-?} s (cpu $(awk -v u="${user:-0}" -v s="${sys:-0}" 'BEGIN { printf "%.0f", u + s }') s)"
  [ "$rc" -eq 0 ] || line+=" FAILED (exit $rc)"
  echo "$line"
  echo "$line" >> "$CI_LOGS/stages.txt"
  return "$rc"
}

ci_lane() {
  local name=$1
  shift
  echo "== ci: lane $name started (log: $CI_LOGS/$name.log)"
  ci_stage "$name" "$@" > "$CI_LOGS/$name.log" 2>&1 < /dev/null &
  CI_LANE_PIDS[$name]=$!
}

ci_lane_wait() {
  local name=$1 rc=0
  wait "${CI_LANE_PIDS[$name]}" || rc=$?
  echo "==== $name: output ($CI_LOGS/$name.log)"
  cat "$CI_LOGS/$name.log"
  echo "==== $name: end of output"
  return "$rc"
}

ci_summary() {
  echo "== ci: stages (wall, cpu):"
  sed 's/^== ci: stage /   /' "$CI_LOGS/stages.txt"
}
