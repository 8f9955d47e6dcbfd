"""A stand-in for fusion_canary.py at the GPU boundary (no GPU in the tests): it records how the role called it
(arguments and the environment variables the roles set) in calls.jsonl beside itself, and answers as the real
canary's result file does, passed or failed as the file VERDICT beside it says."""
import hashlib
import json
import os

# The real canary the stand-in stands in for (its digest is part of every verdict's key).
SCRIPT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "fusion_patch", "files",
                           "fusion_canary.py")

SCRIPT = """#!/usr/bin/env python3
# Stand-in for the %(path)s canary (no GPU here): records its call, answers as told by the file VERDICT.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as handle:
    handle.write(json.dumps({"args": args, "env": {k: os.environ.get(k) for k in (
        "FLASHINFER_AUTOTUNE_DIR", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "RUNTIME_MARK", "FLASHINFER_WORKSPACE_BASE")}})
        + "\\n")
passed = open(os.path.join(here, "VERDICT")).read().strip() == "pass"
with open(args[args.index("--out") + 1], "w") as handle:
    json.dump({"tool": "fusion_canary", "path": "%(path)s", "passed": passed, "summary": "%(path)s canary %%s on 2 "
               "GPU(s) (stand-in)" %% ("PASSED" if passed else "FAILED: tokens 12: 3 NaN/Inf element(s) on rank 1")},
              handle)
sys.exit(0 if passed else 3)
"""


def make(folder, path):
    """The stand-in for the canary of ``path`` (fusion or pcie_ipc) in ``folder``, answering "pass" until told."""
    folder.mkdir()
    (folder / "canary").write_text(SCRIPT % {"path": path})
    (folder / "canary").chmod(0o755)
    (folder / "VERDICT").write_text("pass")
    return folder


def calls(folder):
    """[{"args", "env"}] of every call so far, in order."""
    path = folder / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def version():
    """fusion_patch's canary_version, computed here from the script: what the roles key verdicts with."""
    with open(SCRIPT_PATH, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]
