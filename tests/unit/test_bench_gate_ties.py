"""Greedy completions that part at a tie (module_utils/bench_gate.py tie_at): where both servers' own top-2 logprobs
hold the two tokens as their two best, at most tie_max_gap apart, the parting is not an error. Read from the real SGLang server's answers
(tests/fixtures/device/h200x1_sglang_greedy_logprobs.json) through the runner's own conversion."""
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible.module_utils import bench_gate as bg
from tests.helpers.script_module import REPO, load_file

runner = load_file("roles/sglang_benchmark/files/bench_runner.py", "bench_runner_ties")
CAPTURE = os.path.join(REPO, "tests", "fixtures", "device", "h200x1_sglang_greedy_logprobs.json")
# Asked for logprobs, the plain server took 58 where EAGLE-3 took 63, both -2.9096 in each (the 3rd new token).
TIED_PROMPT = "tokens flow through the layers"


@pytest.fixture(scope="module")
def legs():
    """Each leg's completions as bench_runner.completions() records them, from the real server's replies."""
    with open(CAPTURE, encoding="utf-8") as handle:
        capture = json.load(handle)
    return {name: [{"prompt": prompt, "output_ids": reply["output_ids"],
                    "top_logprobs": runner.top_logprobs(reply["top_logprobs"])}
                   for prompt, reply in replies.items()]
            for name, replies in capture["legs"].items()}


def test_the_real_servers_tie_counts_as_matching(legs):
    result = bg.compare_completions(legs["plain"], legs["spec_nofusion"])
    tied = [r for r in result["rows"] if r["tie_at"] is not None]
    assert [(r["prompt"], r["tie_at"]) for r in tied] == [(TIED_PROMPT, 2)] and result["ties"] == 1
    assert result["match_rate"] == 1.0
    # EAGLE-3's verify gave the two tokens one bf16 step apart (2^-6), the plain decode exactly one value
    assert bg.compare_completions(legs["plain"], legs["spec_nofusion"], tie_max_gap=0.0)["ties"] == 0
    without = bg.compare_completions(*[[dict(c, top_logprobs=None) for c in legs[n]] for n in ("plain", "spec_nofusion")])
    assert without["ties"] == 0 and without["match_rate"] < 1.0  # without logprobs: counted position by position


def completion(ids, top, prompt="p"):
    return {"prompt": prompt, "output_ids": ids, "top_logprobs": top}


TIE = [[5, -1.0], [6, -1.0]]


@pytest.mark.parametrize("ref_top,obs_top,why", [
    (TIE, [[6, -1.0], [5, -1.2]], "the observed server gives the two tokens values further apart than 0.125"),
    ([[5, -1.0], [6, -1.5]], TIE, "the reference server had a clear best"),
    ([[5, -1.0], [7, -1.0]], TIE, "the observed token is not in the reference's top two"),
    (None, TIE, "the reference has no logprobs (a baseline recorded before they were asked for)"),
    ([[5, None], [6, None]], TIE, "the reference's logprobs are not numbers"),
    ([[5, float("nan")], [6, float("nan")]], TIE, "the reference's logprobs are NaN"),
    ([[5, True], [6, True]], TIE, "the reference's logprobs are not numbers"),
])
def test_a_parting_that_is_not_a_tie_of_both_servers_counts_against_the_match(ref_top, obs_top, why):
    reference = completion([1, 2, 5, 8], [[[1, -0.1]], [[2, -0.1]], ref_top, [[8, -0.1]]] if ref_top else None)
    observed = completion([1, 2, 6, 9], [[[1, -0.1]], [[2, -0.1]], obs_top, [[9, -0.1]]])
    result = bg.compare_completions([reference], [observed])
    assert result["ties"] == 0 and result["match_rate"] == 0.5, why


def test_first_difference():
    assert bg.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert bg.first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert bg.first_difference([1, 2, 3], [1, 2]) == 2
    assert bg.first_difference([], [4]) == 0


def test_a_completion_that_stops_early_is_no_tie():
    # one server stopped (EOS) where the other went on: no second token to weigh, counted position by position
    reference = completion([1, 5], [[[1, -0.1]], TIE])
    assert bg.tie_at(reference, completion([1, 5, 6], [[[1, -0.1]], TIE, TIE])) is None


