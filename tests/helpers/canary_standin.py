"""A stand-in for allreduce_canary.py at the GPU boundary (no GPU in the tests): it records how the role called it
(arguments and the environment variables the roles set) in calls.jsonl beside itself, and answers as the real
canary's result file does, passed or failed as the file VERDICT beside it says ("garbled": a result cut short)."""
import hashlib
import json
import os

# The real canary the stand-in stands in for, and the timer it imports (their digest is part of every verdict's key).
FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "sglang_allreduce", "files")
SCRIPT_PATHS = (os.path.join(FILES, "allreduce_canary.py"), os.path.join(FILES, "cuda_graph_timer.py"))

SCRIPT = """#!/usr/bin/env python3
# Stand-in for the canary (no GPU here, made for %(path)s): records its call, answers as told by the file VERDICT
# (VERDICT.<path> for one kernel where it exists).
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as handle:
    handle.write(json.dumps({"args": args, "env": {k: os.environ.get(k) for k in (
        "FLASHINFER_AUTOTUNE_DIR", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "RUNTIME_MARK", "FLASHINFER_WORKSPACE_BASE")}})
        + "\\n")
path = args[args.index("--path") + 1] if "--path" in args else "fusion"
told = os.path.join(here, "VERDICT." + path)  # one kernel's verdict, where a test sets it apart
verdict = open(told if os.path.exists(told) else os.path.join(here, "VERDICT")).read().strip()
if verdict == "garbled":  # a result cut short (the process killed while writing it)
    with open(args[args.index("--out") + 1], "w") as handle:
        handle.write('{"tool": "fusion_canary", "path": "%%s", "passed": tr' %% path)
    sys.exit(0)
passed = verdict == "pass"
with open(args[args.index("--out") + 1], "w") as handle:
    json.dump({"tool": "fusion_canary", "path": path, "passed": passed, "summary": "%%s canary %%s on 2 "
               "GPU(s) (stand-in)" %% (path, "PASSED" if passed else "FAILED: tokens 12: 3 NaN/Inf element(s) on rank 1")},
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


def calls(folder, path=None):
    """[{"args", "env"}] of every call so far (of one kernel's canary where ``path`` is given), in order."""
    log = folder / "calls.jsonl"
    made = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [call for call in made if path is None or call["args"][call["args"].index("--path") + 1] == path]


def version():
    """sglang_allreduce's canary version, computed here from the canary and its timer: what the role keys verdicts
    with."""
    digest = hashlib.sha256()
    for path in SCRIPT_PATHS:
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:16]
