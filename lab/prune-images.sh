#!/usr/bin/env bash
# Removes earlier builds of the lab image (untagged, label lab.build-hash) that no container uses.
# Touches no other image on the machine.
set -euo pipefail
. "$(dirname "$0")/env.sh"
for id in $(podman images --quiet --filter dangling=true --filter label=lab.build-hash); do
  podman rmi "$id" > /dev/null 2>&1 || true   # still used by a container: kept for now
done
