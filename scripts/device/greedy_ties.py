"""Where two greedy legs of the e2e run part, and whether the server's own logprobs show a tie there.

EAGLE-3 is lossless under greedy decoding only where the argmax is unique. The test model has random weights and
an 88-word vocabulary, so its two best logits are often within one bf16 step of each other; the plain leg and the
verify step then compute the same logits with other kernels (other batch shapes, another reduction order) and may
round a tie either way. A mismatch is reported as it is (greedy_match counts it); this says, for each, whether the
two tokens were tied in both legs' own logprobs at the first position where the outputs part (a numerical tie:
either token is a greedy answer) or not (a divergence: a finding to chase).

Pure logic, no I/O: scripts/device/sglang_e2e.py feeds it the completions and the top-2 logprobs each leg's
server returned (/generate with return_logprob, top_logprobs_num 2, as SGLang sends them). Those are read with the
benchmark gate's own pieces (the runner's conversion, module_utils/bench_gate.py's parser, gap and tie test), so the
evidence and the production gate cannot disagree on what a tie is; only the bound differs (TIE_BOUND here, strict
for the test model; the gate's sglang_benchmark_tie_max_gap for production models).
"""
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _part in (("module_utils",), ("roles", "sglang_benchmark", "files")):
    if os.path.join(_REPO, *_part) not in sys.path:
        sys.path.append(os.path.join(_REPO, *_part))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import project_utils  # noqa: E402  pylint: disable=wrong-import-position
project_utils.importable()
import bench_gate  # noqa: E402  pylint: disable=wrong-import-position
import bench_runner  # noqa: E402  pylint: disable=wrong-import-position

# Two logits within one bf16 step of each other can round to one value. For the test model's logits (|logit| < 4,
# read in tests/fixtures/device/test_model_greedy_margins_cpu.json) one step is at most 2**-6.
TIE_BOUND = 2.0 ** -6


def top_at(top_logprobs, position):
    """{token id: logprob} of one position of SGLang's meta_info.output_top_logprobs ([[logprob, id, text], ...]
    per position, None where the server gave none); {} where the position is absent."""
    return bench_gate.top_at(bench_runner.top_logprobs(top_logprobs), position)


def gap(distribution, chosen, other):
    """How much more likely the chosen token was than the other one in one leg's distribution (rounded for the
    record); None where either is not among its top tokens."""
    found = bench_gate.logprob_gap(distribution, chosen, other)
    return None if found is None else round(found, 6)


def explain(plain_ids, leg_ids, plain_top, leg_top, bound=TIE_BOUND, plain_decoded=None, leg_decoded=None):
    """One mismatch between a leg and the plain leg: where they part, both tokens, each leg's top logprobs there and
    whether both legs saw a tie (each leg's gap between its own token and the other's within the bound). None when
    the outputs are equal. *_decoded: what the request that returned *_top decoded; its logprobs at the position
    count only if it decoded the same tokens before it (otherwise they belong to another prefix)."""
    position = bench_gate.first_difference(plain_ids, leg_ids)
    if position is None:
        return None
    plain_token = plain_ids[position] if position < len(plain_ids) else None
    leg_token = leg_ids[position] if position < len(leg_ids) else None
    plain_dist, leg_dist = top_at(plain_top, position), top_at(leg_top, position)
    if plain_decoded is not None and list(plain_decoded[:position]) != list(plain_ids[:position]):
        plain_dist = {}
    if leg_decoded is not None and list(leg_decoded[:position]) != list(leg_ids[:position]):
        leg_dist = {}
    plain_gap, leg_gap = gap(plain_dist, plain_token, leg_token), gap(leg_dist, leg_token, plain_token)
    if plain_gap is None or leg_gap is None:
        cause = "unknown" if not plain_dist or not leg_dist else "divergence"
    else:
        tied = bench_gate.within_gap(plain_gap, bound) and bench_gate.within_gap(leg_gap, bound)
        cause = "tie" if tied else "divergence"
    return {"position": position, "plain_token": plain_token, "leg_token": leg_token,
            "plain_top": sorted(([t, lp] for t, lp in plain_dist.items()), key=lambda pair: -pair[1]),
            "leg_top": sorted(([t, lp] for t, lp in leg_dist.items()), key=lambda pair: -pair[1]),
            "plain_gap": plain_gap, "leg_gap": leg_gap, "cause": cause}


def mismatches(prompts, plain, leg, plain_logprobs, leg_logprobs, bound=TIE_BOUND):
    """Every prompt whose leg output differs from the plain leg's, explained. plain/leg: {prompt: output ids} (the
    benchmark client's greedy completions); *_logprobs: {prompt: {"output_ids": [...], "top_logprobs": [...]}}, the
    logprob requests to each leg's server."""
    out = []
    for index, prompt in enumerate(prompts):
        if prompt not in plain or prompt not in leg:
            continue
        ours, theirs = plain_logprobs.get(prompt) or {}, leg_logprobs.get(prompt) or {}
        found = explain(plain[prompt] or [], leg[prompt] or [], ours.get("top_logprobs"), theirs.get("top_logprobs"),
                        bound, ours.get("output_ids") or [], theirs.get("output_ids") or [])
        if found:
            out.append(dict(found, prompt_index=index, prompt=prompt))
    return out


def repeats(prompts, completions, logprobs, bound=TIE_BOUND):
    """One server asked twice: where its logprob requests decoded other tokens than the benchmark client's
    completions, explained with the logprob request's own distribution (the same server breaking a tie another way
    when the prompt is cached or batched otherwise is a tie too). Same arguments as mismatches, for one leg."""
    out = []
    for index, prompt in enumerate(prompts):
        entry = logprobs.get(prompt) or {}
        if prompt not in completions or "output_ids" not in entry:
            continue
        top = entry.get("top_logprobs")
        found = explain(completions[prompt] or [], entry["output_ids"] or [], top, top, bound)
        if found:
            out.append(dict(found, prompt_index=index, prompt=prompt))
    return out


def gaps(top_logprobs):
    """Per position, the gap between the two best logprobs a server returned (None where it gave fewer than two):
    how near a tie each greedy decision of a leg was."""
    out = []
    for position in range(len(top_logprobs) if isinstance(top_logprobs, list) else 0):
        best = sorted(top_at(top_logprobs, position).values(), reverse=True)
        out.append(round(best[0] - best[1], 6) if len(best) >= 2 else None)
    return out


def summary(found):
    """How many mismatches of each cause."""
    counts = {"tie": 0, "divergence": 0, "unknown": 0}
    for item in found:
        counts[item["cause"]] += 1
    return counts
