"""The model's hidden size, read once for both canaries: module_utils/model_config.py and its module shell."""
import json

import pytest

from ansible.module_utils import model_config as mc
from tests.helpers.ansible_run import run_module


@pytest.mark.parametrize("config, expected", [
    ({"hidden_size": 4096}, 4096),
    ({"text_config": {"hidden_size": 7168}, "vision_config": {"hidden_size": 1152}}, 7168),  # Kimi-K2.5's layout
    ({"language_config": {"hidden_size": 2048}}, 2048),
    ({"hidden_size": 5120, "text_config": {"hidden_size": 1}}, 5120),  # the top level wins
])
def test_hidden_size_is_read_where_models_keep_it(config, expected):
    assert mc.hidden_size(config) == expected


@pytest.mark.parametrize("config", [{}, {"hidden_size": "7168"}, {"hidden_size": True}, {"hidden_size": 0},
                                    {"text_config": None}, [7168]])
def test_no_usable_hidden_size_is_refused_by_name(config):
    with pytest.raises(mc.ModelConfigError, match="hidden_size|not a JSON object"):
        mc.hidden_size(config)


def test_the_architecture_is_the_first_sglang_takes(tmp_path):
    kimi = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": {"architectures": ["DeepseekV3"]}}
    assert mc.architecture(kimi) == "KimiK25ForConditionalGeneration"
    assert mc.architecture({"architectures": ["Qwen3ForCausalLM", "Other"]}) == "Qwen3ForCausalLM"
    for bad in ({}, {"architectures": []}, {"architectures": "Qwen3ForCausalLM"}, {"architectures": [None]}, [1]):
        with pytest.raises(mc.ModelConfigError, match="architectures|not a JSON object"):
            mc.architecture(bad)
    (tmp_path / "config.json").write_text(json.dumps(kimi))
    assert mc.read_architecture(str(tmp_path)) == "KimiK25ForConditionalGeneration"
    with pytest.raises(mc.ModelConfigError, match="cannot read the model's architecture from %s" % (tmp_path / "x")):
        mc.read_architecture(str(tmp_path / "x"))


def module(model_path, check=False):
    return run_module("sglang_model_config", {"model_path": model_path}, check=check)


def assert_clean_failure(result, *needles):
    assert result.get("failed") and "Traceback" not in json.dumps(result) and "module_stderr" not in result, result
    for needle in needles:
        assert needle in result["msg"], (needle, result["msg"])


def test_the_module_reads_the_hidden_size_also_in_check_mode(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 7168}}))
    for check in (False, True):
        result = module(str(tmp_path), check=check)
        assert not result.get("failed") and result["changed"] is False, result
        assert result["hidden_size"] == 7168 and result["config"] == str(tmp_path / "config.json")


def test_the_module_says_which_file_and_why(tmp_path):
    assert_clean_failure(module(str(tmp_path)), str(tmp_path / "config.json"), "No such file")
    (tmp_path / "config.json").write_text("{not json")
    assert_clean_failure(module(str(tmp_path)), "cannot read the model's hidden_size", str(tmp_path))
    (tmp_path / "config.json").write_text('{"hidden_size": "big"}')
    assert_clean_failure(module(str(tmp_path)), "no positive integer hidden_size")
    assert_clean_failure(module("models/m"), "must be an absolute path")
