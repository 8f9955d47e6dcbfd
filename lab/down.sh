#!/usr/bin/env bash
# Removes lab containers, running or stopped. Keeps the image and .cache/lab, so the next up.sh starts in
# seconds. `lab/down.sh --image` also removes the image.
#   LAB_HOSTS set in the environment   only the containers it names (another lab on the same machine, e.g.
#                                      molecule/drift's drift-gpu1/drift-gpu2, keeps running)
#   LAB_HOSTS unset                    every lab container (label LAB_LABEL, default sglang-lab)
set -euo pipefail
only_named="${LAB_HOSTS:-}"   # read before env.sh, which gives LAB_HOSTS its default
. "$(dirname "$0")/env.sh"

if [ -n "$only_named" ]; then
  ids=""
  for spec in $only_named; do
    name="${spec%%:*}"
    # Only a lab container of that exact name (label and name both match).
    ids+="$(podman ps --all --quiet --filter "label=$LAB_LABEL" --filter "name=^${name}\$")"$'\n'
  done
  ids="$(echo "$ids" | sed '/^$/d')"
else
  ids="$(podman ps --all --quiet --filter "label=$LAB_LABEL")"
fi
if [ -n "$ids" ]; then
  # shellcheck disable=SC2086  # one id per word
  podman rm --force --time 10 $ids > /dev/null
fi
echo "lab: down ($(echo "$ids" | grep -c . || true) containers removed)"
if [ "${1:-}" = --image ]; then
  podman rmi --force "$LAB_IMAGE" > /dev/null 2>&1 || true
  echo "lab: image $LAB_IMAGE removed"
fi
