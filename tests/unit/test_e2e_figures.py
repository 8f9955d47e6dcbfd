"""README.md's table of the real SGLang server run through the roles (scripts/device/e2e_figures.py): generated from
tests/fixtures/device, a column per setup (1 GPU, 2 GPUs, the shared-GPU rehearsal), so a new device run cannot land
without the table saying what it measured."""
import copy
import json

from tests.helpers.readme_sandbox import sandbox
from tests.helpers.script_module import load_file

figures = load_file("scripts/device/e2e_figures.py", "e2e_figures")


def rows(text):
    return {line.split(" | ")[0][2:]: [c.rstrip(" |") for c in line.split(" | ")[1:]]
            for line in text.splitlines() if line.startswith("| ")}


def test_the_readme_block_is_what_the_fixtures_say():
    assert figures.main(["--check"]) == 0, "run scripts/device/e2e_figures.py"


def test_the_one_gpu_run_fills_its_column_and_names_the_leg_it_could_not_run():
    evidence = figures.evidence_of("h200x1_sglang_e2e.json")
    table = rows(figures.render())
    assert table["EAGLE-3 + fusion"] == ["not run: 1 GPU", "not run", "not run", "not run"]
    plain = next(leg for leg in evidence["legs"] if leg["name"] == "plain")
    assert table["no speculation"][0] == "%.1f tok/s; %d/%d completed" % (
        plain["output_tok_s"], plain["completed"], plain["num_prompts"])
    assert table["`/health_generate`"] == [str(evidence["health_generate_status"]), "not run", "not run", "not run"]
    assert table["real server through the roles"] == ["1 x H200", "2 x H200", "2 ranks on 1 x H200 (rehearsal)",
                                                   "2 ranks on 1 x H200, MLA draft (rehearsal)"]


def test_a_two_gpu_run_takes_its_column_and_a_stale_readme_is_refused(tmp_path, monkeypatch):
    fixtures, readme = sandbox(tmp_path, monkeypatch, figures)
    two = copy.deepcopy(figures.evidence_of("h200x1_sglang_e2e.json"))
    fused = dict(two["legs"][0], name="spec_fusion", fusion=True, output_tok_s=333.3)
    two.update(tp_size=2, legs=[fused] + two["legs"], legs_not_run=[], fusion_prove_rc=0,
               fusion_log_line="FlashInfer AllReduce Fusion enabled",
               greedy_match=dict(two["greedy_match"], spec_fusion=1.0))
    (fixtures / "h200x2_sglang_e2e.json").write_text(json.dumps(two))
    assert figures.main(["--check"]) == 1
    assert figures.main([]) == 0 and figures.main(["--check"]) == 0
    table = rows(readme.read_text())
    assert table["EAGLE-3 + fusion"][1].startswith("333.3 tok/s")
    assert table["fusion log line (role's proof)"] == ["none (no fusion leg)", "logged, proof rc 0", "not run", "not run"]
    assert "EAGLE-3 + fusion 1.000" in table["greedy outputs equal to the plain leg's"][1]
    assert "`h200x1_sglang_e2e.json`, `h200x2_sglang_e2e.json`" in readme.read_text()


def test_a_rehearsal_takes_its_own_column_with_the_kernels_calls_the_proof_and_the_control(tmp_path, monkeypatch):
    fixtures, readme = sandbox(tmp_path, monkeypatch, figures)
    run = copy.deepcopy(figures.evidence_of("h200x1_sglang_e2e.json"))
    base = dict(run["legs"][0], fused_kernel_calls=0, proof="passed")
    legs = [dict(base, name="spec_fusion", fusion=True, fused_kernel_calls=736),
            dict(base, name="spec_nofusion"), dict(base, name="plain", speculative=False),
            dict(base, name="control", fusion=True, proof="failed")]
    run.update(tp_size=2, ranks_per_gpu=2, mode="shared-gpu rehearsal", legs=legs, legs_not_run=[],
               greedy_match={"spec_fusion": 1.0, "spec_nofusion": 1.0, "control": 1.0,
                             "spec_fusion_vs_spec_nofusion": 1.0}, gate_correctness={})
    run.update(first_start={"leg": "spec_fusion", "ready_s": 412.4, "phases": [
        {"from": "kv_cache_allocated", "to": "fusion_workspace_ready", "seconds": 325},
        {"from": "cuda_graphs_capturing", "to": "cuda_graphs_captured", "seconds": 48},
        {"from": "weights_loading", "to": "weights_loaded", "seconds": 1}]},
               later_starts_ready_s={"plain": 51.2, "control": 60.0})
    (fixtures / "h100x1_shared2_sglang_e2e.json").write_text(json.dumps(run))  # an H100 ran this one
    assert figures.main([]) == 0
    table = rows(readme.read_text())
    assert table["real server through the roles"][2] == "2 ranks on 1 x H100 (rehearsal)"
    assert table["first server start on the machine (compile caches empty)"][2] == (
        "spec_fusion: 412 s to ready (longest: kv_cache_allocated to fusion_workspace_ready 325 s, "
        "cuda_graphs_capturing to cuda_graphs_captured 48 s)")
    assert table["later starts, seconds to ready"][2] == "control 60 s, plain 51 s"
    assert "fused kernel calls 736; proof passed" in table["EAGLE-3 + fusion"][2]
    assert "fused kernel calls 0; proof failed" in table["control: fusion unit, patch reverted"][2]
    assert table["control: fusion unit, patch reverted"][:2] == ["-", "not run"]
    assert "fusion against no fusion 1.000" in table["greedy outputs equal to the plain leg's"][2]
    assert "throughput figures mean nothing" in readme.read_text()
