#!/usr/bin/env python3
"""Write a small random-weight Qwen3 model and a matching EAGLE-3 draft head, offline (no model hub).

For running the real SGLang server's code paths on a GPU test bed, not for meaningful text. Why Qwen3: SGLang
0.5.17 calls FlashInfer's fused allreduce+residual+RMSNorm only from layers that go through its
LayerCommunicator (Qwen3 dense does, Llama does not), and Qwen3ForCausalLM implements
set_eagle3_layers_to_capture, so it can be an EAGLE-3 target. The draft is in the layout SGLang's
LlamaForCausalLMEagle3 loads (midlayer.*, fc, norm, lm_head, d2t, t2d). The tokenizer is the lab's real
word-level tokenizer file (lab/models/kimi-k2.5-standin), copied, not generated.

    make_test_model.py --out DIR [--hidden 2048 --layers 4 --seed 0]   # writes DIR/target and DIR/draft
Needs torch and safetensors (the GPU machine's image has both). Prints a JSON summary.
"""
import argparse
import json
import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZER_DIR = os.path.join(REPO, "lab", "models", "kimi-k2.5-standin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def shapes(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab):
    """Qwen3ForCausalLM weight names (Hugging Face layout) and shapes."""
    out = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
           "lm_head.weight": (vocab, hidden)}
    for i in range(layers):
        p = "model.layers.%d." % i
        out.update({
            p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
            p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
            p + "self_attn.q_norm.weight": (head_dim,), p + "self_attn.k_norm.weight": (head_dim,),
            p + "mlp.gate_proj.weight": (intermediate, hidden), p + "mlp.up_proj.weight": (intermediate, hidden),
            p + "mlp.down_proj.weight": (hidden, intermediate)})
    return out


def draft_shapes(hidden, heads, kv_heads, head_dim, intermediate, vocab, aux=3):
    """EAGLE-3 draft head: one decoder layer whose attention reads [embeds, hidden] (2x hidden wide)."""
    return {
        "midlayer.input_layernorm.weight": (hidden,), "midlayer.hidden_norm.weight": (hidden,),
        "midlayer.post_attention_layernorm.weight": (hidden,),
        "midlayer.self_attn.q_proj.weight": (heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": (kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": (kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": (hidden, heads * head_dim),
        "midlayer.mlp.gate_proj.weight": (intermediate, hidden), "midlayer.mlp.up_proj.weight": (intermediate, hidden),
        "midlayer.mlp.down_proj.weight": (hidden, intermediate),
        "fc.weight": (hidden, aux * hidden), "norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}


def aux_layers(layers):
    """Three distinct target layers whose outputs feed the draft. SGLang's default for Qwen3 ([2, n//2, n-3],
    shifted by one) repeats a layer in a small model, and the draft's fc then gets two of its three inputs."""
    picked = sorted({0, layers // 2 - 1, layers - 2})
    if len(picked) != 3 or min(picked) < 0:
        raise SystemExit("--layers %d is too few for three distinct EAGLE-3 capture layers (need >= 4)" % layers)
    return picked


def random_tensors(spec, generator, torch):
    tensors = {}
    for name, shape in sorted(spec.items()):
        if len(shape) == 1:  # norms start at one, as trained models' roughly do
            tensors[name] = torch.ones(shape, dtype=torch.bfloat16)
        else:
            tensors[name] = (torch.randn(shape, generator=generator) * 0.02).to(torch.bfloat16)
    return tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--intermediate", type=int, default=6144)
    parser.add_argument("--vocab", type=int, default=0, help="rows of the embedding; 0: the tokenizer's words")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch  # pylint: disable=import-outside-toplevel
    from safetensors.torch import save_file  # pylint: disable=import-outside-toplevel

    with open(os.path.join(TOKENIZER_DIR, "tokenizer.json"), encoding="utf-8") as handle:
        vocab = json.load(handle)["model"]["vocab"]
    words = len(vocab)
    args.vocab = args.vocab or words
    if args.vocab < words:
        raise SystemExit("--vocab %d is smaller than the tokenizer's %d words" % (args.vocab, words))
    generator = torch.Generator().manual_seed(args.seed)
    target, draft = os.path.join(args.out, "target"), os.path.join(args.out, "draft")
    common = {"hidden_size": args.hidden, "intermediate_size": args.intermediate,
              "num_attention_heads": args.heads, "num_key_value_heads": args.kv_heads, "head_dim": args.head_dim,
              "vocab_size": args.vocab, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
              "rope_theta": 1000000.0, "hidden_act": "silu", "torch_dtype": "bfloat16",
              "tie_word_embeddings": False, "bos_token_id": vocab.get("<s>"), "eos_token_id": vocab.get("</s>")}
    for path, config, spec in (
            (target, dict(common, architectures=["Qwen3ForCausalLM"], model_type="qwen3",
                          num_hidden_layers=args.layers, attention_bias=False),
             shapes(args.hidden, args.layers, args.heads, args.kv_heads, args.head_dim, args.intermediate,
                    args.vocab)),
            (draft, dict(common, architectures=["LlamaForCausalLMEagle3"], model_type="llama",
                         num_hidden_layers=1, draft_vocab_size=args.vocab, target_hidden_size=args.hidden,
                         eagle_config={"eagle_aux_hidden_state_layer_ids": aux_layers(args.layers)}),
             draft_shapes(args.hidden, args.heads, args.kv_heads, args.head_dim, args.intermediate, args.vocab))):
        os.makedirs(path, exist_ok=True)
        tensors = random_tensors(spec, generator, torch)
        if path == draft:  # draft ids equal target ids: d2t holds zero offsets, t2d marks every id
            tensors["d2t"] = torch.zeros(args.vocab, dtype=torch.int64)
            tensors["t2d"] = torch.ones(args.vocab, dtype=torch.bool)
        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        os.chmod(os.path.join(path, "model.safetensors"), 0o644)  # the service user reads it
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(config, handle, indent=1, sort_keys=True)
        for name in TOKENIZER_FILES:
            shutil.copy(os.path.join(TOKENIZER_DIR, name), os.path.join(path, name))
    summary = {"target": target, "draft": draft, "architecture": "Qwen3ForCausalLM",
               "draft_architecture": "LlamaForCausalLMEagle3", "layers": args.layers, "hidden_size": args.hidden,
               "heads": args.heads, "kv_heads": args.kv_heads, "vocab_size": args.vocab, "tokenizer_words": words,
               "seed": args.seed, "weights": "random (normal, std 0.02; norms 1)"}
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
