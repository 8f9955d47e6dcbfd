#!/usr/bin/env bash
# One rank of a SHARED_GPU_RANKS rehearsal (allreduce_canary_evidence.sh): a one-GPU machine runs the multi-rank
# canaries and microbenchmark with every rank on GPU 0. NCCL refuses two ranks of one host on one GPU ("Duplicate
# GPU detected"), so each rank is made a host of its own (NCCL_HOSTID), and NCCL joins them as shared-gpu-rank.env
# says; FlashInfer's IPC workspaces map each other's buffers on the same GPU. Torchrun starts this with the rank's
# command after it.
set -euo pipefail
set -a
# shellcheck source=shared-gpu-rank.env
. "$(dirname "${BASH_SOURCE[0]}")/shared-gpu-rank.env"
set +a
export LOCAL_RANK=0 NCCL_HOSTID="shared-gpu-rank-${RANK:?torchrun sets RANK}"
exec "$@"
