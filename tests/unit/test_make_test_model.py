"""The device e2e's test models (scripts/device/make_test_model.py): the DeepseekV3 family's weight layout, its
Kimi-K2.5 MLA EAGLE-3 draft's, and its decisiveness read on the CPU (test_model_deepseek_v3_greedy_margins_cpu.json,
written by greedy_margins.py as scripts/device/README.md says)."""
import json
import math
import os

from tests.helpers.ansible_run import REPO
from tests.helpers.script_module import load_file

models = load_file("scripts/device/make_test_model.py", "make_test_model")
MARGINS = os.path.join(REPO, "tests", "fixtures", "device", "test_model_deepseek_v3_greedy_margins_cpu.json")
e2e = load_file("scripts/device/e2e_bed.py", "e2e_bed_models")


def bf16_steps(gap, logit):
    """GAP in bf16 steps at LOGIT's magnitude (8 significant bits)."""
    return gap / 2.0 ** (math.floor(math.log2(abs(logit))) - 7)


def test_deepseek_v3_has_dense_first_layer_then_routed_and_shared_experts():
    shapes = models.deepseek_v3_shapes(2048, 4, 16, 6144, 88)
    assert "model.layers.0.mlp.gate_proj.weight" in shapes and "model.layers.0.mlp.gate.weight" not in shapes
    for layer in (1, 2, 3):
        prefix = "model.layers.%d.mlp." % layer
        assert shapes[prefix + "gate.weight"] == (8, 2048)
        assert shapes[prefix + "gate.e_score_correction_bias"] == (8,)
        assert shapes[prefix + "experts.7.down_proj.weight"] == (2048, 512)
        assert shapes[prefix + "shared_experts.up_proj.weight"] == (512, 2048)
    attn = "model.layers.2.self_attn."
    assert shapes[attn + "q_a_proj.weight"] == (1536, 2048)
    assert shapes[attn + "q_b_proj.weight"] == (16 * (128 + 64), 1536)
    assert shapes[attn + "kv_a_proj_with_mqa.weight"] == (512 + 64, 2048)
    assert shapes[attn + "kv_b_proj.weight"] == (16 * (128 + 128), 512)
    assert shapes[attn + "o_proj.weight"] == (2048, 16 * 128)


def test_the_mla_draft_is_in_the_layout_sglangs_kimi_k25_eagle3_loads():
    """layers.0.* (mapped to midlayer.* by the loader), MLA attention over [embeds, hidden] (2x wide a-projections),
    a dense MLP, fc over three captured layers, norm and lm_head."""
    shapes = models.mla_draft_shapes(2048, 16, 6144, 88)
    assert not [name for name in shapes if name.startswith(("midlayer.", "model."))]
    assert shapes["layers.0.self_attn.q_a_proj.weight"] == (1536, 2 * 2048)
    assert shapes["layers.0.self_attn.kv_a_proj_with_mqa.weight"] == (512 + 64, 2 * 2048)
    assert shapes["layers.0.hidden_norm.weight"] == (2048,) and shapes["fc.weight"] == (2048, 3 * 2048)
    assert shapes["layers.0.mlp.down_proj.weight"] == (2048, 6144)


def test_a_successor_map_never_picks_a_special_token_and_is_a_permutation():
    mapping = models.successors(88, {0, 1, 2})
    assert sorted(mapping) == sorted(mapping.values()) == list(range(3, 88))


def test_the_rehearsal_model_decides_every_token_by_many_bf16_steps_on_the_cpu():
    with open(MARGINS, encoding="utf-8") as handle:
        margins = json.load(handle)
    assert margins["architecture"] == "DeepseekV3ForCausalLM"
    assert "--arch deepseek_v3 --decisive %g " % e2e.DECISIVE_BY_FAMILY["deepseek_v3"] in margins["made_by"]
    rows = {dtype: [d for prompt in margins["dtypes"][dtype] for d in prompt["decisions"]] for dtype in margins["dtypes"]}
    assert len(rows["bfloat16"]) == len(e2e.PROMPTS) * e2e.GREEDY_TOKENS
    assert min(bf16_steps(d["gap"], d["logits"][0]) for d in rows["bfloat16"]) >= 8
    assert [d["token"] for d in rows["bfloat16"]] == [d["token"] for d in rows["float32"]]
