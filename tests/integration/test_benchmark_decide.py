"""sglang_benchmark's decision (entry point decide, check mode) about the recorded baseline: one measured with
other settings, or one that cannot be read, gets a new baseline leg like a host without one, naming why."""
import json

import pytest

from tests.helpers.ansible_run import failure, run_playbook, task_results

PLAYBOOK = "tests/playbooks/benchmark_decide_local.yml"
SETTINGS = {"input_len": 16, "output_len": 128, "num_prompts": 8, "seed": 1, "gate_concurrency": 1,
            "correctness_max_new_tokens": 32}


def decide(tmp_path, baseline_text=None, **variables):
    if baseline_text is not None:
        (tmp_path / "localhost.json").write_text(baseline_text)
    base = {"sglang_layout_home": str(tmp_path / "home"), "sglang_layout_state_dir": str(tmp_path / "home"),
            "sglang_benchmark_baseline_dir": str(tmp_path),
            "sglang_server_model_path": str(tmp_path / "model"), "sglang_benchmark_concurrencies": [1]}
    base.update({"sglang_benchmark_" + k: v for k, v in SETTINGS.items()})
    base.update(variables)
    rc, report = run_playbook(PLAYBOOK, base, check=True)
    assert rc == 0 and failure(report) is None, failure(report)
    [said] = [r["msg"] for name, r in task_results(report) if name == "Say whether this host is measured"]
    return said


def baseline(**settings):
    return json.dumps({"settings": dict(SETTINGS, **settings), "median_output_tok_s": 80.0, "completions": []})


def test_a_baseline_of_these_settings_needs_no_baseline_leg(tmp_path):
    said = decide(tmp_path, baseline())
    assert said.startswith("localhost: would be measured: ") and "baseline leg" not in said, said


@pytest.mark.parametrize("text, why", [
    (baseline(output_len=64, seed=7),
     "the recorded baseline cannot be compared with this run (output_len: 64 recorded, 128 now; "
     "seed: 7 recorded, 1 now)"),
    ("{half a baseline", "the recorded baseline cannot be compared with this run (the baseline cannot be read"),
    (None, "no baseline is recorded yet"),
])
def test_a_baseline_it_cannot_compare_with_is_measured_again(tmp_path, text, why):
    said = decide(tmp_path, text)
    assert "would be measured (with a baseline leg, two extra restarts: " + why in said, said


def test_a_static_baseline_without_correctness_reads_no_baseline_file(tmp_path):
    said = decide(tmp_path, baseline(output_len=64), sglang_benchmark_baseline_mode="static",
                  sglang_benchmark_baseline_tok_s=82.0, sglang_benchmark_correctness=False)
    assert "baseline leg" not in said, said
