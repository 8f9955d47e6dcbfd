# shellcheck shell=bash
# Sourced by scripts/test-all.sh (make test, .ci/run), scripts/checks.sh and scripts/test.sh: a timing line per
# stage, so CI's cost stays visible.
#   ci_stage NAME COMMAND...   runs COMMAND and prints "== ci: stage NAME <wall> s (cpu <user+sys> s)", with
#                              "FAILED (exit N)" when it failed; returns its status. COMMAND is a program or a
#                              function that returns its failure (set -e does not stop a function run here).
#   ci_lane NAME COMMAND...    the same in the background, its output in $CI_LOGS/NAME.log (lanes run at once and
#                              their output would interleave); ci_lane_wait NAME waits, prints that log, returns
#                              its status.
# Every stage line is also appended to $CI_LOGS/stages.txt, which ci_summary prints.
#   ci_failure_excerpt NAME... the lines that say why each named lane failed (Ansible's fatal/failed results and
#                              assertion messages, pytest's failures; the last ones, as expected failures come
#                              earlier), short: CI keeps only the tail of a long output.
CI_LOGS=${CI_LOGS:-$PWD/reports/ci}
export CI_LOGS
mkdir -p "$CI_LOGS"
declare -gA CI_LANE_PIDS=()

ci_stage() {
  local name=$1 rc=0 times line wall user sys TIMEFORMAT='%0R %1U %1S'
  shift
  times=$(mktemp)
  # bash's time keyword: wall and CPU (user, sys) of the command and everything it waited for.
  { time "$@" 2>&3 3>&-; } 3>&2 2> "$times" || rc=$?
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

ci_failure_excerpt() {
  local name
  for name in "$@"; do
    echo "== ci: why $name failed (excerpt of $CI_LOGS/$name.log):"
    # molecule frames its lines ("  │ ") and colours them: both taken off first. An Ansible failure is printed
    # up to its blank line (8 lines at most), pytest's failure lines one by one.
    sed -E $'s/\x1b\\[[0-9;]*m//g; s/^[[:space:]]*\xe2\x94\x82 ?//' "$CI_LOGS/$name.log" 2>/dev/null \
      | awk '/^(fatal|failed): / { left = 8 } /^(FAILED|ERROR) |^E   / { print; next }
             left > 0 { if ($0 == "") left = 0; else { print; left-- } }' \
      | cut -c1-240 | tail -n 24 || true
  done
}
