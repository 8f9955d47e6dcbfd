# Sourced by the lab scripts (and by you: `. lab/env.sh`, then e.g. `lab_ssh 2221`): where the lab keeps
# things and how podman is configured. Every LAB_* value can be overridden from the environment.
# shellcheck shell=bash
LAB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LAB_ROOT="$(dirname "$LAB_DIR")"
export LAB_DIR LAB_ROOT
# podman reads only this file (runc, ulimits that fit this host), never the host's global settings.
export CONTAINERS_CONF="${LAB_CONTAINERS_CONF:-$LAB_DIR/containers.conf}"
export LAB_CACHE="${LAB_CACHE:-$LAB_ROOT/.cache/lab}"
export LAB_IMAGE="${LAB_IMAGE:-localhost/sglang-lab:bookworm}"
# The label every lab container carries; down.sh without LAB_HOSTS removes all containers with it. A lab that must
# survive that (the fleet benchmark, while molecule's default scenario tears down its own) uses its own label.
export LAB_LABEL="${LAB_LABEL:-sglang-lab}"
export LAB_SSH_KEY="${LAB_SSH_KEY:-$LAB_CACHE/ssh/id_ed25519}"
# Copied into every host at start: HTTPS from inside the containers goes through an inspecting proxy
# on these machines (as on many corporate GPU clusters), so pip and curl must trust the same roots.
export LAB_CA_BUNDLE="${LAB_CA_BUNDLE:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
# Wheels for offline pip installs in the lab (lab/fill-wheelhouse.sh), mounted read-only in every host.
export LAB_WHEELHOUSE="${LAB_WHEELHOUSE:-$LAB_CACHE/wheelhouse}"
export LAB_WHEELHOUSE_MOUNT=/srv/lab-wheelhouse
# A real nvcc (the nvidia-cuda-nvcc wheel, unpacked by fill-wheelhouse.sh), mounted at /usr/local/cuda.
export LAB_CUDA="${LAB_CUDA:-$LAB_CACHE/cuda}"
# GPU simulation, test lab only (no GPU can exist in CI): an nvidia-smi stand-in that replays a GPU
# profile directory. Never part of the production roles.
export LAB_STANDIN="${LAB_STANDIN:-$LAB_DIR/standins/nvidia-smi}"
# The revision the lab's model mirror serves the stand-in models under (lab/install-standins.sh); the lab inventory's
# sglang_model_models pin it (tests/unit/test_lab_models.py holds the two equal).
export LAB_MODEL_REVISION=standin-1
# The commit the lab's Hugging Face Hub stand-in (lab-hf-hub.service) serves the stand-in draft at; the inventory's
# hf source pins it (tests/unit/test_lab_models.py).
export LAB_DRAFT_COMMIT=5eed0d0c0ffee0d15ea5e000000000000000d1af
export LAB_GPU_PROFILES="${LAB_GPU_PROFILES:-$LAB_DIR/gpu-profiles}"
# Hosts: NAME:SSH_PORT:GPU_PROFILE, space separated; SSH is published on 127.0.0.1 only. The ports
# are repeated in inventories/lab/hosts.yml.
export LAB_HOSTS="${LAB_HOSTS:-lab-gpu1:2221:${LAB_GPU1_PROFILE:-rtxpro6000-8x-pcie} lab-gpu2:2222:${LAB_GPU2_PROFILE:-rtxpro6000-2x-pcie}}"

# ssh to a lab host (containers get new host keys on every start: nothing to pin).
LAB_SSH_OPTS=(-i "$LAB_SSH_KEY" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
              -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=5 -o IdentitiesOnly=yes)
# Copies PATH... of STAGE into HOST's / as root (only those paths: no directory above them changes). podman cp from a
# pipe now and then fails while the machine is busy ("passing bulk input to subprocess: write |1: broken pipe"):
# the archive is made and sent again, three tries in all.
lab_copy_in() {  # lab_copy_in HOST STAGE PATH...
  local host=$1 stage=$2 try
  shift 2
  for try in 1 2 3; do
    tar -C "$stage" --owner=0 --group=0 --numeric-owner -c "$@" | podman cp - "$host:/" && return 0
    echo "lab: copying $* into $host failed (try $try of 3)" >&2
    sleep 2
  done
  return 1
}

lab_ssh() {  # lab_ssh PORT [COMMAND...]
  local port=$1; shift
  ssh "${LAB_SSH_OPTS[@]}" -p "$port" root@127.0.0.1 "$@"
}
