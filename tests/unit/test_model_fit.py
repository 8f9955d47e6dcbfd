"""The model's fit against GPU memory, as the deploy preflight judges it (module_utils/model_fit.py): refused only
where the weights divided by the ranks exceed what a GPU can hold, with the rule, the figures and the fix; no
verdict where the weights' size is not on the host."""
import json

import pytest

from ansible.module_utils import deploy_preflight as dp
from ansible.module_utils import model_fit
from ansible.module_utils import model_store

GIB = 1024 ** 3
RTX_PRO_6000_MIB = 97887  # memory.total of the 2-GPU capture (lab/gpu-profiles/rtxpro6000-2x-pcie)


def known(weight_bytes, files=4):
    return {"known": True, "weight_bytes": weight_bytes, "weight_files": files, "total_bytes": weight_bytes + 10,
            "read_from": "/models/m/.state/v1.json"}


def test_a_model_that_fits_has_no_problem_and_says_what_was_compared():
    problem, why = model_fit.fit_problem("m revision v1", known(100 * GIB), 2, RTX_PRO_6000_MIB)
    assert problem is None
    assert why.startswith("the weights fit: 100.0 GiB")
    assert "over 2 rank(s) is 50.0 GiB" in why and "97887 MiB" in why


def test_a_model_too_large_for_its_gpus_is_refused_with_the_rule_figures_and_fix():
    problem, why = model_fit.fit_problem("m revision v1", known(250 * GIB), 2, RTX_PRO_6000_MIB)
    assert why == "too large"
    assert problem.startswith("m revision v1 cannot fit its GPUs: each tensor-parallel rank holds at least 1/2")
    assert "250.0 GiB" in problem and "125.0 GiB" in problem and "the GPU's whole memory, 97887 MiB" in problem
    # 250 GiB over 95.6 GiB GPUs: three ranks at least.
    assert "spread it over 3 or more ranks" in problem
    assert "mem_fraction_static" not in problem


def test_a_larger_tp_size_makes_it_fit():
    assert model_fit.fit_problem("m revision v1", known(250 * GIB), 2, RTX_PRO_6000_MIB)[0]
    assert model_fit.fit_problem("m revision v1", known(250 * GIB), 4, RTX_PRO_6000_MIB)[0] is None


def test_the_static_fraction_is_the_budget_where_it_is_set():
    # 150 GiB over 2 ranks: 75 GiB each, within 95.6 GiB but above 0.7 of it (66.9 GiB).
    assert model_fit.fit_problem("m", known(150 * GIB), 2, RTX_PRO_6000_MIB)[0] is None
    problem, _why = model_fit.fit_problem("m", known(150 * GIB), 2, RTX_PRO_6000_MIB, mem_fraction=0.7)
    assert "sglang_server_mem_fraction_static 0.7 of 97887 MiB" in problem
    assert "raise sglang_server_mem_fraction_static (the weights alone take 0.78 of the GPU)" in problem
    assert model_fit.fit_problem("m", known(150 * GIB), 2, RTX_PRO_6000_MIB, mem_fraction="0.85")[0] is None


def test_raising_the_fraction_is_not_offered_where_the_whole_gpu_is_too_small():
    problem, _why = model_fit.fit_problem("m", known(250 * GIB), 2, RTX_PRO_6000_MIB, mem_fraction=0.8)
    assert problem and "raise sglang_server_mem_fraction_static" not in problem


@pytest.mark.parametrize("weights, quantization, reason", [
    ({"known": False, "why": "the host holds no record of revision v1 of m"}, None, "no record of revision v1"),
    (None, None, "its size is not known"),
    (known(0, files=0), None, "lists no weight files"),
    (known(250 * GIB), "fp8", "quantizes the weights as it loads them (fp8)"),
])
def test_missing_or_inapplicable_data_gives_no_verdict(weights, quantization, reason):
    problem, why = model_fit.fit_problem("m", weights, 2, RTX_PRO_6000_MIB, quantization=quantization)
    assert problem is None
    assert why.startswith("no verdict on the model's fit: ") and reason in why


def test_unknown_gpus_or_ranks_give_no_verdict():
    assert model_fit.fit_problem("m", known(250 * GIB), None, RTX_PRO_6000_MIB)[0] is None
    assert model_fit.fit_problem("m", known(250 * GIB), 2, 0)[0] is None


def test_only_weight_files_count():
    files = [{"name": "config.json", "size": 5000}, {"name": "tokenizer.json", "size": 9000},
             {"name": "model-00001-of-00002.safetensors", "size": 300}, {"name": "sub/pytorch_model.BIN", "size": 7}]
    assert model_fit.weight_bytes(files) == (307, 2)


@pytest.mark.parametrize("tp, pp, gpus, expected", [
    (None, None, 2, 2), (4, None, 2, 4), ("8", "2", 8, 16), (-2, None, 2, None), (2, "x", 2, None),
    (None, None, None, None),
])
def test_the_server_ranks(tp, pp, gpus, expected):
    assert dp.ranks(tp, pp, gpus) == expected


def test_the_server_model_is_the_one_whose_current_link_or_path_folder_it_loads():
    models = [{"name": "a", "revision": "v1", "source": {"type": "http", "url": "http://m/a"}},
              {"name": "b", "revision": "v2", "source": {"type": "path", "path": "/data/b/", "manifest": "/data/b.json"}}]
    assert model_fit.server_model("/srv/models/a/current", models, "/srv/models")["name"] == "a"
    assert model_fit.server_model("/data/b", models, "/srv/models")["name"] == "b"
    assert model_fit.server_model("/srv/models/b/current", models, "/srv/models")["name"] == "b"
    assert model_fit.server_model("/elsewhere/a", models, "/srv/models") is None
    assert model_fit.server_model("", models, "/srv/models") is None
    assert model_fit.server_model("/srv/models/a/current", None, "/srv/models") is None


def manifest_files():
    return [{"name": "config.json", "size": 10, "sha256": "0" * 64},
            {"name": "model.safetensors", "size": 4096, "sha256": "1" * 64}]


def test_read_weights_from_the_hosts_record(tmp_path):
    models_dir = str(tmp_path / "models")
    model_store.write_record(models_dir, "m", "v1", manifest_files(), {"type": "http", "url": "http://mirror/m"},
                             "full", models_dir + "/m/v1")
    found = model_fit.read_weights(models_dir, "m", "v1")
    assert found == {"known": True, "weight_bytes": 4096, "weight_files": 1, "total_bytes": 4106,
                     "read_from": model_store.record_path(models_dir, "m", "v1")}


def test_read_weights_from_a_path_sources_manifest(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"files": manifest_files()}))
    found = model_fit.read_weights(str(tmp_path / "models"), "m", "v1", str(manifest))
    assert found["known"] and found["weight_bytes"] == 4096 and found["read_from"] == str(manifest)


def test_read_weights_of_a_revision_the_host_does_not_hold(tmp_path):
    found = model_fit.read_weights(str(tmp_path / "models"), "m", "v1")
    assert found["known"] is False and "the host holds no record of revision v1 of m" in found["why"]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    found = model_fit.read_weights(str(tmp_path / "models"), "m", "v1", str(bad))
    assert found["known"] is False and "its manifest %s cannot be read" % bad in found["why"]
