"""Malformed input for the modules: each answers with its own message (no traceback) and writes nothing."""
import json
import os

import pytest

from tests.helpers.ansible_run import run_module, run_module_direct


def tree(root):
    found = {}
    for directory, dirs, files in os.walk(str(root)):
        for name in dirs + files:
            path = os.path.join(directory, name)
            found[path] = open(path, "rb").read() if os.path.isfile(path) else None
    return found


def refused(module, args, root):
    before = tree(root)
    result = run_module(module, args)
    assert result.get("failed"), result
    assert "module_stderr" not in result and "Traceback" not in result.get("msg", ""), result
    assert tree(root) == before
    return result["msg"]


# ------------------------------------------------------------------------------------------ sglang_server_args

@pytest.mark.parametrize("renamed", [
    {"--cuda-graph-max-bs": [1]},
    {"--cuda-graph-max-bs": "--cuda-graph-max-bs-decode"},
    {"--cuda-graph-max-bs": []},
    {"--cuda-graph-max-bs": [None]},
    {"cuda-graph-max-bs": ["--cuda-graph-max-bs-decode"]},
])
def test_server_args_renamed_map_must_hold_flag_strings(tmp_path, renamed):
    msg = refused("sglang_server_args", {"venv": str(tmp_path / "venv"), "argv": ["--model-path", "/m"],
                                         "renamed": renamed}, tmp_path)
    assert "renamed maps an old flag to a list of its successors" in msg


@pytest.mark.parametrize("arg,rule", [("--served-model-name=a\nExecStartPre=+/bin/id", "newline"),
                                      ("--chat-template=%h/t", "specifier"), ("a b", "whitespace")])
def test_server_args_refuses_what_the_unit_would_read_differently(tmp_path, arg, rule):
    msg = refused("sglang_server_args", {"venv": str(tmp_path / "venv"), "argv": ["--model-path", "/m", arg]},
                  tmp_path)
    assert "refused before it reaches the unit" in msg and "argv[2]" in msg and rule in msg, msg


# ----------------------------------------------------------------------------------------- sglang_fusion_patch

def fake_venv(root):
    """A venv as far as the module looks before it reads its record: sglang's package folder and its metadata."""
    site = root / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang-0.5.21.dist-info").mkdir()
    (site / "sglang-0.5.21.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.21\n")
    state_dir = root / "venv" / ".sglang-fusion-patch"
    state_dir.mkdir()
    return state_dir / "state.json"


@pytest.mark.parametrize("content,words", [
    ("{not json", ["is corrupt", "not JSON"]),
    ("[1, 2]", ["wrong shape", "JSON object"]),
    ('{"files": ["sglang/srt/x.py"]}', ["wrong shape", "'files'"]),
    ('{"files": {"sglang/srt/x.py": "abc"}}', ["wrong shape", "not an object"]),
    ('{"files": {"sglang/srt/x.py": {"sha256_before": 1, "sha256_after": "x"}}}', ["wrong shape", "sha256_before"]),
    ('{"files": {"../../../etc/passwd": {"sha256_before": "%s", "sha256_after": "%s"}}}' % ("a" * 64, "b" * 64),
     ["wrong shape", "not a path inside the venv"]),
])
def test_fusion_patch_state_record_of_the_wrong_shape_names_the_file(tmp_path, content, words):
    state = fake_venv(tmp_path)
    state.write_text(content)
    msg = refused("sglang_fusion_patch", {"venv": str(tmp_path / "venv"), "state": "absent"}, tmp_path)
    assert str(state) in msg
    for word in words:
        assert word in msg, msg


# ------------------------------------------------------------------------------------------- sglang_venv_prune

def test_venv_prune_root_that_is_a_file(tmp_path):
    (tmp_path / "sglang").write_text("not a directory")
    msg = refused("sglang_venv_prune", {"root": str(tmp_path / "sglang"), "keep": 2}, tmp_path)
    assert "is not a directory" in msg


def test_venv_prune_venvs_that_is_a_file(tmp_path):
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "venvs").write_text("x")
    msg = refused("sglang_venv_prune", {"root": str(tmp_path / "sglang"), "keep": 2}, tmp_path)
    assert "venvs is not a directory" in msg


# --------------------------------------------------------------------------------------- sglang_benchmark_gate

SETTINGS = {"input_len": 16, "output_len": 48, "num_prompts": 2, "seed": 3, "gate_concurrency": 1,
            "correctness_max_new_tokens": 8}


