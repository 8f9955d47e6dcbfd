"""SGLang 0.5.21's HTTP API as the stand-in answers it: the info endpoints, /metrics, /generate, the
OpenAI-compatible endpoints and the API key (also from a --config file)."""
import json

import pytest

from tests.helpers.sglang_standin import EAGLE, FUSION, MODEL_NAME, generate, metrics, run_flags


# ---------------------------------------------------------------------------------------------- info APIs

def test_server_info_reports_the_flags(standin):
    args = ["--tp", "2", "--served-model-name", "kimi", "--mem-fraction-static", "0.85", "--cuda-graph-max-bs-decode",
            "16", "--trust-remote-code", "--enable-metrics", "--nnodes", "1", "--node-rank", "0"] + EAGLE + FUSION
    server = standin({"accept_length": 2.5}, args).start().wait_ready()
    generate(server, "a long enough answer", max_new_tokens=100)  # 40 verify steps of 2.5 tokens
    for path in ("/server_info", "/get_server_info"):
        status, info, _ = server.request(path)
        assert status == 200
        expected = {"tp_size": 2, "model_path": "/srv/models/kimi-k2.5-standin", "served_model_name": "kimi",
                    "mem_fraction_static": 0.85, "cuda_graph_max_bs_decode": 16, "trust_remote_code": True,
                    "enable_metrics": True, "nnodes": 1, "node_rank": 0, "port": server.port,
                    "host": "127.0.0.1", "speculative_algorithm": "EAGLE3",
                    "speculative_draft_model_path": "/srv/models/draft", "speculative_num_steps": 3,
                    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                    "flashinfer_allreduce_fusion_backend": "trtllm", "api_key": None, "frontend": "python"}
        assert {key: info.get(key) for key in expected} == expected
        assert info["version"] and info["launch_command"].endswith(" ".join(server.args))
        assert "STAND-IN" in info["standin"]
        state = info["internal_states"][0]
        # the warm-up request (8 tokens in 4 steps: the last one is cut short) and the 100-token one
        assert state["avg_spec_accept_length"] == pytest.approx(108 / 44.0)
    assert "Endpoint '/get_server_info' is deprecated" in server.output()


def test_speculative_defaults_when_unset(standin):
    server = standin(args=["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d"]).start()
    info = server.request("/server_info")[1]
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) \
        == (3, 1, 4)
    plain = standin().start().request("/server_info")[1]
    assert plain["speculative_algorithm"] is None and "avg_spec_accept_length" not in plain["internal_states"][0]


def test_model_info_and_models(standin):
    server = standin(args=["--served-model-name", "kimi"]).start()
    for path in ("/model_info", "/get_model_info"):
        status, info, _ = server.request(path)
        assert status == 200 and info["model_path"] == "/srv/models/kimi-k2.5-standin"
        assert info["served_model_name"] == "kimi" and info["is_generation"] is True
    status, models, _ = server.request("/v1/models")
    assert status == 200 and models["object"] == "list"
    assert [(m["id"], m["owned_by"], m["object"]) for m in models["data"]] == [("kimi", "sglang", "model")]
    assert server.request("/v1/models/kimi")[0] == 200 and server.request("/v1/models/other")[0] == 404
    assert server.request("/nope")[0] == 404 and server.request("/generate")[0] == 405


def test_model_config_json_is_read_when_present(standin, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                                   "model_type": "kimi_k25", "text_config": {"hidden_size": 4096}}))
    server = standin({"fusion_log": "enabled"}, ["--tp-size", "2"] + FUSION, model=str(model)).start()
    assert "hidden_dim=4096" in server.output() and "type=KimiK25ForConditionalGeneration" in server.output()
    assert server.request("/model_info")[1]["architectures"] == ["KimiK25ForConditionalGeneration"]


def test_metrics_only_with_the_flag(standin):
    assert standin().start().request("/metrics")[0] == 404
    server = standin(args=["--enable-metrics"]).start().wait_ready()
    status, text, _ = server.request("/metrics")
    label = 'engine_type="unified",is_streaming="%s",model_name="' + MODEL_NAME + '"'
    # the start-up warm-up is counted, as the real server counts its own (8 new tokens there too)
    assert status == 200 and "sglang:generation_tokens_total{%s} 8.0" % (label % "false") in text
    assert 'is_streaming="true"' not in text  # no streamed request yet: no such sample
    server.request("/generate", {"text": "counted", "sampling_params": {"max_new_tokens": 3, "temperature": 0}})
    server.stream("/generate", {"text": "streamed", "stream": True,
                                "sampling_params": {"max_new_tokens": 5, "temperature": 0}})
    text = server.request("/metrics")[1]
    assert "sglang:generation_tokens_total{%s} 11.0" % (label % "false") in text
    assert "sglang:generation_tokens_total{%s} 5.0" % (label % "true") in text
    assert 'sglang:num_running_reqs{engine_type="unified",model_name="%s",moe_ep_rank="0",pp_rank="0",' \
           'tp_rank="0"} 0.0' % MODEL_NAME in text