def test_only_the_first_parting_can_be_a_tie():
    reference = completion([1, 5, 2], [[[1, -0.1], [3, -0.9]], TIE, [[2, -0.1]]])
    observed = completion([3, 6, 2], [[[3, -0.1], [1, -0.9]], TIE, [[2, -0.1]]])
    assert bg.tie_at(reference, observed) is None
    assert bg.tie_at(reference, completion([1, 6, 7], [[[1, -0.1]], TIE, [[7, -0.1]]])) == 1


def test_garbage_is_never_excused_and_the_message_names_the_ties():
    reference = [completion([1, 5, 8], [[[1, -0.1]], TIE, [[8, -0.1]]], "a"), completion([4, 4], None, "b")]
    garbage = [completion([90, 91, 92], [[[90, -0.1], [1, -3.0]], [[91, -0.2]], [[92, -0.1]]], "a"),
               completion([93, 94], [[[93, -0.1]], [[94, -0.1]]], "b")]
    assert bg.compare_completions(reference, garbage)["match_rate"] == 0.0
    tied = [completion([1, 6, 2], [[[1, -0.1]], TIE, [[2, -0.1]]], "a"), completion([4, 4], None, "b")]
    correctness = bg.compare_completions(reference, tied)
    assert correctness["match_rate"] == 1.0 and correctness["rows"][0]["tie_at"] == 1
    summary = bg.summarize([{"concurrency": 1, "repeat": 1, "rc": 0, "error": None,
                             "result": {"completed": 4, "output_throughput": 200.0}}], 4)
    verdict = bg.judge(summary, 1, 100.0, 5.0, correctness, 0.75)
    message = bg.describe("h1", verdict, summary, "recorded", correctness, 0.75)
    assert verdict["passed"] and "1 parted at a tie in both servers' logprobs" in message


def test_the_gap_a_tie_may_have_is_the_callers():
    reference = completion([1, 5], [[[1, -0.1]], [[5, -1.0], [6, -1.0625]]])
    observed = completion([1, 6], [[[1, -0.1]], [[6, -1.0], [5, -1.0]]])
    assert bg.tie_at(reference, observed) == 1  # 2^-4 apart: within the default, one bf16 step of logits in [16, 32)
    assert bg.tie_at(reference, observed, max_gap=0.0) is None  # exact ties only
    assert bg.compare_completions([reference], [observed], tie_max_gap=0.0)["match_rate"] == 0.5
    assert bg.input_problems("h", 5.0, 1, 0.75, tie_max_gap=0.6) == ["tie_max_gap must be from 0 to 0.5 (got 0.6)"]


class _Server(BaseHTTPRequestHandler):
    """/generate that refuses logprobs with HTTP 400 (as some speculative algorithms do) and answers without them;
    with a key set, it refuses every request with another key (401, as SGLang does)."""
    asked = []
    key = None

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.asked.append(body)
        if self.key and self.headers.get("Authorization") != "Bearer " + self.key:
            status, reply = 401, {"error": "Unauthorized"}
        elif body.get("return_logprob"):
            status, reply = 400, {"error": {"message": "logprobs not supported"}}
        else:
            status, reply = 200, {"text": " a b", "output_ids": [1, 2], "meta_info": {}}
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args):
        pass


def ask(server_key, api_key):
    """The runner's completions of one prompt from _Server, and the bodies it was sent."""
    handler = type("Server", (_Server,), {"asked": [], "key": server_key})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = runner.completions({"prompts": ["p"], "base_url": "http://127.0.0.1:%d" % server.server_port,
                                  "correctness_max_new_tokens": 2, "request_timeout_s": 10}, api_key)
    finally:
        server.shutdown()
    return out, handler.asked


def test_a_server_that_refuses_logprobs_is_asked_again_without_them():
    out, asked = ask(None, None)
    assert out == [{"prompt": "p", "text": " a b", "output_ids": [1, 2], "top_logprobs": None,
                    "logprobs_refused": "HTTP 400"}]
    assert [b.get("top_logprobs_num") for b in asked] == [2, None]


def test_a_refused_key_is_an_error_not_a_refusal_of_logprobs():
    out, asked = ask("right-key", "wrong-key")
    assert [b.get("top_logprobs_num") for b in asked] == [2]  # not asked again without logprobs
    assert list(out[0]) == ["prompt", "error"] and "401" in out[0]["error"] and "key" not in out[0]["error"]
    out, asked = ask("right-key", "right-key")
    assert out[0]["logprobs_refused"] == "HTTP 400" and len(asked) == 2
