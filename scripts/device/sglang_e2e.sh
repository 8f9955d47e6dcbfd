#!/usr/bin/env bash
# The real SGLang server on the device machine through the project's roles (see sglang_e2e.py), one phase a call:
#   run(kind="nvidia-h200-x2", carry=[".device/carry"], command="E2E_LIMIT_S=585 bash scripts/device/sglang_e2e.sh setup")
#   run(command="E2E_LIMIT_S=585 bash scripts/device/sglang_e2e.sh legs")   # within the 30 s the machine stays warm
# On one GPU (no fusion canary, no trtllm_comm JIT build) one command chains both (scripts/device/README.md).
# .device/carry/wheelhouse.tar.xz is made here by scripts/device/build_wheelhouse.py. What comes back: $OUT/
# bundle-<phase>.tgz (logs, state, bench results, the evidence) and, after setup, FlashInfer's trtllm_comm if it was
# built here (trtllm_comm.so.xz: carry it next time as .device/e2e-jit/trtllm_comm.so.xz; E2E_JIT=build builds it on
# one GPU, see sglang_e2e.py).
set -uo pipefail
phase=${1:?phase: setup, legs [N...] or evidence}
: "${OUT:=$PWD/.device/out}"
mkdir -p "$OUT" /var/tmp/sglang-e2e/out
# NVLink multicast stays off on this shared machine, in every process started from here (multicast-off.env).
. "$(dirname "$0")/device-env.sh"
multicast_off
export PYTHONUNBUFFERED=1
py=/opt/torch/.venv/bin/python3; [ -x "$py" ] || py=$(command -v python3)
# The roles run their stdlib helpers with /usr/bin/python3 (a Debian host has it); link the image's if absent.
[ -x /usr/bin/python3 ] || { ln -s "$py" /usr/bin/python3 && echo "linked /usr/bin/python3 -> $py"; }
{ date -u; nvidia-smi -L; ls -l /dev/nvidia* | head; command -v nvcc systemctl runuser useradd; ls -l /usr/bin/python3; } \
  > /var/tmp/sglang-e2e/out/machine-$phase.txt 2>&1
timeout "${E2E_LIMIT_S:-560}" "$py" scripts/device/sglang_e2e.py "$@" 2>&1 | tee /var/tmp/sglang-e2e/out/driver-$phase.log
rc=${PIPESTATUS[0]}
tar czf "$OUT/bundle-$phase.tgz" -C /var/tmp/sglang-e2e out
# FlashInfer's trtllm_comm if nvcc built it here, for the next machine to carry as .device/e2e-jit/trtllm_comm.so.xz
[ -f /var/tmp/sglang-e2e/trtllm_comm.so ] && [ "$phase" = setup ] &&
  xz -T0 -6 -c /var/tmp/sglang-e2e/trtllm_comm.so > "$OUT/trtllm_comm.so.xz"
cp /var/tmp/sglang-e2e/out/*/h[0-9]*x*_sglang_e2e.json /var/tmp/sglang-e2e/out/*/h[0-9]*x*_sglang_greedy_logprobs.json \
  "$OUT/" 2>/dev/null
echo "sglang_e2e $phase: rc=$rc"
exit "$rc"
