"""README.md's table of the real SGLang server run through the roles (scripts/device/e2e_figures.py): generated from
tests/fixtures/device, a column per GPU count, so a new device run cannot land without the table saying what it
measured."""
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
    evidence = figures.evidence_of(1)
    table = rows(figures.render())
    assert table["EAGLE-3 + fusion"] == ["not run: 1 GPU", "not run"]
    plain = next(leg for leg in evidence["legs"] if leg["name"] == "plain")
    assert table["no speculation"][0] == "%.1f tok/s; %d/%d completed" % (
        plain["output_tok_s"], plain["completed"], plain["num_prompts"])
    assert table["`/health_generate`"] == [str(evidence["health_generate_status"]), "not run"]


def test_a_two_gpu_run_takes_its_column_and_a_stale_readme_is_refused(tmp_path, monkeypatch):
    fixtures, readme = sandbox(tmp_path, monkeypatch, figures)
    two = copy.deepcopy(figures.evidence_of(1))
    fused = dict(two["legs"][0], name="spec_fusion", fusion=True, output_tok_s=333.3)
    two.update(tp_size=2, legs=[fused] + two["legs"], legs_not_run=[], fusion_prove_rc=0,
               fusion_log_line="FlashInfer AllReduce Fusion enabled",
               greedy_match=dict(two["greedy_match"], spec_fusion=1.0))
    (fixtures / "h200x2_sglang_e2e.json").write_text(json.dumps(two))
    assert figures.main(["--check"]) == 1
    assert figures.main([]) == 0 and figures.main(["--check"]) == 0
    table = rows(readme.read_text())
    assert table["EAGLE-3 + fusion"][1].startswith("333.3 tok/s")
    assert table["fusion log line (role's proof)"] == ["none (no fusion leg)", "logged, proof rc 0"]
    assert "EAGLE-3 + fusion 1.000" in table["greedy outputs equal to the plain leg's"][1]
    assert "`h200x1_sglang_e2e.json`, `h200x2_sglang_e2e.json`" in readme.read_text()