def test_request_time_stats_only_with_metrics(standin):
    body = {"text": "timed", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    plain = standin().start().wait_ready().request("/generate", body)[1]["meta_info"]
    timed = standin(args=["--enable-metrics"]).start().wait_ready().request("/generate", body)[1]["meta_info"]
    stats = {"forward_entry_time", "prefill_finished_time", "queue_time", "request_received_ts", "first_token_latency",
             "api_server_dispatch_finish_ts", "request_finished_ts", "decode_throughput"}
    assert not stats & set(plain) and stats <= set(timed)
    assert timed["request_received_ts"] <= timed["prefill_finished_time"] <= timed["request_finished_ts"]
    assert timed["decode_throughput"] > 0 and list(timed)[-1] == "response_sent_to_client_ts"


@pytest.mark.parametrize("value,text", [(21, "21.0"), (0, "0.0"), (0.5, "0.5"), (999999.0, "999999.0"),
                                        (1e6, "1e+06"), (12345678.9, "1.23456789e+07"), (3e10, "3e+10"),
                                        (float("inf"), "+Inf"), (float("nan"), "NaN")])
def test_sample_values_are_printed_as_prometheus_client_prints_them(value, text):
    assert metrics.prometheus_float(value) == text


# --------------------------------------------------------------------------------------------- generation

def test_generate_non_stream(standin):
    server = standin(args=EAGLE).start().wait_ready()
    out = generate(server, "The capital of France is", max_new_tokens=12)
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 12 == len(out["output_ids"]) and meta["prompt_tokens"] == 5
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert meta["e2e_latency"] > 0 and meta["spec_verify_ct"] == 6 and meta["spec_accept_length"] == 2.0
    assert meta["spec_num_proposed_drafts"] == 18 and meta["spec_num_correct_drafts"] == 6
    assert out["text"].strip()
    ids = server.request("/generate", {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3}})[1]
    assert ids["meta_info"]["prompt_tokens"] == 3 and ids["meta_info"]["completion_tokens"] == 3
    batch = server.request("/generate", {"text": ["a", "b c"], "sampling_params": {"max_new_tokens": 2}})[1]
    assert [b["meta_info"]["prompt_tokens"] for b in batch] == [1, 2]
    assert server.request("/generate", {"sampling_params": {}})[0] == 400
    assert server.request("/generate", b"{not json")[0] == 400


def test_generate_stop_string(standin):
    server = standin().start().wait_ready()
    text = generate(server, "stop test", max_new_tokens=20)["text"]
    word = text.split()[3]
    out = server.request("/generate", {"text": "stop test", "sampling_params": {
        "max_new_tokens": 20, "temperature": 0, "stop": [word]}})[1]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": word}
    assert word not in out["text"] and text.startswith(out["text"])


def test_generate_stream(standin):
    server = standin(args=EAGLE).start().wait_ready()
    events = server.stream("/generate", {"text": "Stream me", "stream": True,
                                         "sampling_params": {"max_new_tokens": 9, "temperature": 0}})
    assert events[-1][1] == "[DONE]"
    chunks = [payload for _, payload in events[:-1]]
    assert len(chunks) == 5  # accept length 2: 2+2+2+2+1 tokens per verify step
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == [2, 4, 6, 8, 9]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 9}
    assert "e2e_latency" in chunks[-1]["meta_info"] and "e2e_latency" not in chunks[0]["meta_info"]
    for before, after in zip(chunks, chunks[1:]):  # cumulative text, as without --incremental-streaming-output
        assert after["text"].startswith(before["text"])
    assert chunks[-1]["text"] == generate(server, "Stream me", max_new_tokens=9)["text"]


