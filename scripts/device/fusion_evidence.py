"""What a real server's run says about the fused all-reduce, read from its files (pure; sglang_e2e.py records it,
tests/unit/test_fusion_evidence.py holds it to real lines).

  api_call_counts(lines)   FlashInfer's API log (FLASHINFER_LOGLEVEL=1): calls per API name
  fused_kernel_calls(c)    the fused all-reduce + residual + RMSNorm calls among them
  proof_outcome(rc, text)  ("passed" | "failed", message) of the role's proof, from its ansible-playbook output
"""
import json
import re

# SGLang's start-up lines that say the fused path was set up, or turned off (flashinfer_comm_fusion.py)
FUSION_ON = ("FlashInfer AllReduce Fusion enabled",)
FUSION_OFF = ("Skipping allreduce fusion", "Disabling flashinfer allreduce fusion", "forcibly disabled")
FUSED_KERNEL = "allreduce_fusion"  # flashinfer.comm.allreduce_fusion: the one kernel the fusion path calls
_CALL = re.compile(r"FlashInfer API Call: ([A-Za-z0-9_.]+)")
_FAILED = re.compile(r"^fatal: \[[^\]]*\]: FAILED! => (\{.*\})\s*$")


def api_call_counts(lines):
    """{API name: calls} of FlashInfer's API log lines ("<time> FlashInfer API Call: <name>")."""
    counts = {}
    for line in lines:
        match = _CALL.search(line)
        if match:
            name = match.group(1).rsplit(".", 1)[-1]
            counts[name] = counts.get(name, 0) + 1
    return counts


def fused_kernel_calls(counts):
    return int((counts or {}).get(FUSED_KERNEL, 0))


def proof_outcome(rc, output):
    """The role's proof as ansible-playbook printed it: rc 0 passed; otherwise the failed task's own message."""
    if rc == 0:
        return "passed", "the role's proof passed"
    for line in reversed(output.splitlines()):
        match = _FAILED.match(line.strip())
        if not match:
            continue
        try:
            result = json.loads(match.group(1))
        except ValueError:
            return "failed", match.group(1)[:2000]
        return "failed", " ".join(str(result.get("msg") or result).split())[:2000]
    return "failed", "ansible-playbook ended with rc %s and no failed task's message" % rc
