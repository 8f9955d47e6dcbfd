#!/usr/bin/env python3
"""Run CUDA, a Triton kernel and an NCCL all-reduce under the server unit's system-call filter, on a GPU host.

Evidence for docs/security.md: the groups sglang.service denies (SystemCallFilter=~@clock @module @mount @raw-io
@reboot @swap, SystemCallErrorNumber=EPERM; the names are systemd 252's groups) are loaded with libseccomp before
torch is imported, then the work runs; a denied call is also tried, to show the filter is in force. Prints JSON.
Needs torch with CUDA (and triton) on the host; changes nothing.
    python3 scripts/seccomp_gpu_probe.py
"""
import ctypes
import ctypes.util
import errno
import json
import os
import sys

DENIED = {
    "@clock": ["adjtimex", "clock_adjtime", "clock_adjtime64", "clock_settime", "clock_settime64", "settimeofday"],
    "@module": ["delete_module", "finit_module", "init_module"],
    "@mount": ["chroot", "fsconfig", "fsmount", "fsopen", "fspick", "mount", "mount_setattr", "move_mount",
               "open_tree", "pivot_root", "umount", "umount2"],
    "@raw-io": ["ioperm", "iopl", "pciconfig_iobase", "pciconfig_read", "pciconfig_write", "s390_pci_mmio_read",
                "s390_pci_mmio_write"],
    "@reboot": ["kexec_file_load", "kexec_load", "reboot"],
    "@swap": ["swapoff", "swapon"],
}
SCMP_ACT_ALLOW = 0x7FFF0000


def scmp_act_errno(code):
    return 0x00050000 | (code & 0xFFFF)


def load_filter():
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    denied = []
    for names in DENIED.values():
        for name in names:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a call of this architecture
            if lib.seccomp_rule_add(ctx, scmp_act_errno(errno.EPERM), number, 0) == 0:
                denied.append(name)
    assert lib.seccomp_load(ctx) == 0, "seccomp_load failed"
    return denied


def filter_in_force():
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(165, b"none", b"/nonexistent", b"tmpfs", 0, None)  # mount(2) on x86_64
    return rc == -1 and ctypes.get_errno() == errno.EPERM


def work():
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    out["matmul_ok"] = bool(torch.isfinite((a @ a).float()).all().item())
    import triton  # pylint: disable=import-outside-toplevel
    import triton.language as tl  # pylint: disable=import-outside-toplevel

    @triton.jit
    def add_one(x_ptr, n, block: tl.constexpr):
        offs = tl.program_id(0) * block + tl.arange(0, block)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

    x = torch.zeros(4096, device="cuda")
    add_one[(4,)](x, 4096, block=1024)
    out["triton"] = triton.__version__
    out["triton_ok"] = bool((x == 1).all().item())
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    out["nccl_allreduce_ok"] = bool((t == 1).all().item())
    dist.destroy_process_group()
    graph_input = torch.ones(1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_output = graph_input * 2
    graph.replay()
    out["cuda_graph_ok"] = bool((graph_output == 2).all().item())
    return out


def main():
    denied = load_filter()
    result = {"denied_calls": denied, "filter_in_force": filter_in_force()}
    result.update(work())
    print(json.dumps(result, indent=1))
    ok = result["filter_in_force"] and all(v for k, v in result.items() if k.endswith("_ok"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
