#!/usr/bin/env bash
# The lab's one SSH key pair (root's authorized_keys in every host, the inventories' private key), made once.
# Under a lock: two labs starting at once (molecule default and drift in CI) must not both make it.
set -euo pipefail
. "$(dirname "$0")/env.sh"
mkdir -p "$(dirname "$LAB_SSH_KEY")"
chmod 700 "$(dirname "$LAB_SSH_KEY")"
exec 9> "$(dirname "$LAB_SSH_KEY")/.lock"
flock 9
if [ ! -s "$LAB_SSH_KEY" ]; then
  ssh-keygen -q -t ed25519 -N '' -C sglang-lab -f "$LAB_SSH_KEY"
fi
