# Sourced by the device scripts (bash): the environment every GPU process they start must have.
#   multicast_off   export multicast-off.env's values (NVLink multicast off on the shared machines)
#   nccl_defaults   unset every NCCL_* setting this shell has (the image's too), then multicast_off again: NCCL's
#                   defaults, except that multicast never comes back on
#   nccl_candidates print nccl-bench-candidates.txt's rows, "name setting", comments and blank lines left out
__device_env_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

multicast_off() {
  set -a
  # shellcheck source=multicast-off.env
  . "$__device_env_dir/multicast-off.env"
  set +a
}

nccl_defaults() {
  local name
  for name in $(env | grep -o '^NCCL_[A-Za-z0-9_]*'); do unset "$name"; done
  multicast_off
}

nccl_candidates() {
  grep -v -e '^#' -e '^[[:space:]]*$' "$__device_env_dir/nccl-bench-candidates.txt"
}
