#!/usr/bin/env bash
# Removes every lab container (label sglang-lab), running or stopped. Keeps the image and .cache/lab,
# so the next up.sh starts in seconds. `lab/down.sh --image` also removes the image.
set -euo pipefail
. "$(dirname "$0")/env.sh"

ids="$(podman ps --all --quiet --filter label=sglang-lab)"
if [ -n "$ids" ]; then
  # shellcheck disable=SC2086  # one id per word
  podman rm --force --time 10 $ids > /dev/null
fi
echo "lab: down ($(echo "$ids" | grep -c . || true) containers removed)"
if [ "${1:-}" = --image ]; then
  podman rmi --force "$LAB_IMAGE" > /dev/null 2>&1 || true
  echo "lab: image $LAB_IMAGE removed"
fi
