#!/usr/bin/env python3
"""Write a small random-weight target model and a matching EAGLE-3 draft head, offline (no model hub).

For running the real SGLang server's code paths on a GPU test bed, not for meaningful text. Two families, both
calling FlashInfer's fused allreduce+residual+RMSNorm in SGLang 0.5.17 (only layers that go through its
LayerCommunicator do; Llama does not) and both EAGLE-3 targets there:
  --arch deepseek_v3  DeepseekV3ForCausalLM, the Kimi-K2/K2.5 backbone (Kimi-K2.5's KimiK25ForConditionalGeneration
                      wraps it): MLA with q/kv LoRA ranks, routed + shared experts, sigmoid noaux_tc router, the
                      first layer dense. Its draft (--draft mla, the default) is in the layout of the published
                      Kimi-K2.5 MLA drafter that SGLang's models/kimi_k25_eagle3.py loads (Eagle3DeepseekV2ForCausalLM,
                      model_type kimi_k2: layers.0.* with MLA attention over [embeds, hidden], fc, norm, lm_head,
                      d2t, t2d); --draft llama gives the Llama-layout draft instead.
  --arch qwen3        Qwen3ForCausalLM (dense) with the Llama-layout draft (LlamaForCausalLMEagle3: midlayer.*).
--decisive A (default 0 = plain random) adds to the output head a part that maps each token's embedding to a
successor token (a fixed permutation), A times as large as the random part, and scales the embeddings so they
carry through the layers: greedy decisions then win by margins far above bf16 resolution (greedy_margins.py
measures them), so a fused and an unfused server that part mean something, not a rounding tie. Every layer still
runs and adds its output. The tokenizer is the lab's real word-level tokenizer file
(lab/models/kimi-k2.5-standin), copied, not generated.

    make_test_model.py --out DIR [--arch deepseek_v3 --hidden 2048 --layers 4 --decisive 8 --seed 0]
Writes DIR/target and DIR/draft. Needs torch and safetensors (the GPU machine's image has both). Prints JSON.
"""
import argparse
import json
import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZER_DIR = os.path.join(REPO, "lab", "models", "kimi-k2.5-standin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# DeepseekV3 (Kimi-K2) attention and experts, scaled down: MLA ranks and head dims as the real model's, fewer
# heads and experts. SGLang reads these from config.json.
MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
       "v_head_dim": 128}
MOE = {"n_routed_experts": 8, "n_shared_experts": 1, "moe_intermediate_size": 512, "num_experts_per_tok": 2,
       "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc", "scoring_func": "sigmoid", "norm_topk_prob": True,
       "routed_scaling_factor": 2.5, "first_k_dense_replace": 1, "moe_layer_freq": 1}


def qwen3_shapes(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab):
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
            p + "self_attn.q_norm.weight": (head_dim,), p + "self_attn.k_norm.weight": (head_dim,)})
        out.update(mlp_shapes(p + "mlp.", hidden, intermediate))
    return out


def mlp_shapes(prefix, hidden, intermediate):
    return {prefix + "gate_proj.weight": (intermediate, hidden), prefix + "up_proj.weight": (intermediate, hidden),
            prefix + "down_proj.weight": (hidden, intermediate)}


def mla_shapes(prefix, hidden, heads, width=None):
    """DeepSeek multi-latent attention; WIDTH: its input width (an EAGLE-3 draft reads [embeds, hidden])."""
    width = width or hidden
    return {prefix + "q_a_proj.weight": (MLA["q_lora_rank"], width),
            prefix + "q_a_layernorm.weight": (MLA["q_lora_rank"],),
            prefix + "q_b_proj.weight": (heads * (MLA["qk_nope_head_dim"] + MLA["qk_rope_head_dim"]),
                                         MLA["q_lora_rank"]),
            prefix + "kv_a_proj_with_mqa.weight": (MLA["kv_lora_rank"] + MLA["qk_rope_head_dim"], width),
            prefix + "kv_a_layernorm.weight": (MLA["kv_lora_rank"],),
            prefix + "kv_b_proj.weight": (heads * (MLA["qk_nope_head_dim"] + MLA["v_head_dim"]), MLA["kv_lora_rank"]),
            prefix + "o_proj.weight": (hidden, heads * MLA["v_head_dim"])}


