#!/usr/bin/env python3
"""Writes the lab stand-in model's tokenizer (tokenizer.json + tokenizer_config.json), a real one.

SGLang's benchmark client loads the model's tokenizer with transformers' AutoTokenizer (random-ids dataset,
offline), so the stand-in model needs a tokenizer that library accepts: a word-level vocabulary built with
HuggingFace `tokenizers` from the words the SGLang stand-in server emits. Constructed by us, not downloaded.
Run with a Python that has `tokenizers` (e.g. the benchmark client venv):
    python lab/models/make_tokenizer.py lab/models/kimi-k2.5-standin
"""
import json
import os
import sys

from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "standins"))
from sglang_standin import tokens as standin  # noqa: E402  pylint: disable=wrong-import-position,import-error

SPECIALS = ["<unk>", "<s>", "</s>"]


def main(target):
    words = list(dict.fromkeys(list(standin.WORDS) + list(standin.GARBAGE)))
    vocab = {word: index for index, word in enumerate(SPECIALS + words)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(os.path.join(target, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "model_max_length": 262144,
              "_comment": "Constructed lab stand-in tokenizer: see lab/models/README.md"}
    with open(os.path.join(target, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
