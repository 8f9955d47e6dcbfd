"""README.md's table of GPU figures (scripts/device/allreduce_figures.py): generated from tests/fixtures/device, a
column per GPU count, so that a new device run cannot land without the table saying what it measured."""
import json

from tests.helpers.allreduce_bundles import complete_bundle
from tests.helpers.readme_sandbox import sandbox
from tests.helpers.script_module import load_file

figures = load_file("scripts/device/allreduce_figures.py", "allreduce_figures")


def test_the_readme_block_is_what_the_fixtures_say():
    assert figures.main(["--check"]) == 0, "run scripts/device/allreduce_figures.py"


def test_the_recorded_2_gpu_run_fills_its_column_and_the_others_say_not_run():
    lines = figures.render().splitlines()
    fused = next(line for line in lines if line.startswith("| fused all-reduce"))
    assert fused.split(" | ")[1:] == ["4.8 / 5.9 / 10.4", "not run", "not run |"]  # h200x2_fusion_canary.json
    phb = next(line for line in lines if "NCCL_P2P_LEVEL=PHB" in line)
    assert phb.split(" | ")[1] == "-"  # that earlier run did not time the candidate


def test_a_new_bundle_takes_its_column_and_a_stale_readme_is_refused(tmp_path, monkeypatch):
    fixtures, readme = sandbox(tmp_path, monkeypatch, figures)
    (fixtures / "h200x4_allreduce_canary.json").write_text(json.dumps(complete_bundle(4)))
    assert figures.main(["--check"]) == 1
    assert figures.main([]) == 0 and figures.main(["--check"]) == 0
    lines = readme.read_text().splitlines()
    row = {line.split(" | ")[0]: line.split(" | ")[1:] for line in lines if line.startswith("| ")}
    assert row["| fused all-reduce + residual + RMSNorm (FlashInfer trtllm)"][1] == "8.0 / 8.2 / 9.3"
    assert row["| FlashInfer PCIe IPC all-reduce"][1] == "9.0 / 24.0 / 136.0"
    assert row["| NCCL all-reduce alone, `NCCL_P2P_LEVEL=PHB`"][1] == "11.0 / 26.0 / 138.0"
    assert row["| fusion canary"][1] == "canary passed, corrupted rank failed it"
    assert row["| fusion canary"][2] == "not run |"
    assert "4 GPUs: `h200x4_allreduce_canary.json`" in readme.read_text()
