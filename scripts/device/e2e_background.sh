#!/usr/bin/env bash
# Runs sglang_e2e.sh phases in the background of the device machine, so that a run longer than one call (a
# shared-GPU rehearsal of two model families: two setups, eight legs) goes on between calls; a later call, made
# within the 30 s the machine stays warm, waits for it and brings back what it wrote.
#   run(carry=[".device/carry"], command="bash scripts/device/e2e_background.sh start 'E2E_MODEL=deepseek_v3
#       E2E_SHARED_GPU_RANKS=2 setup legs' 'E2E_MODEL=qwen3 E2E_SHARED_GPU_RANKS=2 setup legs'; bash
#       scripts/device/e2e_background.sh wait 560")
#   run(command="bash scripts/device/e2e_background.sh wait 570")    # again until it says "all done"
# Each argument of start is one job: VAR=value words for its environment, then the phases, run in order; a job
# whose phase fails ends there and the next job starts. A job that begins with "or" runs only when the one before
# it failed (a fallback). What comes back ($OUT): the bundles and evidence so far,
# the background log, and "all done" or "running" in its last line.
set -uo pipefail
BG=/var/tmp/sglang-e2e/background
mode=${1:?start JOB... | wait SECONDS}
shift
mkdir -p "$BG"
if [ "$mode" = start ]; then
  [ -f "$BG/pid" ] && kill -0 "$(cat "$BG/pid")" 2>/dev/null && { echo "already running: $(cat "$BG/pid")"; exit 2; }
  rm -f "$BG/done"
  printf '%s\n' "$@" > "$BG/jobs"
  setsid bash -c '
    cd "$1"
    failed=0
    while read -r job; do
      envs=(); phases=(); only_if_failed=0
      for word in $job; do
        if [ "$word" = or ]; then only_if_failed=1
        elif [[ $word == *=* ]]; then envs+=("$word"); else phases+=("$word"); fi
      done
      if [ "$only_if_failed" = 1 ] && [ "$failed" = 0 ]; then echo "== skipped (the job before passed): $job"; continue; fi
      failed=0
      for phase in "${phases[@]}"; do
        echo "== $(date -u +%T) $job: $phase"
        env "${envs[@]}" OUT='"$BG"'/bundles E2E_LIMIT_S=3600 bash scripts/device/sglang_e2e.sh "$phase" \
          < /dev/null || { failed=1; break; }
      done
    done < '"$BG"'/jobs
    date -u +%T > '"$BG"'/done' _ "$PWD" > "$BG/log" 2>&1 < /dev/null &
  echo $! > "$BG/pid"
  echo "started $(cat "$BG/pid"): $*"
  exit 0
fi
limit=${1:-560}
while [ ! -f "$BG/done" ] && [ "$SECONDS" -lt "$limit" ]; do sleep 5; done
: "${OUT:=$PWD/.device/out}"
mkdir -p "$OUT"
cp "$BG"/bundles/*.json "$OUT/" 2>/dev/null
cp "$BG/log" "$OUT/background.log"
tar czf "$OUT/out.tgz" -C /var/tmp/sglang-e2e out records 2>/dev/null
# the servers' own logs as they are now, a start still waited for included (its log is copied to out/ only after)
(cd /var/log && tar czf "$OUT/server-logs.tgz" sglang-e2e-*.log 2>/dev/null)
# FlashInfer's trtllm_comm once nvcc built it here (the canary's first load), once: carry it next time as
# .device/e2e-jit/trtllm_comm.so.xz
if [ -f /var/tmp/sglang-e2e/trtllm_comm.so ] && [ ! -f "$BG/kernel-returned" ]; then
  xz -T0 -6 -c /var/tmp/sglang-e2e/trtllm_comm.so > "$OUT/trtllm_comm.so.xz" && touch "$BG/kernel-returned"
fi
tail -5 "$BG/log"
if [ -f "$BG/done" ]; then echo "all done"; else echo "running"; fi
