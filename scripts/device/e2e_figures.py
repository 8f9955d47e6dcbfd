#!/usr/bin/env python3
"""The README's table of the real SGLang server run through the project's roles on GPUs, one column per setup (1
GPU, 2 GPUs, and the shared-GPU rehearsal of 2 ranks on 1 GPU), generated from the evidence sglang_e2e.py wrote
(tests/fixtures/device/h200x<N>[_shared<R>]_sglang_e2e.json), so the table and the evidence cannot drift apart. A
setup without evidence says "not run"; a leg its run could not run (fusion on one GPU) says why.

    scripts/device/e2e_figures.py            # rewrite the block between the markers in README.md
    scripts/device/e2e_figures.py --check    # exit 1 when the block differs from the fixtures
"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import readme_block  # noqa: E402  pylint: disable=wrong-import-position
from readme_block import FIXTURES, README  # noqa: E402  pylint: disable=wrong-import-position

BEGIN = "<!-- BEGIN REAL SERVER: generated from tests/fixtures/device by scripts/device/e2e_figures.py -->"
END = "<!-- END REAL SERVER -->"
# A column per setup: the fixture's name (h*: an H100 or an H200 ran it) and the column's title ({gpu}: which).
COLUMNS = (("h200x1_sglang_e2e.json", "1 x H200"), ("h200x2_sglang_e2e.json", "2 x H200"),
           ("h*x1_shared2_sglang_e2e.json", "2 ranks on 1 x {gpu} (rehearsal)"),
           ("h*x1_shared2_mla_draft_sglang_e2e.json", "2 ranks on 1 x {gpu}, MLA draft (rehearsal)"))
LEGS = (("spec_fusion", "EAGLE-3 + fusion"), ("spec_nofusion", "EAGLE-3, no fusion"), ("plain", "no speculation"),
        ("control", "control: fusion unit, patch reverted"))
GREEDY = LEGS[:3] + (("spec_fusion_vs_spec_nofusion", "fusion against no fusion"),)


def fixture_name(pattern):
    """The fixture a column's pattern names (the first, sorted, where an H100 and an H200 both ran it)."""
    found = sorted(glob.glob(os.path.join(FIXTURES, pattern)))
    return os.path.basename(found[0]) if found else pattern


def title(pattern, heading):
    name = fixture_name(pattern)
    return heading.format(gpu=name.split("x", 1)[0].upper() if "*" not in name else "H200")


def evidence_of(name):
    return readme_block.load_fixture(FIXTURES, fixture_name(name))


def _start_cell(run):
    first = run.get("first_start")
    if not first:
        return "-"
    spans = sorted(first.get("phases") or [], key=lambda span: -span["seconds"])[:2]
    where = ", ".join("%s to %s %d s" % (span["from"], span["to"], span["seconds"]) for span in spans)
    return "%s: %.0f s to ready%s" % (first["leg"], first["ready_s"], " (longest: %s)" % where if where else "")


def _later_cell(run):
    later = run.get("later_starts_ready_s") or {}
    return ", ".join("%s %.0f s" % (name, seconds) for name, seconds in sorted(later.items())
                     if seconds is not None) or "-"


def _leg_cell(run, name):
    for leg in run["legs"]:
        if leg["name"] == name:
            accept = "" if leg["accept_length"] is None else ", accept length %.2f" % leg["accept_length"]
            calls = "" if leg.get("fused_kernel_calls") is None else "; fused kernel calls %d" % leg[
                "fused_kernel_calls"]
            proof = "; proof %s" % leg["proof"] if leg.get("proof") else ""
            return "%.1f tok/s%s; %d/%d completed%s%s" % (leg["output_tok_s"], accept, leg["completed"],
                                                          leg["num_prompts"], calls, proof)
    for leg in run.get("legs_not_run", []):
        if leg["name"] == name:
            return "not run: %d GPU" % run["tp_size"] if leg["fusion"] else "not run"
    return "-"


def _greedy_cell(run):
    cells = []
    for name, title in GREEDY:
        if name in run["greedy_match"]:
            gate = run["gate_correctness"].get(name, {})
            ties = " (gate, ties counted: %.3f)" % gate["match_rate"] if gate.get("ties") else ""
            cells.append("%s %.3f%s" % (title, run["greedy_match"][name], ties))
    return "; ".join(cells) or "-"


def render():
    runs = {name: evidence_of(name) for name, _title in COLUMNS}

    def row(title, cell):
        return "| %s | %s |" % (title, " | ".join("not run" if runs[name] is None else cell(runs[name])
                                                    for name, _title in COLUMNS))

    lines = ["| real server through the roles | %s |" % " | ".join(title(name, heading) for name, heading in COLUMNS),
             "|---|%s" % ("---|" * len(COLUMNS))]
    lines.append(row("run", lambda r: "%s: sglang %s, flashinfer %s, torch %s" % (
        r["date"][:10], r["sglang"], r["flashinfer"], r["torch"])))
    lines.append(row("model", lambda r: "%s, %d layers, hidden %d, random weights; draft %s" % (
        r["model"]["architecture"], r["model"]["layers"], r["model"]["hidden_size"],
        r["model"]["draft"]["architecture"])))
    lines += [row(title, lambda r, name=name: _leg_cell(r, name)) for name, title in LEGS]
    lines.append(row("greedy outputs equal to the plain leg's", _greedy_cell))
    lines.append(row("first server start on the machine (compile caches empty)", _start_cell))
    lines.append(row("later starts, seconds to ready", _later_cell))
    lines.append(row("`/health_generate`", lambda r: str(r["health_generate_status"])))
    lines.append(row("fusion log line (role's proof)", lambda r: "logged, proof rc %s" % r["fusion_prove_rc"]
                     if r["fusion_log_line"] else "none (no fusion leg)"))
    lines.append(row("stop (SIGTERM to the group)", lambda r: ", ".join(
        "%s %.1f s" % (s["result"], s["seconds"]) for s in r["stops"].values())))
    sources = ", ".join("`%s`" % fixture_name(name) for name, _title in COLUMNS if runs[name] is not None)
    lines += ["", "From `tests/fixtures/device/` (%s); tok/s: median of the runs, one client at a time. The "
                  "rehearsal's two ranks time-slice one GPU and meet over loopback sockets: its throughput figures "
                  "mean nothing; it proves the code paths, not speed." % sources]
    return "\n".join(lines)


def main(argv=None):
    return readme_block.main(argv, __doc__, README, BEGIN, END, render, __file__)


if __name__ == "__main__":
    sys.exit(main())
