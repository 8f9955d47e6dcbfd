#!/usr/bin/env bash
# Runs the fusion canary and the all-reduce microbenchmark on a real GPU machine (no network there), and
# writes their JSON and logs to $OUT. Carry .cache/device-fusion-wheels (flashinfer-python 0.6.18,
# apache-tvm-ffi, cuda-tile, nccl4py for CPython 3.12); torch, nvcc and NCCL come from the machine.
#   run(kind="nvidia-h200-x2", carry=[".cache/device-fusion-wheels"], command="bash scripts/device/fusion_probes_evidence.sh")
# NVLink multicast stays off in every process (multicast-off.env, through device-env.sh).
set -uo pipefail
. "$(dirname "$0")/device-env.sh"
multicast_off
OUT=${OUT:-$PWD/.cache/device-out}
mkdir -p "$OUT"
log() { echo "fusion_probes: $*" | tee -a "$OUT/steps.log"; }

py=""
for candidate in /opt/torch/.venv/bin/python3 python3; do
  if "$candidate" -c 'import torch' 2>/dev/null; then py=$candidate; break; fi
done
[ -n "$py" ] || { log "no python with torch"; exit 2; }
SCRATCH=${SCRATCH:-/tmp}  # the installed wheels and FlashInfer's workspace
site=$SCRATCH/fusion-probes-site
"$py" -m pip install -q --no-deps --no-index --target "$site" .cache/device-fusion-wheels/*.whl >> "$OUT/steps.log" 2>&1 ||
  { log "wheel install failed"; exit 2; }
export PYTHONPATH=$site
export FLASHINFER_WORKSPACE_BASE=$SCRATCH/flashinfer-ws
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0}
mkdir -p "$FLASHINFER_WORKSPACE_BASE"
n=$(nvidia-smi -L | wc -l)
{ nvidia-smi -L; nvcc --version | tail -n 2; "$py" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$OUT/machine.txt" 2>&1
log "python $py, $n GPU(s), FLASHINFER_CUDA_ARCH_LIST=$FLASHINFER_CUDA_ARCH_LIST"

run() {  # run NAME TIMEOUT SCRIPT ARGS...: torchrun one process per GPU, log, record wall time and exit code
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$py" -m torch.distributed.run --standalone --nproc-per-node "$n" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  log "$name: rc=$rc wall=$((SECONDS - t0))s"
}
canary=roles/sglang_allreduce/files/allreduce_canary.py
bench=roles/sglang_allreduce/files/allreduce_bench.py
# 1. the canary, first run: includes FlashInfer's JIT build of trtllm_comm (unless SKIP_FIRST_CANARY is set)
[ -n "${SKIP_FIRST_CANARY:-}" ] || run canary 420 "$canary" --hidden 7168 --out "$OUT/canary.json"
# 2. the same, JIT cache warm
run canary_warm 120 "$canary" --hidden 7168 --no-timing --out "$OUT/canary_warm.json"
# 3. it must fail: one rank's input corrupted; and a deliberately wrong reference
run canary_corrupt 120 "$canary" --hidden 7168 --no-timing --corrupt-rank 1 --out "$OUT/canary_corrupt.json"
run canary_wrong_reference 120 "$canary" --hidden 7168 --no-timing --wrong-reference --out "$OUT/canary_wrong_reference.json"
# 4. all-reduce inside CUDA graphs: NCCL defaults (none of the image's NCCL settings; multicast still off), then each
# candidate setting of nccl-bench-candidates.txt
nccl_defaults
run bench_defaults 120 "$bench" --label defaults --out "$OUT/bench_defaults.json"
while read -r name setting; do
  (export "$setting"; run "bench_$name" 120 "$bench" --label "$setting" --out "$OUT/bench_$name.json")
done < <(nccl_candidates)
# One bundle, so a limit on returned files loses nothing.
"$py" - "$OUT" <<'PY' > "$OUT/fusion_probes_evidence.json"
import glob, json, os, sys
out = sys.argv[1]
bundle = {"steps": open(os.path.join(out, "steps.log")).read().splitlines(),
          "machine": open(os.path.join(out, "machine.txt")).read().splitlines(), "results": {}}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    if not path.endswith("fusion_probes_evidence.json"):
        bundle["results"][os.path.basename(path)[:-5]] = json.load(open(path))
print(json.dumps(bundle, indent=1))
PY
log done
