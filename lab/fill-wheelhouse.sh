#!/usr/bin/env bash
# Download (once) every wheel the lab locks pin into .cache/lab/wheelhouse, which the lab hosts mount
# read-only and install from offline (pip --no-index --find-links): the offline/enterprise path, for real.
set -euo pipefail
cd "$(dirname "$0")/.."
house=.cache/lab/wheelhouse
mkdir -p "$house"
# One filler at a time (labs starting at once, as molecule default and drift do in CI): pip download writes a wheel
# in place, and a second filler would take a half-written one for a cached one.
exec 9> .cache/lab/.fill-wheelhouse.lock
flock 9
for lock in lab/locks/lab-a.txt lab/locks/lab-b.txt; do
  grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==' "$lock" | while read -r pin; do
    name=${pin%%==*}; version=${pin#*==}
    if ! ls "$house/${name//-/_}-$version-"*.whl >/dev/null 2>&1; then
      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_34_x86_64 --platform any -d "$house" "$pin"
    fi
  done
done
# The sglang_model role's hf client (its pinned sglang_model_hf_packages, with what they need): the lab's hf source
# builds that venv offline from here.
grep -E '^  - [A-Za-z0-9_.-]+==' roles/sglang_model/defaults/main.yml | sed 's/^  - //' | while read -r pin; do
  name=${pin%%==*}; version=${pin#*==}
  if ! ls "$house/${name//-/_}-$version-"*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d "$house" "$pin"
  fi
done
ls "$house"

# A real nvcc for the lab hosts (NVIDIA's nvidia-cuda-nvcc wheel from PyPI, the compiler alone): gpu_preflight
# checks for nvcc >= 12.8 because FlashInfer JIT-builds the SM120 kernel. up.sh mounts it at /usr/local/cuda.
cuda=.cache/lab/cuda
nvcc_version=13.0.88
if [ ! -x "$cuda/bin/nvcc" ] || ! "$cuda/bin/nvcc" --version | grep -q "V$nvcc_version"; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cuda-nvcc==$nvcc_version"
  (cd "$tmp" && python3 -m zipfile -e nvidia_cuda_nvcc-*.whl unpacked)
  rm -rf "$cuda" && mkdir -p "$(dirname "$cuda")"
  mv "$tmp/unpacked/nvidia/cu13" "$cuda"
  chmod -R a+rX "$cuda" && chmod a+x "$cuda"/bin/*
  rm -rf "$tmp"
fi
"$cuda/bin/nvcc" --version | tail -n 1
