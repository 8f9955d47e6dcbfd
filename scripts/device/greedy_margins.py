#!/usr/bin/env python3
"""The e2e test model's greedy decisions on the CPU, with how far apart its two best logits were at each.

Offline and without a GPU: Hugging Face transformers runs the random Qwen3 that make_test_model.py wrote, on the
e2e run's own prompts (e2e_bed.PROMPTS), greedy, in bfloat16 (the server's dtype) and in float32. Each decision
records its token, the runner-up and the gap between their logits; a gap of 0 in bfloat16 is a tie that any other
kernel may break the other way. This is how the one greedy mismatch of the 1x H200 run was explained before the
real server's own logprobs were recorded (scripts/device/README.md).

    make_test_model.py --out DIR --hidden 2048 --layers 4        # the e2e's model (e2e_bed.HIDDEN, LAYERS)
    greedy_margins.py --model DIR/target [--tokens 8] > tests/fixtures/device/test_model_greedy_margins_cpu.json
    make_test_model.py --out DIR --arch deepseek_v3 --decisive 16  # the rehearsal's (e2e_bed.DECISIVE)
    greedy_margins.py --model DIR/target --decisive 16 > tests/fixtures/device/test_model_deepseek_v3_greedy_margins_cpu.json
Needs torch, transformers and safetensors.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_bed import GREEDY_TOKENS, PROMPTS  # noqa: E402  pylint: disable=wrong-import-position


def decide(model, torch, ids, tokens):
    """Greedy continuation of ids, one forward pass per token (no cache: the plainest computation)."""
    decisions, seq = [], list(ids)
    with torch.no_grad():
        for _ in range(tokens):
            logits = model(torch.tensor([seq])).logits[0, -1]
            top = torch.topk(logits.float(), 2)
            first, second = [int(i) for i in top.indices]
            values = [float(v) for v in top.values]
            decisions.append({"token": first, "runner_up": second, "logits": values,
                              "gap": values[0] - values[1], "max_abs_logit": float(logits.float().abs().max())})
            seq.append(first)
    return decisions


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the target model's directory")
    parser.add_argument("--tokens", type=int, default=GREEDY_TOKENS)
    parser.add_argument("--decisive", type=float, default=0, help="what the model was made with (for made_by)")
    args = parser.parse_args()
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    with open(os.path.join(args.model, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    arch = config["architectures"][0]
    made = "--hidden %d --layers %d" % (config["hidden_size"], config["num_hidden_layers"])
    if arch != "Qwen3ForCausalLM":
        made = "--arch deepseek_v3 --decisive %g " % args.decisive + made
    out = {"made_by": "scripts/device/greedy_margins.py --model <make_test_model.py %s>/target" % made,
           "architecture": arch,
           "torch": torch.__version__, "transformers": transformers.__version__, "device": "cpu",
           "hidden_size": config["hidden_size"], "layers": config["num_hidden_layers"], "dtypes": {}}
    for name, dtype in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).eval()
        out["dtypes"][name] = [{"prompt": prompt, "input_ids": tokenizer(prompt)["input_ids"],
                                "decisions": decide(model, torch, tokenizer(prompt)["input_ids"], args.tokens)}
                               for prompt in PROMPTS]
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
