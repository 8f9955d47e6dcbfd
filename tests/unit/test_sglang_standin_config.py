"""The stand-in's config file: an unknown key, a wrong type or bad JSON stops the start with 78 (EX_CONFIG)."""
import json

import pytest

from tests.helpers.sglang_standin import run_flags


@pytest.mark.parametrize("paths,words", [
    ({"ring": {}}, "unknown path 'ring'"),
    ({"fusion": {"tokens_per_s": 0}}, "allreduce_paths.fusion.tokens_per_s must be a number > 0"),
    ({"fusion": {"speed": 5}}, "must be an object with only tokens_per_s, wrong_output, tie_break"),
    ({"nccl": {"wrong_output": "yes"}}, "allreduce_paths.nccl.wrong_output must be true or false"),
    ({"fusion": {"tie_break": "last"}}, "allreduce_paths.fusion.tie_break must be one of first, second"),
    (["fusion"], "allreduce_paths must be an object"),
])
def test_bad_allreduce_paths_exit_78(tmp_path, paths, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"allreduce_paths": paths}))
    proc = run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)})
    assert proc.returncode == 78 and words in proc.stderr


def test_bad_config_exits_78(standin, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"tokens_per_second": 5}))
    proc = run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)})
    assert proc.returncode == 78 and "unknown key(s) tokens_per_second" in proc.stderr
    path.write_text(json.dumps({"fusion_log": "maybe"}))
    assert run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)}).returncode == 78
    for bad, words in (({"greedy_ties": [-1]}, "greedy_ties must be a list"), ({"tie_break": 2}, "tie_break must be")):
        path.write_text(json.dumps(bad))
        proc = run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)})
        assert proc.returncode == 78 and words in proc.stderr
