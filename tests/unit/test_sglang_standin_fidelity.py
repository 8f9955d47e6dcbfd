"""The SGLang stand-in held to what the real server answered (sglang 0.5.17 on an H200, recorded by
scripts/device/sglang_e2e.py into tests/fixtures/device/sglang_0.5.17_real_server.json).

The stand-in imitates the lab's release (0.5.21); where 0.5.17 differs by release the test names the difference
(VERSION_DIFFERENCES) instead of hiding it. Everything else the roles and the benchmark gate read must match:
status codes, bodies of the health checks, the JSON keys of /generate, /v1/completions, /v1/models, the served
arguments the roles check, and the error shapes.
"""
import json
import os
import re

import pytest

from tests.helpers import metric_families
from tests.helpers.sglang_standin import REPO, Standin, package_sources

RECORDED = os.path.join(REPO, "tests", "fixtures", "device", "sglang_0.5.17_real_server.json")
LAB_MODEL = os.path.join(REPO, "lab", "models", "kimi-k2.5-standin")  # the same tokenizer files the real one used
# Paths whose answer depends on the release: /ready is 404 on 0.5.17 and served by later releases (the stand-in's).
VERSION_DIFFERENCES = {"/ready"}
# Served arguments the roles and the benchmark runner read from /server_info.
READ_FROM_SERVER_INFO = ("version", "tp_size", "model_path", "served_model_name", "speculative_algorithm",
                         "speculative_num_steps", "speculative_num_draft_tokens", "speculative_eagle_topk",
                         "flashinfer_allreduce_fusion_backend")
# meta_info keys the stand-in does not send: per-verify histograms it has no per-step data for.
META_NOT_IMITATED = {"spec_accept_histogram", "spec_correct_drafts_histogram"}
# meta_info keys of the stand-in's release that 0.5.17 does not send: 0.5.21's ReqTimeStats adds the first token's
# latency to the time stats a server with --enable-metrics returns (read in both releases' req_time_stats.py).
META_ADDED_SINCE = {"first_token_latency"}


