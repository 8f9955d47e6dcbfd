"""Made-up completions: greedy output is a function of the prompt, wrong_output is garbage, and logprobs come
as SGLang sends them, with one logprob for both tokens at a greedy tie."""
from tests.helpers.sglang_standin import generate, logprob_generate


def test_greedy_output_is_deterministic(standin):
    first = standin().start().wait_ready()
    again = standin().start().wait_ready()
    a = generate(first, "What is 2+2?", max_new_tokens=16)["text"]
    assert generate(first, "What is 2+2?", max_new_tokens=16)["text"] == a
    assert generate(again, "What is 2+2?", max_new_tokens=16)["text"] == a  # across restarts too
    assert generate(first, "What is 2+3?", max_new_tokens=16)["text"] != a
    assert a.startswith(generate(first, "What is 2+2?", max_new_tokens=5)["text"])  # a prefix of a longer answer
    sampled = {generate(first, "What is 2+2?", max_new_tokens=16, temperature=0.8)["text"] for _ in range(3)}
    assert len(sampled) > 1


def test_wrong_output_differs(standin):
    right = standin().start()
    wrong = standin({"wrong_output": True}).start()
    right.wait_ready()
    wrong.wait_ready()
    good = generate(right, "What is 2+2?", max_new_tokens=16)
    bad = generate(wrong, "What is 2+2?", max_new_tokens=16)
    print("\nright: %r\nwrong: %r" % (good["text"], bad["text"]))
    assert bad["text"] != good["text"] and bad["output_ids"] != good["output_ids"]
    assert generate(wrong, "What is 2+2?", max_new_tokens=16)["text"] == bad["text"]  # deterministic garbage
    assert bad["meta_info"]["completion_tokens"] == 16


def test_logprobs_come_as_the_real_server_sends_them(standin):
    server = standin().start().wait_ready()
    out = logprob_generate(server, "What is 2+2?")
    meta = out["meta_info"]
    assert meta["output_token_logprobs_length"] == 8 == len(meta["output_top_logprobs"])
    for token_id, chosen, top in zip(out["output_ids"], meta["output_token_logprobs"], meta["output_top_logprobs"]):
        assert chosen[1:] == [token_id, None] and len(top) == 2
        assert top[0][1] == token_id and top[0][0] == chosen[0] > top[1][0]  # greedy took the best; no tie here
    assert "output_top_logprobs" not in generate(server, "What is 2+2?", return_logprob=True)["meta_info"]
    assert "output_token_logprobs" not in generate(server, "What is 2+2?")["meta_info"]
    assert out["output_ids"] == generate(server, "What is 2+2?")["output_ids"]  # asking for logprobs changes nothing


def test_a_greedy_tie_reports_one_logprob_and_the_tie_break_picks_the_token(standin):
    plain = standin().start()
    first = standin({"greedy_ties": [3], "tie_break": "first"}).start()
    second = standin({"greedy_ties": [3], "tie_break": "second"}).start()
    outs = [logprob_generate(s.wait_ready(), "What is 2+2?", max_new_tokens=12) for s in (plain, first, second)]
    assert outs[1]["output_ids"] == outs[0]["output_ids"]  # the first of the tied pair is the untied choice
    assert outs[2]["output_ids"][:3] == outs[0]["output_ids"][:3] and outs[2]["output_ids"][3] != outs[0]["output_ids"][3]
    for out in outs[1:]:
        top = out["meta_info"]["output_top_logprobs"][3]
        assert top[0][0] == top[1][0] and out["output_ids"][3] in (top[0][1], top[1][1])
    assert outs[0]["meta_info"]["output_top_logprobs"][3][1][0] < outs[0]["meta_info"]["output_top_logprobs"][3][0][0]
    # after the tie the completion follows the token taken
    assert outs[2]["output_ids"][4:] != outs[0]["output_ids"][4:]


def test_garbage_has_no_ties_and_bad_logprob_fields_are_refused(standin):
    wrong = standin({"wrong_output": True, "greedy_ties": [0, 1, 2]}).start().wait_ready()
    top = logprob_generate(wrong, "What is 2+2?")["meta_info"]["output_top_logprobs"]
    assert all(row[0][0] > row[1][0] for row in top)
    status, out, _ = wrong.request("/generate", {"text": "x", "return_logprob": "yes"})
    assert status == 400 and "return_logprob must be true or false" in out["error"]["message"]
    status, out, _ = wrong.request("/generate", {"text": "x", "return_logprob": True, "top_logprobs_num": -1})
    assert status == 400 and "top_logprobs_num" in out["error"]["message"]