def measurement(**overrides):
    runs = [{"concurrency": 1, "repeat": i, "rc": 0, "error": None,
             "result": {"completed": 2, "output_throughput": 10.0}} for i in (1, 2, 3)]
    measured = {"settings": dict(SETTINGS), "runs": runs, "completions": []}
    measured.update(overrides)
    return measured


def gate_args(tmp_path, **overrides):
    args = {"host": "h1", "measurement": measurement(), "baseline_mode": "static", "baseline_tok_s": 80.0,
            "correctness": False, "baseline_file": str(tmp_path / "baselines" / "h1.json"),
            "results_dir": str(tmp_path / "results")}
    args.update(overrides)
    return args


@pytest.mark.parametrize("overrides,words", [
    ({"margin_pct": -90.0}, ["margin_pct must be a finite number, 0 or more"]),
    ({"margin_pct": float("nan")}, ["margin_pct must be a finite number, 0 or more (got nan)"]),
    ({"margin_pct": float("inf")}, ["margin_pct must be a finite number, 0 or more (got inf)"]),
    ({"margin_pct": 10 ** 400}, ["too large for a number (an integer no float holds): margin_pct"]),
    ({"baseline_tok_s": 10 ** 400, "min_match_rate": 10 ** 400}, ["no float holds): baseline_tok_s, min_match_rate"]),
    ({"baseline_tok_s": float("nan")}, ["baseline_tok_s is nan (not a finite number)"]),
    ({"baseline_tok_s": float("inf")}, ["baseline_tok_s is inf (not a finite number)"]),
    ({"baseline_tok_s": "1e999"}, ["baseline_tok_s is inf (not a finite number)"]),
    ({"host": "../../x"}, ["cannot name a results folder"]),
    ({"host": "h1\nh2"}, ["cannot name a results folder"]),
    ({"host": ".."}, ["cannot name a results folder"]),
    ({"host": "a/b"}, ["cannot name a results folder"]),
    ({"min_match_rate": 1.5}, ["min_match_rate"]),
    ({"tie_max_gap": -0.1}, ["tie_max_gap must be from 0 to 0.5"]),
    ({"tie_max_gap": 2.0}, ["tie_max_gap must be from 0 to 0.5"]),
    ({"gate_concurrency": 0}, ["gate_concurrency"]),
    ({"baseline_tok_s": -1.0}, ["baseline_tok_s"]),
    ({"measurement": measurement(settings=dict(SETTINGS, num_prompts="many"))}, ["num_prompts", "whole number"]),
    ({"measurement": measurement(settings=dict(SETTINGS, num_prompts=2.5))}, ["num_prompts", "whole number"]),
    ({"measurement": measurement(settings=dict(SETTINGS, num_prompts=float("inf")))}, ["num_prompts", "whole number"]),
    ({"measurement": measurement(settings=dict(SETTINGS, num_prompts="1e999"))}, ["num_prompts", "whole number"]),
    ({"measurement": measurement(settings=dict(SETTINGS, num_prompts=10 ** 400))}, ["num_prompts", "whole number"]),
    ({"measurement": measurement(settings=dict(SETTINGS, num_prompts=True))}, ["num_prompts", "whole number"]),
    ({"measurement": measurement(runs=[{"concurrency": float("inf"), "result": None}])},
     ["concurrency", "whole number"]),
    ({"measurement": measurement(runs=[{"concurrency": "x", "result": None}])}, ["concurrency", "whole number"]),
    ({"measurement": measurement(runs="none")}, ["runs must be a list"]),
    ({"measurement": measurement(settings="x")}, ["cannot judge"]),
])
def test_benchmark_gate_bounds_its_inputs(tmp_path, overrides, words):
    msg = refused("sglang_benchmark_gate", gate_args(tmp_path, **overrides), tmp_path)
    for word in words:
        assert word in msg, msg
    assert not os.path.exists(str(tmp_path / "results"))


