"""Which all-reduce path a start runs, read from its flags and environment as SGLang would: fusion when its
workspace comes up, PCIe IPC when SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is on at a world size it builds, else NCCL.
The benchmark gate's `auto` trials tell the paths apart by what `allreduce_paths` changes for each."""

PCIE_SWITCH = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"  # sglang/srt/environ.py (0.5.21+), an EnvBool
PCIE_WORLD_SIZES = (2, 4, 8)  # _SUPPORTED_WORLD_SIZES of SGLang's and FlashInfer's pcie_ipc_ar.py


def fusion_variant(server):
    wanted = server.cfg["fusion_log"]
    if server.fusion_backend is None:
        return "none" if wanted is None else wanted
    return "enabled" if wanted is None else wanted


def fusion_backend_error(server):
    """flashinfer_comm_fusion._resolve_backend() on an SM120 host whose G2 gate admits it (the patched lab)."""
    backend, multi_node = server.fusion_backend, server.args.nnodes > 1
    if backend == "cutedsl":
        return "FlashInfer allreduce fusion cutedsl backend requires a Blackwell system."
    if backend == "auto" and multi_node:
        return "FlashInfer allreduce fusion does not support multi-node on non-Blackwell systems."
    if backend == "trtllm" and multi_node:
        return "FlashInfer allreduce fusion trtllm backend supports single-node only."
    if backend == "mnnvl":
        return "FlashInfer allreduce fusion mnnvl backend requires a Blackwell system, or SM90 single-node."
    return None


def allreduce_path(server, environ):
    """The all-reduce path this start runs: fusion when its workspace came up (a fusion flag, TP > 1, the 'enabled'
    variant), PCIe IPC when SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is true at a world size it supports. The stand-in does
    not model FlashInfer < 0.7.0 (where SGLang falls back to NCCL): the lab's candidates never include pcie_ipc."""
    fusion = server.fusion_backend is not None and server.args.tp_size > 1 and fusion_variant(server) == "enabled"
    ipc = (environ.get(PCIE_SWITCH, "").strip().lower() in ("1", "true", "yes", "y", "on")
           and server.args.tp_size in PCIE_WORLD_SIZES)
    return "+".join(name for name, on in (("fusion", fusion), ("pcie_ipc", ipc)) if on) or "nccl"

