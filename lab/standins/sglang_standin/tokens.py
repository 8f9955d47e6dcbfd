"""The made-up completions: words from a small vocabulary, each with its top two logprobs.

Greedy output (temperature 0, or an explicit seed) is a function of the prompt alone; `greedy_ties` positions
give the two best one logprob and `tie_break` picks the one taken; `wrong_output` makes deterministic garbage (a
fast, silently broken kernel). lab/models/make_tokenizer.py builds the stand-in models' tokenizer from WORDS.
"""
import hashlib
import random
import re

WORDS = ("the", "of", "and", "to", "in", "is", "that", "it", "for", "as", "with", "was", "on", "be", "by",
         "this", "are", "from", "at", "or", "an", "which", "city", "Paris", "river", "model", "kernel",
         "token", "server", "light", "blue", "north", "stone", "water", "market", "garden", "music", "paper",
         "window", "winter", "summer", "forest", "valley", "bridge", "number", "answer", "reason", "simple",
         "quiet", "early", "later", "small", "large", "first", "second", "third", "one", "two", "three", "new",
         "old", "good", "great", "little", ".", ",")
GARBAGE = "#%&*+<>?@^~|zqxjkvw"


def count_prompt_tokens(prompt):
    """No tokenizer: token ids count as given, text as words and punctuation."""
    if isinstance(prompt, list):
        return max(1, len(prompt))
    return max(1, len(re.findall(r"\w+|[^\w\s]", prompt or "")))


def make_tokens(cfg, fresh_rng, prompt_key, n, temperature, seed):
    """n (token_id, text) pairs and each one's top two [(token_id, logprob), ...]. Greedy (temperature 0, or an
    explicit seed) is a function of the prompt; at a greedy tie (greedy_ties) both tokens have one logprob and
    tie_break picks the one taken, from which the rest of the completion follows. `fresh_rng()` gives the
    generator of a sampled (non-greedy) request."""
    wrong = cfg["wrong_output"]

    def seeded(tag):
        digest = hashlib.sha256(("%s|%s|%s%s" % ("wrong" if wrong else "right",
                                                 "" if temperature == 0 else seed, prompt_key, tag)).encode())
        return random.Random(digest.digest())
    rng = seeded("") if temperature == 0 or seed is not None else fresh_rng()
    ties = set(cfg["greedy_ties"]) if temperature == 0 and not wrong else set()
    tokens, top = [], []
    for position in range(n):
        if wrong:
            text = " " + "".join(rng.choice(GARBAGE) for _ in range(rng.randint(2, 5)))
            token_id = 100000 + rng.randrange(50000)
            tokens.append((token_id, text))
            top.append([(token_id, -1.5), (token_id + 1, -2.25)])
            continue
        index = rng.randrange(len(WORDS))
        other = (index + 7) % len(WORDS)  # the runner-up, and its logprob, follow from the token (no draw)
        best = -0.25 - 0.125 * (index % 8)
        top.append([(1000 + index, best), (1000 + other, best if position in ties else best - 0.5)])
        if position in ties and cfg["tie_break"] == "second":
            index, rng = other, seeded("|tie at %d" % position)
        word = WORDS[index]
        tokens.append((1000 + index, word if word in ".," else " " + word))
    return tokens, top


def logprob_fields(tokens, top, sent, top_logprobs_num):
    """tokenizer_manager.add_logprob_to_meta_info() for the first `sent` tokens: (logprob, token id, text) entries,
    text None unless asked for; no input side without logprob_start_len (empty lists, as the real 0.5.17 server
    answered)."""
    chosen = [[dict(pairs)[token_id], token_id, None] for (token_id, _text), pairs in zip(tokens, top)]
    out = {"input_token_logprobs": [], "output_token_logprobs": chosen[:sent], "output_token_logprobs_length": sent}
    if top_logprobs_num > 0:
        out["input_top_logprobs"] = []
        out["output_top_logprobs"] = [[[logprob, token_id, None] for token_id, logprob in pairs][:top_logprobs_num]
                                      for pairs in top[:sent]]
    return out