@pytest.mark.parametrize("recorded,shown", [
    ("NaN", "nan (not a finite number)"), ("Infinity", "inf (not a finite number)"), ("0", "0 (not above 0)"),
    ("-85.0", "-85.0 (not above 0)"), ("true", "True (a boolean, not a number)"), ('"85"', "'85' (not a number)"),
    ("1" + "0" * 400, "1000000000000000000000000000000000000... (not a finite number)"),
])
def test_benchmark_gate_refuses_a_recorded_baseline_that_would_pass_any_run(tmp_path, recorded, shown):
    """A baseline of NaN, 0 or below made every median pass (and inf none): the gate refuses it by name."""
    baseline = tmp_path / "baselines" / "h1.json"
    baseline.parent.mkdir()
    baseline.write_text('{"median_output_tok_s": %s, "recorded_at": "2026-12-01T05:00:00+00:00", "settings": %s}'
                        % (recorded, json.dumps(SETTINGS)))
    msg = refused("sglang_benchmark_gate", gate_args(tmp_path, baseline_mode="file", margin_pct=5.0), tmp_path)
    assert ("the baseline file %s cannot judge any run: its median_output_tok_s is %s: a rate must be a finite "
            "number above 0. Delete it, or record a new baseline" % (baseline, shown)) in msg, msg
    assert not os.path.exists(str(tmp_path / "results"))


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), True, 10 ** 400])
def test_benchmark_gate_records_no_baseline_from_a_measurement_that_is_not_a_rate(tmp_path, rate):
    runs = [{"concurrency": 1, "repeat": i, "rc": 0, "error": None,
             "result": {"completed": 2, "output_throughput": rate}} for i in (1, 2, 3)]
    msg = refused("sglang_benchmark_gate", gate_args(tmp_path, measurement=measurement(runs=runs),
                                                     record_baseline=True), tmp_path)
    assert "cannot record a baseline from an incomplete measurement" in msg and "output_throughput is" in msg
    assert not os.path.exists(str(tmp_path / "baselines"))


@pytest.mark.parametrize("result", [
    {"completed": 2, "output_throughput": float("nan")},
    {"completed": 2, "output_throughput": float("inf")},
    {"completed": 2, "output_throughput": 10 ** 400},
    {"completed": True, "output_throughput": 500.0},  # num_prompts 1: true == 1 in Python
])
def test_benchmark_gate_never_passes_a_measurement_that_is_not_a_rate(tmp_path, result):
    runs = [{"concurrency": 1, "repeat": i, "rc": 0, "error": None, "result": result} for i in (1, 2, 3)]
    measured = measurement(runs=runs, settings=dict(SETTINGS, num_prompts=1 if result["completed"] is True else 2))
    judged = run_module("sglang_benchmark_gate", gate_args(tmp_path, measurement=measured))
    assert judged.get("failed") is not True and judged["passed"] is False, judged
    assert "throughput: no counted run at concurrency 1" in judged["failures"]
    with open(judged["artifacts"]["run"], encoding="utf-8") as handle:
        json.loads(handle.read(), parse_constant=lambda name: pytest.fail("%s in the run record" % name))


def test_benchmark_gate_still_judges_a_slow_server_as_failed_with_margin_zero(tmp_path):
    result = run_module("sglang_benchmark_gate", gate_args(tmp_path, margin_pct=0.0))
    assert result.get("failed") is not True and result["passed"] is False, result


# ----------------------------------------------------------------------------------------- sglang_model_config

@pytest.mark.parametrize("config,reason", [
    (None, "config.json"),
    ("{not json", "config.json"),
    ('{"hidden_size": -7168}', "hidden"),
    ('{"hidden_size": true}', "hidden"),
    ('{"text_config": {"hidden_size": "7168"}}', "hidden"),
    ('[7168]', "not a JSON object"),
])
def test_model_config_says_why_it_has_no_hidden_size(tmp_path, config, reason):
    (tmp_path / "model").mkdir()
    if config is not None:
        (tmp_path / "model" / "config.json").write_text(config)
    msg = refused("sglang_model_config", {"model_path": str(tmp_path / "model")}, tmp_path)
    assert msg.startswith("sglang_model_config: ") and reason in msg and str(tmp_path / "model") in msg, msg


def test_model_config_wants_an_absolute_path(tmp_path):
    msg = refused("sglang_model_config", {"model_path": "models/kimi"}, tmp_path)
    assert "absolute path" in msg, msg


def test_model_config_reads_a_wrapped_models_hidden_size(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"architectures": ["KimiK25"], '
                                                    '"text_config": {"hidden_size": 7168}}')
    result = run_module("sglang_model_config", {"model_path": str(tmp_path / "model")})
    assert not result.get("failed") and result["hidden_size"] == 7168 and not result["changed"], result
    assert result["config"] == str(tmp_path / "model" / "config.json")


