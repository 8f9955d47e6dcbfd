"""Speculative decoding as the stand-in plays it: SGLang's defaults for the draft settings, tokens arriving in
chunks of `accept_length` on average (one chunk per verify step), and the figures a request and the decode log
line report about it."""
import math


def resolve_speculative(args):
    """The three draft settings SGLang would run with (None each without --speculative-algorithm)."""
    speculative = bool(args.speculative_algorithm)
    steps, topk, draft = args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens
    if speculative and steps is None and topk is None and draft is None:
        steps, topk, draft = 3, 1, 4  # what SGLang picks for DeepSeek-like MoE models
    if speculative:
        steps = 3 if steps is None else steps
        topk = 1 if topk is None else topk
        draft = (steps + 1 if topk == 1 else 4) if draft is None else draft
    return {"speculative_num_steps": steps, "speculative_eagle_topk": topk, "speculative_num_draft_tokens": draft}


def step_sizes(n, speculative, accept_length):
    """Tokens per forward step: 1 without speculation, else accept_length on average (bonus token included)."""
    if not speculative:
        return [1] * n
    length, sizes, acc, done = float(accept_length), [], 0.0, 0
    while done < n:
        acc += length
        size = max(1, min(int(math.floor(acc + 1e-9)) - done, n - done))
        sizes.append(size)
        done += size
    return sizes


def drafts_per_round(spec):
    """Draft tokens proposed per verify step (the bonus token is not a draft)."""
    return (spec["speculative_num_draft_tokens"] or 1) - 1


def decode_accept_text(spec, tokens, verify_ct):
    """The `accept len: ..., accept rate: ..., ` part of the decode log line."""
    length = tokens / float(verify_ct)
    per_round = drafts_per_round(spec)
    rate = (length - 1) / per_round if per_round > 0 else 0.0
    return "accept len: %.2f, accept rate: %.2f, " % (length, rate)


def spec_meta_info(spec, tokens, verify_ct):
    """A finished request's speculative meta_info fields, in SGLang's order (none when nothing was proposed)."""
    proposed = verify_ct * drafts_per_round(spec)
    correct = tokens - verify_ct
    if proposed <= 0:
        return {}
    return {"spec_accept_rate": correct / float(proposed), "spec_accept_length": tokens / float(verify_ct),
            "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": proposed, "spec_verify_ct": verify_ct,
            "spec_accepted_drafts": correct, "spec_proposed_drafts": proposed}


def average_accept_length(stats, fallback):
    """Accepted tokens per verify step over the requests served so far; `fallback` before the first one."""
    return stats["spec_accept_tokens"] / float(stats["spec_forward_ct"]) if stats["spec_forward_ct"] else fallback
