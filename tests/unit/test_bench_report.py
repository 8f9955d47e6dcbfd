"""The benchmark gate's artifacts (module_utils/bench_report.py): run JSON, history, Markdown, PNG."""
import json
import os

from ansible.module_utils import bench_gate as bg
from ansible.module_utils import bench_report as br


def record(stamp, rate, passed, **extra):
    runs = [{"concurrency": 1, "repeat": i, "rc": 0, "error": None,
             "result": {"completed": 2, "output_throughput": rate + i, "median_ttft_ms": 10.0, "median_tpot_ms": 7.5,
                        "accept_length": 2.0}} for i in (1, 2, 3)]
    summary = bg.summarize(runs, 2)
    verdict = bg.judge(summary, 1, 80.0, 5.0)
    rec = dict(verdict, stamp=stamp, host="h1", passed=passed, summary=summary,
               message=bg.describe("h1", verdict, summary, "static"), spread_pct=summary[1]["spread_pct"],
               accept_length=2.0, match_rate=1.0, venv="/opt/sglang/venvs/a", sglang="0.5.21", rolled_back=None)
    rec.update(extra)
    return rec


def test_artifacts_accumulate_history_and_render_a_png(tmp_path):
    first = br.write_artifacts(str(tmp_path), "h1", record("20261130T100000Z", 120.0, True))
    second = br.write_artifacts(str(tmp_path), "h1", record("20261130T110000Z", 60.0, False))
    assert first["summary"] == second["summary"]
    history = br.read_history(second["history"])
    assert [row["passed"] for row in history] == [True, False]
    assert history[1]["median_tok_s"] == 62.0
    assert sorted(os.listdir(str(tmp_path / "h1" / "runs"))) == ["20261130T100000Z.json", "20261130T110000Z.json"]
    with open(second["run"], encoding="utf-8") as handle:
        assert json.load(handle)["message"].startswith("h1: benchmark gate")
    with open(second["chart"], "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(second["summary"], encoding="utf-8") as handle:
        text = handle.read()
    assert "**FAILED**" in text and "| 1 | 3/3 | 62.0 |" in text
    assert text.index("20261130T110000Z | FAIL") < text.index("20261130T100000Z | pass")  # newest first


def test_a_torn_history_line_is_skipped_not_fatal(tmp_path):
    folder = tmp_path / "h1"
    folder.mkdir()
    (folder / "history.jsonl").write_text('{"stamp": "a", "passed": true}\n{"stamp": "b", "pass')
    paths = br.write_artifacts(str(tmp_path), "h1", record("c", 100.0, True))
    assert [row["stamp"] for row in br.read_history(paths["history"])] == ["a", "c"]


def test_the_allreduce_trials_are_tabled_and_charted_side_by_side(tmp_path):
    allreduce = {"winner": "nccl", "why": "nccl is the fastest correct path (135.0 tok/s, bar 84.0 tok/s)",
                 "paths": [{"path": "fusion", "passed": False, "median_tok_s": 300.0, "bar_tok_s": 84.0,
                            "baseline_tok_s": 80.0, "match_rate": 0.1,
                            "failures": ["correctness: greedy completions match the baseline's 10.0 % < 75.0 %"]},
                           {"path": "nccl", "passed": True, "median_tok_s": 135.0, "bar_tok_s": 84.0,
                            "baseline_tok_s": 80.0, "match_rate": 1.0, "failures": []}]}
    paths = br.write_artifacts(str(tmp_path), "h1", record("20261201T060000Z", 135.0, True, allreduce=allreduce))
    with open(paths["summary"], encoding="utf-8") as handle:
        text = handle.read()
    assert "Chosen: **nccl**" in text
    assert "| fusion | FAIL | 300.0 | 84.0 | 80.0 | 10.0 | correctness: greedy" in text
    assert "| nccl (chosen) | pass | 135.0 | 84.0 | 80.0 | 100.0 | - |" in text
    with open(paths["allreduce_chart"], "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert br.read_history(paths["history"])[-1]["allreduce_path"] == "nccl"
    with open(paths["run"], encoding="utf-8") as handle:
        assert [row["path"] for row in json.load(handle)["allreduce"]["paths"]] == ["fusion", "nccl"]
