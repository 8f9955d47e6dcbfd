#!/usr/bin/env bash
# The all-reduce canaries and microbenchmark on a real multi-GPU machine (no network there); JSON and logs to $OUT.
# Carry .cache/device-fusion-wheels: flashinfer-python (0.6.18 there today; >= 0.7.0 for the pcie_ipc rows) with
# apache-tvm-ffi, cuda-tile, nccl4py (and nccl-extensions for 0.7.x) for CPython 3.12, plus the sglang wheel whose
# call the fusion canary mirrors (only its source is read: it is installed --no-deps and never imported).
# torch, nvcc and NCCL come from the machine. Any GPU count (2, 4, 8): one process per GPU nvidia-smi lists.
# NVLink multicast stays off in every process (multicast-off.env, through device-env.sh).
#   run(kind="nvidia-h200-x2", carry=[".cache/device-fusion-wheels"], command="bash scripts/device/allreduce_canary_evidence.sh")
# WHEELS may also be the archive build_wheelhouse.py makes from allreduce-canary-h200-cp312.txt (FlashInfer 0.7.2
# for the pcie_ipc rows, docs/allreduce-paths.md), unpacked here first.
# SGLANG_SITE=<site-packages with sglang/> uses an sglang already there instead of a carried wheel.
# JIT_CACHE=<dir> starts from the FlashInfer JIT cache an earlier run returned (see below); it holds only under the
# SCRATCH it was built with (its build files name the installed sources' paths: another SCRATCH builds again).
# STEPS="name ..." runs only those steps (a device command may run 10 minutes; the first canary JIT-builds
# trtllm_comm, ~270 s, into $SCRATCH/flashinfer-ws, which later calls on the same warm machine reuse).
# SCRATCH (default /tmp) holds the installed wheels and FlashInfer's workspace.
# SHARED_GPU_RANKS=N is a rehearsal, never evidence: N ranks on GPU 0 of a one-GPU machine (shared_gpu_rank.sh), so
# that the multi-rank code (IPC workspaces, SGLang's call, the chains, the checks, the microbenchmark's NCCL and PCIe
# IPC rows in CUDA graphs) runs on real kernels before a multi-GPU machine is lent. The GPU time-slices the ranks:
# the canaries neither time nor tune, the microbenchmark runs few iterations and its figures mean nothing, and what
# happens between GPUs (NVLink/PCIe, ordering across devices) is not tested. The bundle says so.
set -uo pipefail
. "$(dirname "$0")/device-env.sh"
multicast_off
OUT=${OUT:-$PWD/.cache/device-out}
WHEELS=${WHEELS:-.cache/device-fusion-wheels}
SCRATCH=${SCRATCH:-/tmp}
# Results accumulate in $RES across the calls of one warm machine (a run split by STEPS: each call's bundle holds
# every step run so far, the latest of each; steps.log keeps them all), and are copied to $OUT at the end.
RES=$SCRATCH/allreduce-results
mkdir -p "$OUT" "$RES"
# ... of one rank count: what a call with another (SHARED_GPU_RANKS changed on the same warm machine) left is not
# this run's, and is dropped before anything is logged. (.ranks: a dot file, not copied to $OUT.)
gpus=$(nvidia-smi -L | wc -l)
ranks="ranks: ${SHARED_GPU_RANKS:-one per GPU}; GPUs: $gpus"
[ "$(cat "$RES/.ranks" 2> /dev/null)" = "$ranks" ] || { rm -f "$RES"/*; echo "$ranks" > "$RES/.ranks"; }
trap 'cp -p "$RES"/* "$OUT"/ 2> /dev/null' EXIT
log() { echo "allreduce_canary: $*" | tee -a "$RES/steps.log"; }
if [ -f "$WHEELS" ]; then  # a wheelhouse archive from build_wheelhouse.py (allreduce-canary-h200-cp312.txt)
  rm -rf "$SCRATCH/allreduce-wheels" && mkdir -p "$SCRATCH/allreduce-wheels" &&
    tar -xJf "$WHEELS" -C "$SCRATCH/allreduce-wheels" || { log "cannot unpack $WHEELS"; exit 2; }
  WHEELS=$SCRATCH/allreduce-wheels/wheelhouse
fi

py=""
for candidate in /opt/torch/.venv/bin/python3 python3; do
  if "$candidate" -c 'import torch' 2>/dev/null; then py=$candidate; break; fi
done
[ -n "$py" ] || { log "no python with torch"; exit 2; }
site=$SCRATCH/allreduce-canary-site
"$py" -m pip install -q --no-deps --no-index --target "$site" "$WHEELS"/*.whl >> "$RES/steps.log" 2>&1 ||
  { log "wheel install failed"; exit 2; }
# One fixed time for every installed file, so FlashInfer's ninja finds a JIT cache built on another machine from the
# same wheels (JIT_CACHE below) newer than its sources and builds nothing again (pip writes install-time mtimes).
find "$site" -exec touch -h -d @946684800 {} +
sglang_site=${SGLANG_SITE:-$site}
[ -d "$sglang_site/sglang" ] || { log "no sglang/ in $sglang_site: carry the sglang wheel or set SGLANG_SITE"; exit 2; }
export PYTHONPATH=$site
export FLASHINFER_WORKSPACE_BASE=$SCRATCH/flashinfer-ws
export FLASHINFER_AUTOTUNE_DIR=$FLASHINFER_WORKSPACE_BASE/autotune
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0}
mkdir -p "$FLASHINFER_WORKSPACE_BASE"
# JIT_CACHE=<dir>: the flashinfer-jit-cache.tar.xz.part-* an earlier run returned (the first trtllm_comm build takes
# ~270 s of a 10-minute call); unpacked where the JIT looks, with its files' times.
if [ -n "${JIT_CACHE:-}" ]; then
  cat "$JIT_CACHE"/flashinfer-jit-cache.tar.xz.part-* | tar -xJf - -C "$FLASHINFER_WORKSPACE_BASE" &&
    log "JIT cache from $JIT_CACHE unpacked" || log "JIT cache from $JIT_CACHE could not be unpacked: building"
fi
n=$gpus
# what torchrun starts before the script, and the flags a rehearsal adds to each canary and benchmark row
gpus_said="$n GPU(s)" launch=() rehearsal=() bench_rehearsal=()
if [ -n "${SHARED_GPU_RANKS:-}" ]; then
  [[ $SHARED_GPU_RANKS =~ ^[2-8]$ ]] || { log "SHARED_GPU_RANKS must be 2 to 8, not '$SHARED_GPU_RANKS'"; exit 2; }
  gpus_said="$n GPU(s) shared by $SHARED_GPU_RANKS ranks"
  n=$SHARED_GPU_RANKS launch=(--no-python bash scripts/device/shared_gpu_rank.sh "$py") rehearsal=(--no-timing --no-tune)
  bench_rehearsal=(--iters 2 --reps 2)  # the rows' code, NCCL and PCIe IPC (tuned) in graphs; not their figures
fi
{ nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -n 2
  "$py" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  "$py" -c 'import flashinfer, flashinfer.comm as c
print("flashinfer", flashinfer.__version__, "PcieIpcAllReduceWorkspace", hasattr(c, "PcieIpcAllReduceWorkspace"))'
  ls "$site" | grep -i 'dist-info'; } > "$RES/machine.txt" 2>&1
log "python $py, $gpus_said, sglang source $sglang_site, FLASHINFER_CUDA_ARCH_LIST=$FLASHINFER_CUDA_ARCH_LIST"

run() {  # run NAME TIMEOUT SCRIPT ARGS...: torchrun one process per GPU, log, record wall time and exit code
  local name=$1 limit=$2; shift 2
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then return 0; fi
  local t0=$SECONDS extra=("${rehearsal[@]}")
  [ "$1" = "$bench" ] && extra=("${bench_rehearsal[@]}")
  timeout "$limit" "$py" -m torch.distributed.run --standalone --nproc-per-node "$n" "${launch[@]}" "$@" \
    "${extra[@]}" > "$RES/$name.log" 2>&1
  local rc=$?
  log "$name: rc=$rc wall=$((SECONDS - t0))s"
}
canary=roles/sglang_allreduce/files/allreduce_canary.py
bench=roles/sglang_allreduce/files/allreduce_bench.py
draft_tokens=4 max_batch=16  # the speculative shapes: CUDA-graph batches up to max_batch x draft tokens
spec=(--hidden 7168 --draft-tokens "$draft_tokens" --max-batch "$max_batch" --sglang-site "$sglang_site")
jit() {  # jit NAME GENERATOR: build one FlashInfer JIT module the canaries load (needs one GPU only), both at once
  local name=$1 gen=$2 t0=$SECONDS
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" jit_build "* ]]; then return 0; fi
  timeout 480 "$py" -c "import flashinfer.jit.comm as c; c.$gen().build_and_load()" > "$RES/jit_$name.log" 2>&1
  log "jit_$name: rc=$? wall=$((SECONDS - t0))s"
}
# 0. FlashInfer's comm modules built (or found in JIT_CACHE), before the canaries time anything
jit trtllm_comm gen_trtllm_comm_module &
jit pcie_ipc_comm gen_pcie_ipc_comm_module &
wait
# 1. fusion, exactly SGLang's call (first run JIT-builds trtllm_comm unless the cache is warm), speculative shapes
run canary_sglang_call 480 "$canary" "${spec[@]}" --out "$RES/canary_sglang_call.json"
# 2. the same with vLLM's fix (trigger_completion_at_end true for one-shot), to compare with 1
run canary_vllm_trigger 180 "$canary" "${spec[@]}" --no-timing --trigger-completion-at-end vllm --out "$RES/canary_vllm_trigger.json"
# 2b. both calls again with a chain whose every call reads the outputs of the call before it (a PDL-launched consumer:
# where vLLM saw the one-shot kernel's NaN); the plain chain's calls read inputs of their own
run canary_consumer_sglang 180 "$canary" "${spec[@]}" --no-timing --consumer-chain --out "$RES/canary_consumer_sglang.json"
run canary_consumer_vllm 180 "$canary" "${spec[@]}" --no-timing --consumer-chain --trigger-completion-at-end vllm \
  --out "$RES/canary_consumer_vllm.json"
# 3. one-shot and two-shot forced at every size (FlashInfer's heuristic picks one of them per size)
run canary_oneshot 180 "$canary" "${spec[@]}" --no-timing --use-oneshot true --out "$RES/canary_oneshot.json"
run canary_twoshot 180 "$canary" "${spec[@]}" --no-timing --use-oneshot false --out "$RES/canary_twoshot.json"
# 4. it must fail: one rank's input corrupted
run canary_corrupt 180 "$canary" "${spec[@]}" --no-timing --corrupt-rank 1 --out "$RES/canary_corrupt.json"
# 5. PCIe IPC (needs FlashInfer >= 0.7.0; with 0.6.18 the result says it has no PcieIpcAllReduceWorkspace)
run canary_pcie_ipc 480 "$canary" --path pcie_ipc "${spec[@]}" --out "$RES/canary_pcie_ipc.json"
run canary_pcie_ipc_corrupt 180 "$canary" --path pcie_ipc "${spec[@]}" --no-tune --no-timing --corrupt-rank 1 \
  --out "$RES/canary_pcie_ipc_corrupt.json"
# 6. all-reduce inside CUDA graphs: NCCL's defaults (none of the image's NCCL settings, multicast still off) with a
# pcie_ipc column where FlashInfer has it, then each candidate NCCL setting (NCCL alone: PCIe IPC does not read them)
nccl_defaults
# (480 s, as canary_pcie_ipc: both tune PCIe IPC; 4 ranks sharing one GPU took over 300 s to tune)
run bench_defaults 480 "$bench" --label defaults --tokens 1,2,4,8,16,32,64,128 --out "$RES/bench_defaults.json"
while read -r name setting; do
  (export "$setting"; run "bench_$name" 120 "$bench" --label "$setting" --pcie-ipc off --tokens 1,2,4,8,16,32,64,128 \
    --out "$RES/bench_$name.json")
done < <(nccl_candidates)
# The JIT cache for the next machine (its autotune results stay: they belong to this machine's topology), in parts
# a returned file may hold.
XZ_OPT="-6 -T0" tar -C "$FLASHINFER_WORKSPACE_BASE" --exclude=./autotune -cJf - . |
  split -b 15m - "$OUT/flashinfer-jit-cache.tar.xz.part-" &&
  log "JIT cache: $(cat "$OUT"/flashinfer-jit-cache.tar.xz.part-* | wc -c) bytes in $(ls "$OUT"/flashinfer-jit-cache.tar.xz.part-* | wc -l) part(s)"
# One bundle, so a limit on returned files loses nothing.
"$py" - "$RES" "$draft_tokens" "$max_batch" "${SHARED_GPU_RANKS:-0}" <<'PY' > "$RES/allreduce_canary_evidence.json"
import glob, json, os, sys
out = sys.argv[1]
bundle = {"steps": open(os.path.join(out, "steps.log")).read().splitlines(),
          "machine": open(os.path.join(out, "machine.txt")).read().splitlines(),
          "canary_spec": {"draft_tokens": int(sys.argv[2]), "max_batch": int(sys.argv[3])}, "results": {}}
if int(sys.argv[4]):
    bundle["shared_gpu_ranks"] = int(sys.argv[4])
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    if not path.endswith(("allreduce_canary_evidence.json", "evidence_check.json")):
        bundle["results"][os.path.basename(path)[:-5]] = json.load(open(path))
print(json.dumps(bundle, indent=1))
PY
# Whether the bundle is the evidence #15/#16 ask for (a full run; with STEPS it names what did not run).
"$py" scripts/device/allreduce_evidence_check.py "$RES/allreduce_canary_evidence.json" > "$RES/evidence_check.json"
log "evidence check: rc=$? ($(tr -d '\n' < "$RES/evidence_check.json" | cut -c1-400))"
log done
