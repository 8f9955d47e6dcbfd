#!/usr/bin/env bash
# Gives a lab host a simulated GPU profile: installs the nvidia-smi stand-in as /usr/local/bin/nvidia-smi
# and the profile's replayed outputs as /etc/nvidia-smi-standin/current. Test lab only: no GPU exists in
# CI, so GPUs are simulated at the nvidia-smi boundary; the production roles never install this.
#   lab/set-profile.sh lab-gpu2 rtxpro6000-2x-p2p-blocked     (e.g. for a negative preflight test)
# Works on a running container and on one created but not yet started (up.sh uses that).
set -euo pipefail
. "$(dirname "$0")/env.sh"

profiles="$(find "$LAB_GPU_PROFILES" -mindepth 1 -maxdepth 1 -type d -printf '%f ' 2>/dev/null || true)"
if [ $# -ne 2 ]; then
  echo "usage: $0 HOST PROFILE   (profiles: $profiles)" >&2
  exit 2
fi
host=$1 profile=$2
src="$LAB_GPU_PROFILES/$profile"
[ -d "$src" ] || { echo "set-profile: no GPU profile $src (have: $profiles)" >&2; exit 1; }
[ -f "$LAB_STANDIN" ] || { echo "set-profile: no nvidia-smi stand-in at $LAB_STANDIN" >&2; exit 1; }
status="$(podman container inspect --format '{{.State.Status}}' "$host" 2>/dev/null)" ||
  { echo "set-profile: no container $host (run lab/up.sh)" >&2; exit 1; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/usr/local/bin" "$stage/etc/nvidia-smi-standin"
install -m 0755 "$LAB_STANDIN" "$stage/usr/local/bin/nvidia-smi"
cp -R "$src" "$stage/etc/nvidia-smi-standin/current"
chmod -R u=rwX,go=rX "$stage/etc/nvidia-smi-standin"
echo "$profile" > "$stage/etc/nvidia-smi-standin/lab-profile"   # the name, for checks and humans

# A profile switch must not leave files of the previous profile behind.
if [ "$status" = running ]; then
  podman exec "$host" rm -rf /etc/nvidia-smi-standin
fi
lab_copy_in "$host" "$stage" usr/local/bin/nvidia-smi etc/nvidia-smi-standin
echo "lab: $host has GPU profile $profile"