def test_v1_completions(standin):
    server = standin(args=["--served-model-name", "kimi"]).start().wait_ready()
    status, out, _ = server.request("/v1/completions", {"model": "kimi", "prompt": "Say hi", "max_tokens": 7,
                                                        "temperature": 0})
    assert status == 200, out
    assert out["object"] == "text_completion" and out["model"] == "kimi"
    choice = out["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "length" and choice["matched_stop"] is None
    assert out["usage"]["completion_tokens"] == 7 and out["usage"]["prompt_tokens"] == 2
    assert out["usage"]["total_tokens"] == 9 and out["metadata"] == {"weight_version": "default"}
    assert choice["text"] == generate(server, "Say hi", max_new_tokens=7)["text"]  # same model, same greedy text
    default = server.request("/v1/completions", {"prompt": "Say hi", "temperature": 0})[1]
    assert default["usage"]["completion_tokens"] == 16  # OpenAI's default max_tokens
    events = server.stream("/v1/completions", {"model": "kimi", "prompt": "Say hi", "max_tokens": 7, "temperature": 0,
                                               "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1][1] == "[DONE]"
    chunks = [payload for _, payload in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == choice["text"]  # deltas
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 7
    status, bad, _ = server.request("/v1/completions", b'{"prompt": "x"}', headers={"Content-Type": "text/plain"})
    assert status == 400 and bad["object"] == "error"


def test_v1_chat_completions(standin):
    server = standin().start().wait_ready()
    status, out, _ = server.request("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                             "max_tokens": 4, "temperature": 0})
    assert status == 200 and out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant" and out["usage"]["completion_tokens"] == 4
    events = server.stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                    "max_tokens": 4, "temperature": 0, "stream": True,
                                                    "stream_options": {"include_usage": True}})
    assert events[-1][1] == "[DONE]"
    chunks = [payload for _, payload in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[:-1])
    assert text == out["choices"][0]["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    plain = server.stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                   "max_tokens": 4, "temperature": 0, "stream": True})
    assert all(p["usage"] is None and p["choices"] for _, p in plain[:-1])  # no usage chunk unless asked


# ------------------------------------------------------------------------------------------------ API key

def test_api_key(standin):
    server = standin(args=["--api-key", "s3cret"]).start().wait_ready()
    for path in ("/generate", "/v1/completions"):
        status, body, _ = server.request(path, {"text": "x", "prompt": "x"})
        assert (status, body) == (401, {"error": "Unauthorized"})
    assert server.request("/server_info")[0] == 401 and server.request("/model_info")[0] == 401
    assert server.request("/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert server.request("/v1/models", headers={"Authorization": "Basic s3cret"})[0] == 401
    good = {"Authorization": "Bearer s3cret"}
    assert server.request("/v1/models", headers=good)[0] == 200
    assert server.request("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2}}, headers=good)[0] == 200
    # health and readiness stay open, as in sglang/srt/utils/auth.py (probes carry no secret)
    assert server.request("/health")[0] == 200 and server.request("/health_generate")[0] == 200
    assert server.request("/ready")[0] == 200
    assert "s3cret" not in server.output().split("server_args=")[0]


def test_api_key_from_a_config_file_stays_out_of_the_process_arguments(standin, tmp_path):
    """How the sglang_server role passes the key: --config <yaml> (sglang 0.5.4-0.5.23 merge it in memory)."""
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "s3cret-from-file"\n')
    server = standin(args=["--config", str(options)]).start().wait_ready()
    good = {"Authorization": "Bearer s3cret-from-file"}
    assert server.request("/v1/models")[0] == 401
    assert server.request("/v1/models", headers=good)[0] == 200
    with open("/proc/%d/cmdline" % server.proc.pid, "rb") as handle:
        cmdline = handle.read()
    assert str(options).encode() in cmdline and b"s3cret-from-file" not in cmdline


def test_a_key_that_begins_with_a_dash_stops_the_start_as_it_stopped_the_real_server(tmp_path):
    """The real 0.5.17 merged --config into `--api-key VALUE` and argparse took "-..." for an option (device run of
    2026-12-03, 21:02 UTC); sglang_server refuses such a key before it writes anything."""
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "-Zq81xKdfe0"\n')
    proc = run_flags(["--model-path", "/m", "--config", str(options)])
    assert proc.returncode == 2 and "argument --api-key: expected one argument" in proc.stderr


def test_config_file_must_be_yaml(standin, tmp_path):
    options = tmp_path / "api-key.env"
    options.write_text("api-key: x\n")
    proc = run_flags(["--model-path", "/m", "--config", str(options)])
    assert proc.returncode == 2 and "YAML" in proc.stderr