def test_model_weights_wants_an_absolute_models_dir_and_a_revision_name(tmp_path):
    assert "models_dir must be an absolute path" in refused(
        "sglang_model_weights", {"models_dir": "models", "name": "m", "revision": "v1"}, tmp_path)
    assert "reserved" in refused(
        "sglang_model_weights", {"models_dir": str(tmp_path / "models"), "name": "m", "revision": "current"}, tmp_path)


def test_model_weights_reads_a_path_manifest_and_says_why_nothing_is_known(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text('{"files": [{"name": "a.safetensors", "size": 2048, "sha256": "%s"}]}' % ("a" * 64))
    args = {"models_dir": str(tmp_path / "models"), "name": "m", "revision": "v1"}
    result = run_module("sglang_model_weights", dict(args, manifest=str(manifest)))
    assert not result.get("failed") and not result["changed"], result
    assert (result["known"], result["weight_bytes"], result["read_from"]) == (True, 2048, str(manifest))
    result = run_module("sglang_model_weights", args)
    assert result["known"] is False and "no record of revision v1 of m" in result["why"], result
    assert not (tmp_path / "models").exists()


# ------------------------------------------------------------------ every module: NUL in paths and account names

NUL = "\x00"
# Each module with its required arguments, one path or account name holding a NUL byte (os.stat, open and
# pwd.getpwnam raise ValueError on one) and, second, one holding a lone surrogate (UnicodeEncodeError).
NUL_CASES = [
    ("gpu_host_facts", {"nvcc_paths": ["/usr/local/cuda/bin/nvcc" + NUL]}, "nvcc_paths[0]"),
    ("nvidia_gpu_facts", {"nvidia_smi": "/usr/bin/nvidia-smi" + NUL}, "nvidia_smi"),
    ("sglang_allreduce_choice", {"choice_file": "{tmp}/c" + NUL + ".json", "candidates": [], "rows": []},
     "choice_file"),
    ("sglang_allreduce_paths", {"venv": "{tmp}/venv" + NUL, "tp_size": 2}, "venv"),
    ("sglang_benchmark_gate", {"host": "h1", "measurement": {}, "baseline_file": "{tmp}/b" + NUL,
                               "results_dir": "{tmp}/results"}, "baseline_file"),
    ("sglang_benchmark_verdict", {"verdict_file": "{tmp}/v" + NUL, "config_file": "{tmp}/c", "settings": {}},
     "verdict_file"),
    ("sglang_deploy_metrics", {"path": "{tmp}/m" + NUL + ".prom"}, "path"),
    ("sglang_drift_report", {"src": "{tmp}/out" + NUL + ".json"}, "src"),
    ("sglang_env_file", {"dest": "{tmp}/x.env", "content": "A=1\n", "owner": "root" + NUL}, "owner"),
    ("sglang_env_file", {"dest": "{tmp}/x.env", "content": "A=1\n", "group": NUL}, "group"),
    ("sglang_fusion_patch", {"venv": "{tmp}/venv" + NUL}, "venv"),
    ("sglang_fusion_proof", {"unit_file": "{tmp}/u" + NUL, "log_lines": [], "served": {}}, "unit_file"),
    ("sglang_model_config", {"model_path": "{tmp}/m" + NUL}, "model_path"),
    ("sglang_model_current", {"models_dir": "{tmp}/models" + NUL, "name": "m", "revision": "r"}, "models_dir"),
    ("sglang_model_weights", {"models_dir": "{tmp}/models", "name": "m", "revision": "r",
                              "manifest": "{tmp}/m" + NUL + ".json"}, "manifest"),
    ("sglang_model_fetch", {"name": "m", "revision": "r", "models_dir": "{tmp}/models" + NUL,
                            "source": {"type": "path", "path": "{tmp}/src"}}, "models_dir"),
    ("sglang_nccl_settings", {"venv": "{tmp}/venv", "env_file": "{tmp}/nccl" + NUL + ".env"}, "env_file"),
    ("sglang_paths", {"directories": [{"path": "{tmp}/d", "owner": "sglang" + NUL, "group": "root",
                                       "mode": "0755"}]}, "directories[0].owner"),
    ("sglang_paths", {"absent": ["{tmp}/gone" + NUL]}, "absent[0]"),
    ("sglang_server_args", {"venv": "{tmp}/venv" + NUL}, "venv"),
    ("sglang_server_fingerprint", {"paths": ["{tmp}/unit" + NUL]}, "paths[0]"),
    ("sglang_server_state", {"dir": "{tmp}/state", "files": ["{tmp}/f" + NUL]}, "files[0]"),
    ("sglang_scrape_targets", {"dest": "{tmp}/sd" + NUL, "group": "g", "hosts": []}, "dest"),
    ("sglang_venv_prune", {"root": "{tmp}/opt" + NUL}, "root"),
]


def _fill(value, tmp):
    if isinstance(value, str):
        return value.replace("{tmp}", tmp)
    if isinstance(value, list):
        return [_fill(item, tmp) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, tmp) for key, item in value.items()}
    return value


