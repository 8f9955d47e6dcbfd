"""Start-up hook of a shared-GPU rehearsal's server (test bed only: sglang_e2e.py puts this folder on the PYTHONPATH
of a rehearsal leg's launcher, never in a unit). SGLang, told SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS=1 and
CUDA_VISIBLE_DEVICES=0,1 (index 1 does not exist on a one-GPU machine, so the launcher sees GPU 0), starts rank N with
CUDA_VISIBLE_DEVICES=N; every spawned process (--multiprocessing-fork) is put back on GPU 0 here, before CUDA starts,
and given a host id of its own, since NCCL refuses two ranks of one host on one GPU. Then the next sitecustomize on
sys.path (the image's, if any) runs as it would have."""
import importlib.util
import os
import sys


def _spawned():
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            return b"--multiprocessing-fork" in handle.read().split(b"\0")
    except OSError:
        return "--multiprocessing-fork" in sys.argv


if os.environ.get("E2E_SHARED_GPU_RANKS") and _spawned():
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    os.environ["NCCL_HOSTID"] = "shared-gpu-rank-%d" % os.getpid()


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or ".")
        path = os.path.join(folder, "sitecustomize.py")
        if folder != here and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_next_sitecustomize", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


_chain()