@pytest.fixture(scope="module")
def recorded():
    with open(RECORDED, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def answers(recorded, tmp_path_factory):
    """The stand-in's answer to each recorded request, started like the real one (EAGLE-3, TP 1, metrics on)."""
    assert real(recorded, "/server_info")["json"]["enable_metrics"] is True
    server = Standin(tmp_path_factory.mktemp("fidelity"), model=LAB_MODEL,
                     args=["--tp-size", "1", "--speculative-algorithm", "EAGLE3",
                           "--speculative-draft-model-path", "/srv/models/draft", "--speculative-num-steps", "3",
                           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                           "--enable-metrics"])
    try:
        server.start().wait_ready()
        out = {}
        for call in recorded["responses"]:
            status, body, _raw = server.request(call["path"], call["request"], method=call["method"])
            out[key(call)] = (status, body)
        return out
    finally:
        server.stop()


@pytest.fixture(scope="module")
def unauthorized_answers(recorded, tmp_path_factory):
    """The stand-in's answers to the requests the real server got without its key (or a wrong one), the key given
    as the role gives it (an options file through --config)."""
    folder = tmp_path_factory.mktemp("fidelity-key")
    options = folder / "api-key.yaml"
    options.write_text('api-key: "the-real-key"\n')
    server = Standin(folder, model=LAB_MODEL, args=["--tp-size", "1", "--enable-metrics", "--config", str(options)])
    headers = {"none": {}, "wrong": {"Authorization": "Bearer not-the-key"},
               "lowercase_scheme": {"Authorization": "bearer the-real-key"}}
    try:
        server.start().wait_ready()
        return [(call, server.request(call["path"], call["request"], method=call["method"],
                                      headers=headers[call["auth"]])[:2]) for call in recorded["unauthorized"]]
    finally:
        server.stop()


def test_what_the_key_protects_matches_the_real_server(unauthorized_answers):
    """utils/auth.py as the real 0.5.17 applied it: health checks and metrics open, everything else (unknown paths
    too) 401 {"error": "Unauthorized"} without the key or with a wrong one, the Bearer scheme in any case."""
    assert len(unauthorized_answers) >= 12
    for call, (status, body) in unauthorized_answers:
        where = "%s %s (%s)" % (call["method"], call["path"], call["auth"])
        if call["path"] in VERSION_DIFFERENCES:  # 0.5.21 opens /ready* with the health checks; 0.5.17 has no /ready
            assert (call["status"], status) == (401, 200), where
            continue
        assert status == call["status"], where
        if call["status"] == 401:
            assert body == call["json"] == {"error": "Unauthorized"}, where


def key(call):
    """A recorded request's name: method and path, and whether it asked for logprobs (/generate is asked both ways)."""
    return call["method"] + " " + call["path"] + (" logprobs" if (call["request"] or {}).get("return_logprob") else "")


def calls(recorded_file=RECORDED):
    with open(recorded_file, encoding="utf-8") as handle:
        return [c for c in json.load(handle)["responses"]]


@pytest.mark.parametrize("call", calls(), ids=key)
def test_status_codes_match_the_real_server(call, answers):
    status, _body = answers[key(call)]
    if call["path"] in VERSION_DIFFERENCES:
        assert (call["status"], status) == (404, 200)  # 0.5.17 has no /ready; the stand-in imitates 0.5.21
    else:
        assert status == call["status"]


def real(recorded, path, method="GET"):
    return next(c for c in recorded["responses"] if c["path"] == path and c["method"] == method)


def test_health_checks_answer_with_an_empty_body(recorded, answers):
    for path in ("/health", "/health_generate"):
        assert real(recorded, path)["text"] == "" and answers["GET " + path] == (200, "")


def test_generate_has_the_real_keys(recorded, answers):
    want = real(recorded, "/generate", "POST")["json"]
    _status, got = answers["POST /generate"]
    assert set(got) == set(want) == {"text", "output_ids", "meta_info"}
    assert set(want["meta_info"]) - META_NOT_IMITATED == set(got["meta_info"]) - META_ADDED_SINCE
    assert got["meta_info"]["finish_reason"] == want["meta_info"]["finish_reason"] == {"type": "length", "length": 8}


def test_logprobs_have_the_real_keys_and_entries(recorded, answers):
    """What the benchmark gate's runner asks for (return_logprob, top_logprobs_num 2) and reads."""
    want = next(c for c in recorded["responses"] if key(c) == "POST /generate logprobs")["json"]
    got = answers["POST /generate logprobs"][1]
    assert set(want["meta_info"]) - META_NOT_IMITATED == set(got["meta_info"]) - META_ADDED_SINCE
    for field in ("input_token_logprobs", "output_token_logprobs", "input_top_logprobs", "output_top_logprobs",
                  "output_token_logprobs_length"):
        assert shape(got["meta_info"][field]) == shape(want["meta_info"][field]), field


def shape(value):
    """A JSON value's structure: types, and list lengths."""
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


def test_completions_and_models_have_the_real_keys(recorded, answers):
    want = real(recorded, "/v1/completions", "POST")["json"]
    _status, got = answers["POST /v1/completions"]
    assert set(got) == set(want)
    assert set(got["choices"][0]) == set(want["choices"][0]) and set(got["usage"]) == set(want["usage"])
    want, got = real(recorded, "/v1/models")["json"], answers["GET /v1/models"][1]
    assert set(got) == set(want) and set(got["data"][0]) == set(want["data"][0])


def test_server_info_serves_what_the_roles_read(recorded, answers):
    for path in ("/server_info", "/get_server_info"):
        want, got = real(recorded, path)["json"], answers["GET " + path][1]
        assert set(READ_FROM_SERVER_INFO) <= set(want) and set(READ_FROM_SERVER_INFO) <= set(got)
        assert got["speculative_algorithm"] == want["speculative_algorithm"] == "EAGLE3"
        assert got["tp_size"] == want["tp_size"] == 1


def test_errors_have_the_real_shape(recorded, answers):
    assert answers["GET /no_such_path"][1] == real(recorded, "/no_such_path")["json"] == {"detail": "Not Found"}
    want = real(recorded, "/v1/chat/completions", "POST")["json"]
    got = answers["POST /v1/chat/completions"][1]
    assert got == want  # the lab tokenizer has no chat template: both refuse, with the same message


def families(text):
    """Prometheus text: {family: {"help", "type", "labels": [label names of each sample]}}."""
    out = {}
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            _hash, what, name, rest = (line.split(" ", 3) + [""])[:4]
            out.setdefault(name, {"labels": []})[what.lower()] = rest
        elif line and not line.startswith("#"):
            name, labels = re.match(r"([^{ ]+)(?:\{([^}]*)\})? ", line).groups()
            family = next(f for f in (name, re.sub(r"_(bucket|sum|count|created)$", "", name)) if f in out)
            out[family]["labels"].append(sorted(re.findall(r'(\w+)="', labels or "")))
    return out


def dashboard_families():
    """The sglang:* families the shipped dashboard's queries read."""
    with open(os.path.join(REPO, "monitoring", "grafana", "sglang-fleet.json"), encoding="utf-8") as handle:
        panels = json.load(handle)["panels"]
    exprs = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    families = {name for expr in exprs for name in metric_families.series_in(expr) if name.startswith("sglang:")}
    assert families, "the dashboard reads no SGLang family"
    return families


def test_metrics_are_the_real_families(recorded, answers):
    """Every metric the stand-in exposes is one the real server exposed: name, type, help text, and each sample's
    label names (with values printed as prometheus_client prints them)."""
    want = real(recorded, "/metrics")
    assert want["status"] == 200 and want["content_type"] == "text/plain; version=0.0.4; charset=utf-8"
    status, text = answers["GET /metrics"]
    assert status == 200
    real_families, ours = families(want["text"]), families(text)
    # every SGLang family the shipped dashboard reads, so each of its panels has data in the lab's Prometheus
    assert {"sglang:num_requests_total", "sglang:gen_throughput", "sglang:spec_accept_length"} | dashboard_families() \
        <= set(ours)
    for name, family in ours.items():
        assert name in real_families, name
        assert (family["type"], family["help"]) == (real_families[name]["type"], real_families[name]["help"]), name
        labels = set(map(tuple, family["labels"]))
        assert labels and labels == set(map(tuple, real_families[name]["labels"])), name
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"-?\d+\.\d+(e[+-]\d+)?|\d(\.\d+)?e\+\d\d", line.rsplit(" ", 1)[1]), line


def test_flush_cache_answers_the_real_text(recorded, answers):
    assert answers["POST /flush_cache"][1] == real(recorded, "/flush_cache", "POST")["text"]


def test_log_lines_the_roles_read_are_the_real_ones(recorded):
    """The stand-in prints these lines (test_sglang_standin_startup_log checks its formats); the real ones agree."""
    lines = recorded["log_lines"]
    assert any(line.endswith("The server is fired up and ready to roll!") for line in lines)
    assert any("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)" in line for line in lines)
    assert any("Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use "
               "'/server_info' instead." in line for line in lines)
    source = package_sources()
    assert "The server is fired up and ready to roll!" in source and "Uvicorn running on %s (Press CTRL+C to quit)" in source
    assert "Endpoint '/get_server_info' is deprecated and will be removed in a future version. " in source


def test_client_result_line_has_what_the_gate_reads(recorded):
    keys = set(recorded["client_result_keys"])
    assert {"output_throughput", "completed", "accept_length", "total_output_tokens", "duration"} <= keys
    assert recorded["client_module"] == "sglang.benchmark.serving"