@pytest.mark.parametrize("module,args,name", NUL_CASES, ids=["%s-%s" % (case[0], case[2]) for case in NUL_CASES])
def test_every_module_names_a_nul_byte_in_a_path_or_account_name(tmp_path, module, args, name):
    msg = refused(module, _fill(args, str(tmp_path)), tmp_path)
    assert msg.startswith("%s refused its arguments, nothing read or written: %s holds a NUL byte" % (module, name)), msg


# Ansible's controller refuses a lone surrogate in a task's arguments before any module runs ("Refusing to deserialize
# an invalid UTF8 string value"); a module can still get one (an arguments file written by other means, a future
# controller): these run the module as Ansible runs it on a host, in its own process with its arguments file. Only
# inside a list or a mapping: AnsibleModule's own constructor fails on one in a top-level string option (it logs
# each as UTF-8), before the module's code runs; env_file.problems refuses one in content (tests/unit).
def refused_direct(module, args, tmp_path):
    work = tmp_path / "module-run"
    work.mkdir()
    before = tree(tmp_path / "data")
    result, stderr = run_module_direct(module, args, work)
    assert result.get("failed"), result
    assert "Traceback" not in stderr and "Traceback" not in result.get("msg", ""), (result, stderr)
    assert tree(tmp_path / "data") == before
    return result["msg"]


@pytest.mark.parametrize("module,args,name", [
    ("sglang_server_fingerprint", {"paths": ["{tmp}/data/unit\ud800"]}, "paths[0]"),
    ("sglang_paths", {"directories": [{"path": "{tmp}/data/d", "owner": "r\udfffoot", "group": "root",
                                       "mode": "0755"}]}, "directories[0].owner"),
    ("sglang_paths", {"absent": ["{tmp}/data/\udbff"]}, "absent[0]"),
])
def test_a_lone_surrogate_in_a_path_or_account_name_is_named(tmp_path, module, args, name):
    (tmp_path / "data").mkdir()
    msg = refused_direct(module, _fill(args, str(tmp_path)), tmp_path)
    assert "%s holds a lone surrogate" % name in msg, msg


# -------------------------------------------------------------------------------------- sglang_unit_values

@pytest.mark.parametrize("kind", [["path"], {"path": True}])
def test_unit_values_names_a_kind_that_is_a_list_or_a_mapping(tmp_path, kind):
    msg = refused("sglang_unit_values", {"context": "t", "values": {"v": {"value": "/x", "kind": kind}}}, tmp_path)
    assert msg.startswith("t refused, nothing written: v: no known check (kind is one of"), msg


# ----------------------------------------------------------------------------- lone surrogates in written text

def test_fingerprint_extra_with_a_lone_surrogate_is_refused(tmp_path):
    (tmp_path / "data").mkdir()
    msg = refused_direct("sglang_server_fingerprint", {"paths": [str(tmp_path / "data" / "unit")],
                                                       "extra": ["580.1\ud800"]}, tmp_path)
    assert msg.startswith("sglang_server_fingerprint: extra[0] holds a lone surrogate (U+D800)"), msg


# ------------------------------------------------------------------------------------------ sglang_layout_migrate

@pytest.mark.parametrize("args, said", [
    ({"state_dir": "/x\u0000y"}, "NUL byte"),
    ({"moves": [{"src": "relative", "dest": "/d"}]}, "moves[].src must be an absolute path"),
    ({"moves": [{"src": "/s"}]}, "moves[].dest must be an absolute path"),
    ({"patterns": [{"src_dir": "/s", "dest_dir": "/d", "pattern": "a/b"}]}, "pattern without /"),
    ({"patterns": [{"src_dir": "/s", "dest_dir": "/d"}]}, "pattern without /"),
])
def test_layout_migrate_refuses_bad_input_before_making_anything(tmp_path, args, said):
    state = tmp_path / "deploy"
    msg = refused("sglang_layout_migrate", dict({"state_dir": str(state)}, **args), tmp_path)
    assert said in msg and not state.exists()