def deepseek_v3_shapes(hidden, layers, heads, intermediate, vocab):
    """DeepseekV3ForCausalLM weight names (Hugging Face layout) and shapes; the router's score correction bias is
    float32 as in the real checkpoints (FLOAT32_NAMES)."""
    out = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
           "lm_head.weight": (vocab, hidden)}
    for i in range(layers):
        p = "model.layers.%d." % i
        out.update({p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,)})
        out.update(mla_shapes(p + "self_attn.", hidden, heads))
        if i < MOE["first_k_dense_replace"]:
            out.update(mlp_shapes(p + "mlp.", hidden, intermediate))
            continue
        out.update({p + "mlp.gate.weight": (MOE["n_routed_experts"], hidden),
                    p + "mlp.gate.e_score_correction_bias": (MOE["n_routed_experts"],)})
        for e in range(MOE["n_routed_experts"]):
            out.update(mlp_shapes(p + "mlp.experts.%d." % e, hidden, MOE["moe_intermediate_size"]))
        out.update(mlp_shapes(p + "mlp.shared_experts.", hidden,
                              MOE["n_shared_experts"] * MOE["moe_intermediate_size"]))
    return out


def llama_draft_shapes(hidden, heads, kv_heads, head_dim, intermediate, vocab, aux=3):
    """EAGLE-3 draft head: one decoder layer whose attention reads [embeds, hidden] (2x hidden wide)."""
    out = {
        "midlayer.input_layernorm.weight": (hidden,), "midlayer.hidden_norm.weight": (hidden,),
        "midlayer.post_attention_layernorm.weight": (hidden,),
        "midlayer.self_attn.q_proj.weight": (heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": (kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": (kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": (hidden, heads * head_dim),
        "fc.weight": (hidden, aux * hidden), "norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    out.update(mlp_shapes("midlayer.mlp.", hidden, intermediate))
    return out


def mla_draft_shapes(hidden, heads, intermediate, vocab, aux=3):
    """The Kimi-K2.5 MLA EAGLE-3 draft (SGLang's kimi_k25_eagle3.py): layers.0.* with MLA attention over
    [embeds, hidden] and a dense MLP, fc over the aux hidden states, norm, lm_head (and embed_tokens, which SGLang
    replaces with the target's)."""
    out = {"layers.0.input_layernorm.weight": (hidden,), "layers.0.hidden_norm.weight": (hidden,),
           "layers.0.post_attention_layernorm.weight": (hidden,), "embed_tokens.weight": (vocab, hidden),
           "fc.weight": (hidden, aux * hidden), "norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    out.update(mla_shapes("layers.0.self_attn.", hidden, heads, width=2 * hidden))
    out.update(mlp_shapes("layers.0.mlp.", hidden, intermediate))
    return out


def aux_layers(layers):
    """Three distinct target layers whose outputs feed the draft. SGLang's default for Qwen3 ([2, n//2, n-3],
    shifted by one) repeats a layer in a small model, and the draft's fc then gets two of its three inputs."""
    picked = sorted({0, layers // 2 - 1, layers - 2})
    if len(picked) != 3 or min(picked) < 0:
        raise SystemExit("--layers %d is too few for three distinct EAGLE-3 capture layers (need >= 4)" % layers)
    return picked


FLOAT32_NAMES = ("e_score_correction_bias",)


def random_tensors(spec, generator, torch):
    tensors = {}
    for name, shape in sorted(spec.items()):
        if name.endswith(FLOAT32_NAMES):  # the router's bias: zero, float32 (the real checkpoints' dtype)
            tensors[name] = torch.zeros(shape, dtype=torch.float32)
        elif len(shape) == 1:  # norms start at one, as trained models' roughly do
            tensors[name] = torch.ones(shape, dtype=torch.bfloat16)
        else:
            tensors[name] = (torch.randn(shape, generator=generator) * 0.02).to(torch.bfloat16)
    return tensors


def successors(vocab, special):
    """A fixed permutation of the ordinary tokens (special ones never chosen: no early end of sequence)."""
    words = [i for i in range(vocab) if i not in special]
    return {t: words[(k * 7 + 3) % len(words)] for k, t in enumerate(words)}


def make_decisive(tensors, strength, special, torch):
    """Embeddings scaled up to carry through the layers, and the output head given a part that maps each token's
    embedding to its successor's logit, STRENGTH times the random part's size (see the module's docstring)."""
    embed = tensors["model.embed_tokens.weight"].float()
    vocab, hidden = embed.shape
    embed = embed * 25.0  # rows of norm ~0.5 * sqrt(hidden): as large as a layer's output, not drowned by it
    unit = embed / embed.norm(dim=1, keepdim=True)
    head = tensors["lm_head.weight"].float()
    random_row = float(head.norm(dim=1).mean())
    for token, successor in successors(vocab, special).items():
        head[successor] += strength * random_row * unit[token]
    tensors["model.embed_tokens.weight"] = embed.to(torch.bfloat16)
    tensors["lm_head.weight"] = head.to(torch.bfloat16)


def target_and_draft(args, vocab_ids):
    """(target config, target shapes, draft config, draft shapes) for --arch and --draft."""
    common = {"hidden_size": args.hidden, "intermediate_size": args.intermediate,
              "num_attention_heads": args.heads, "vocab_size": args.vocab, "rms_norm_eps": 1e-6,
              "max_position_embeddings": 4096, "hidden_act": "silu", "torch_dtype": "bfloat16",
              "tie_word_embeddings": False, "bos_token_id": vocab_ids.get("<s>"), "eos_token_id": vocab_ids.get("</s>")}
    eagle = {"num_hidden_layers": 1, "draft_vocab_size": args.vocab, "target_hidden_size": args.hidden,
             "eagle_config": {"eagle_aux_hidden_state_layer_ids": aux_layers(args.layers)}}
    gqa = {"num_key_value_heads": args.kv_heads, "head_dim": args.head_dim, "rope_theta": 1000000.0}
    llama_draft = (dict(common, architectures=["LlamaForCausalLMEagle3"], model_type="llama", **gqa, **eagle),
                   llama_draft_shapes(args.hidden, args.heads, args.kv_heads, args.head_dim, args.intermediate,
                                      args.vocab))
    if args.arch == "qwen3":
        target = (dict(common, architectures=["Qwen3ForCausalLM"], model_type="qwen3", num_hidden_layers=args.layers,
                       attention_bias=False, **gqa),
                  qwen3_shapes(args.hidden, args.layers, args.heads, args.kv_heads, args.head_dim, args.intermediate,
                               args.vocab))
        return target + llama_draft
    deepseek = dict(common, num_key_value_heads=args.heads, rope_theta=10000.0, rope_scaling=None,
                    attention_bias=False, **MLA)
    target = (dict(deepseek, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                   num_hidden_layers=args.layers, num_nextn_predict_layers=0, **MOE),
              deepseek_v3_shapes(args.hidden, args.layers, args.heads, args.intermediate, args.vocab))
    if args.draft == "llama":
        return target + llama_draft
    return target + (dict(deepseek, architectures=["Eagle3DeepseekV2ForCausalLM"], model_type="kimi_k2", **eagle),
                     mla_draft_shapes(args.hidden, args.heads, args.intermediate, args.vocab))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--arch", choices=("deepseek_v3", "qwen3"), default="qwen3")
    parser.add_argument("--draft", choices=("mla", "llama"), default="mla",
                        help="the draft's layout for --arch deepseek_v3 (qwen3 always gets llama)")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--intermediate", type=int, default=6144)
    parser.add_argument("--vocab", type=int, default=0, help="rows of the embedding; 0: the tokenizer's words")
    parser.add_argument("--decisive", type=float, default=0.0, help="strength of the successor part of the head")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not 0 <= args.decisive <= 1000:
        raise SystemExit("--decisive must lie in 0..1000, not %s" % args.decisive)
    import torch  # pylint: disable=import-outside-toplevel
    from safetensors.torch import save_file  # pylint: disable=import-outside-toplevel

    with open(os.path.join(TOKENIZER_DIR, "tokenizer.json"), encoding="utf-8") as handle:
        vocab = json.load(handle)["model"]["vocab"]
    words = len(vocab)
    args.vocab = args.vocab or words
    if args.vocab < words:
        raise SystemExit("--vocab %d is smaller than the tokenizer's %d words" % (args.vocab, words))
    if args.arch == "qwen3":
        args.draft = "llama"
    generator = torch.Generator().manual_seed(args.seed)
    target_config, target_spec, draft_config, draft_spec = target_and_draft(args, vocab)
    target, draft = os.path.join(args.out, "target"), os.path.join(args.out, "draft")
    for path, config, spec in ((target, target_config, target_spec), (draft, draft_config, draft_spec)):
        os.makedirs(path, exist_ok=True)
        tensors = random_tensors(spec, generator, torch)
        if path == target and args.decisive:
            make_decisive(tensors, args.decisive, {v for k, v in vocab.items() if k.startswith("<")}, torch)
        if path == draft:  # draft ids equal target ids: d2t holds zero offsets, t2d marks every id
            tensors["d2t"] = torch.zeros(args.vocab, dtype=torch.int64)
            tensors["t2d"] = torch.ones(args.vocab, dtype=torch.bool)
        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        os.chmod(os.path.join(path, "model.safetensors"), 0o644)  # the service user reads it
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(config, handle, indent=1, sort_keys=True)
        for name in TOKENIZER_FILES:
            shutil.copy(os.path.join(TOKENIZER_DIR, name), os.path.join(path, name))
    summary = {"target": target, "draft": draft, "architecture": target_config["architectures"][0],
               "draft_architecture": draft_config["architectures"][0], "layers": args.layers,
               "hidden_size": args.hidden, "heads": args.heads, "vocab_size": args.vocab, "tokenizer_words": words,
               "seed": args.seed, "decisive": args.decisive,
               "weights": "random (normal, std 0.02; norms 1)" + (
                   "; embeddings x25 and a successor head part x%g" % args.decisive if args.decisive else "")}
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
