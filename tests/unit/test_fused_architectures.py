"""Which architectures call the fused kernel, read from a release's source (module_utils/fused_architectures.py).

A small release in the shapes SGLang uses: LayerCommunicator (0.5.4-0.5.19), stage boundaries re-exported by a
package (0.5.21+), a model's own call (qwen3_5.py, nemotron_h_utils.py), a wrapper in another module (kimi_k25.py
builds DeepseekV3ForCausalLM), and models whose layers never call it (llama.py). The real releases:
tests/integration/test_fused_architectures_real_wheels.py.
"""
import textwrap

from ansible.module_utils import fused_architectures as fa

LAYERS = "sglang/srt/layers/"
MODELS = "sglang/srt/models/"


def src(text):
    return textwrap.dedent(text).lstrip()


RELEASE = {
    LAYERS + "__init__.py": "",
    LAYERS + "layernorm.py": src('''
        class RMSNorm:
            def forward(self, x, residual=None):
                if residual is not None and self.fuse:
                    return self.forward_with_allreduce_fusion(x, residual)  # its own method: not a caller
                return x

            def forward_with_allreduce_fusion(self, x, residual):
                return _fused(x, residual)

        class GemmaRMSNorm(RMSNorm):
            def forward_with_allreduce_fusion(self, x, residual):
                return super().forward_with_allreduce_fusion(x, residual)

        def _fused(x, residual):
            return x
        '''),
    LAYERS + "communicator.py": src('''
        def apply_flashinfer_allreduce_fusion(batch_size):
            return batch_size > 0

        class CommunicateWithAllReduceAndLayerNormFn:
            @staticmethod
            def gather(hidden_states, residual, layernorm):
                if apply_flashinfer_allreduce_fusion(hidden_states.shape[0]):
                    return layernorm.forward_with_allreduce_fusion(hidden_states, residual)
                return layernorm(hidden_states, residual)

        class LayerScatterModes:
            pass

        class LayerCommunicator:
            def prepare_mlp(self, hidden_states, residual):
                return CommunicateWithAllReduceAndLayerNormFn.gather(hidden_states, residual, self.norm)
        '''),
    LAYERS + "layer_boundary/__init__.py": src('''
        """Stage boundaries: the LayerCommunicator of later releases (comments naming it do not count)."""
        from sglang.srt.layers.layer_boundary.factories import make_stages
        from .ops import move_rows
        '''),
    LAYERS + "layer_boundary/ops.py": "def move_rows(x):\n    return x\n",
    LAYERS + "layer_boundary/factories.py": src('''
        from ..layer_boundary.fusions import allreduce as fusions

        def make_stages(norm):
            return [fusions.ffn_fusions(norm)]
        '''),
    LAYERS + "layer_boundary/fusions/__init__.py": "",
    LAYERS + "layer_boundary/fusions/allreduce.py": src('''
        def ffn_fusions(plan):
            if not hasattr(plan.norm, "forward_with_allreduce_fusion"):
                return ()
            return (plan.norm.forward_with_allreduce_fusion,)
        '''),
    MODELS + "__init__.py": "",
    MODELS + "registry.py": "def import_model_classes():\n    return {}\n",
    MODELS + "llama.py": src('''
        # LlamaDecoderLayer has no LayerCommunicator: this comment and the docstring below do not make it one.
        from sglang.srt.layers.layernorm import RMSNorm
        from sglang.srt.layers.communicator import LayerScatterModes
        from sglang.srt.layers.layer_boundary import move_rows

        class LlamaDecoderLayer:
            """Not routed through LayerCommunicator or make_stages."""
            def __init__(self):
                self.input_layernorm = RMSNorm()
                self.modes = LayerScatterModes()
                self.rows = move_rows

        class LlamaModel:
            def __init__(self):
                self.layers = [LlamaDecoderLayer()]

        class LlamaForCausalLM:
            def __init__(self):
                self.model = LlamaModel()

        class Phi3ForCausalLM(LlamaForCausalLM):
            pass

        EntryClass = [LlamaForCausalLM, Phi3ForCausalLM]
        '''),
    MODELS + "deepseek_v2.py": src('''
        from sglang.srt.layers.communicator import LayerCommunicator
        from sglang.srt.layers.layernorm import RMSNorm

        class DeepseekV2DecoderLayer:
            def __init__(self):
                self.layer_communicator = LayerCommunicator()
                self.norm = RMSNorm()

        class DeepseekV2Model:
            def __init__(self):
                self.layers = [DeepseekV2DecoderLayer()]

        class DeepseekV2ForCausalLM:
            def __init__(self):
                self.model = DeepseekV2Model()

        class DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):
            pass

        EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM]
        '''),
    MODELS + "kimi_k25.py": src('''
        from .deepseek_v2 import DeepseekV3ForCausalLM as Backbone

        class KimiK25ForConditionalGeneration:
            def __init__(self, config):
                self.language_model = Backbone(config.text_config)

        EntryClass = [KimiK25ForConditionalGeneration]
        '''),
    MODELS + "qwen3.py": src('''
        import sglang.srt.layers.layer_boundary as boundary
        from sglang.srt.models.llama import LlamaForCausalLM

        class Qwen3DecoderLayer:
            def __init__(self, norm):
                self.stages = boundary.make_stages(norm)

        class Qwen3ForCausalLM(LlamaForCausalLM):
            layer_type = Qwen3DecoderLayer

        EntryClass = Qwen3ForCausalLM
        '''),
    MODELS + "nemotron_h_utils.py": src('''
        def fused_norm(norm, hidden_states, residual):
            return norm.forward_with_allreduce_fusion(hidden_states, residual)
        '''),
    MODELS + "nemotron_h.py": src('''
        from sglang.srt.models import nemotron_h_utils

        class NemotronHForCausalLM:
            def forward(self, x, r):
                return nemotron_h_utils.fused_norm(self.norm, x, r)

        NemotronHPuzzleForCausalLM = NemotronHForCausalLM
        EntryClass = [NemotronHForCausalLM]
        '''),
    MODELS + "broken.py": "def (:\n",
}


def test_architectures_are_fused_exactly_where_their_layers_reach_the_kernel():
    result = fa.analyse(RELEASE)
    assert sorted(result["fused"]) == ["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
                                       "KimiK25ForConditionalGeneration", "NemotronHForCausalLM", "Qwen3ForCausalLM"]
    assert result["unfused"] == ["LlamaForCausalLM", "Phi3ForCausalLM"]
    assert result["unparsed"] == []  # broken.py names nothing the search looks for: never parsed


def test_the_chain_shows_how_a_wrapper_reaches_the_kernel_through_another_model_module():
    chain = fa.analyse(RELEASE)["fused"]["KimiK25ForConditionalGeneration"]
    assert chain == ["sglang.srt.models.kimi_k25:KimiK25ForConditionalGeneration",
                     "sglang.srt.models.deepseek_v2:DeepseekV3ForCausalLM",
                     "sglang.srt.models.deepseek_v2:DeepseekV2ForCausalLM",
                     "sglang.srt.models.deepseek_v2:DeepseekV2Model",
                     "sglang.srt.models.deepseek_v2:DeepseekV2DecoderLayer",
                     "sglang.srt.layers.communicator:LayerCommunicator",
                     "sglang.srt.layers.communicator:CommunicateWithAllReduceAndLayerNormFn"]


def test_a_package_re_export_and_a_module_alias_are_followed():
    chain = fa.analyse(RELEASE)["fused"]["Qwen3ForCausalLM"]
    assert chain[-3:] == ["sglang.srt.models.qwen3:Qwen3DecoderLayer",
                          "sglang.srt.layers.layer_boundary.factories:make_stages",
                          "sglang.srt.layers.layer_boundary.fusions.allreduce:ffn_fusions"]


def test_a_norm_calling_its_own_fused_method_is_no_caller():
    fused = fa.analyse(RELEASE)["fused"]
    assert "LlamaForCausalLM" not in fused  # its layers hold an RMSNorm, whose forward calls self.forward_with_...


def test_a_subclass_of_an_unfused_model_is_fused_by_its_own_layers():
    # Qwen3ForCausalLM extends LlamaForCausalLM but names its own routed layer type
    assert "Qwen3ForCausalLM" in fa.analyse(RELEASE)["fused"]


def test_an_entry_class_alias_is_registered_under_the_class_name():
    release = dict(RELEASE)
    release[MODELS + "nemotron_h.py"] = release[MODELS + "nemotron_h.py"].replace(
        "EntryClass = [NemotronHForCausalLM]", "EntryClass = [NemotronHPuzzleForCausalLM]")
    assert "NemotronHForCausalLM" in fa.analyse(release)["fused"]
    assert "NemotronHPuzzleForCausalLM" not in fa.analyse(release)["fused"]


def test_without_any_caller_nothing_is_fused():
    release = {path: text for path, text in RELEASE.items() if "forward_with_allreduce_fusion" not in text
               or path.endswith("layernorm.py")}
    result = fa.analyse(release)
    assert result["fused"] == {} and "LlamaForCausalLM" in result["unfused"]


def test_a_file_that_does_not_parse_is_reported_not_fatal():
    release = dict(RELEASE)
    release[MODELS + "broken.py"] = "from sglang.srt.layers.communicator import LayerCommunicator\ndef (:\n"
    result = fa.analyse(release)
    assert result["unparsed"] == [MODELS + "broken.py"] and "DeepseekV3ForCausalLM" in result["fused"]


def test_sources_are_read_from_a_site_packages_tree(tmp_path):
    for path, text in RELEASE.items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (tmp_path / "sglang" / "srt" / "utils.py").write_text("LayerCommunicator = None\n")  # outside the scopes
    (tmp_path / LAYERS / "__pycache__").mkdir()
    (tmp_path / LAYERS / "__pycache__" / "x.py").write_text("garbage")
    assert sorted(fa.read_sources(str(tmp_path))) == sorted(RELEASE)
    assert fa.fused_architectures(str(tmp_path)) == sorted(fa.analyse(RELEASE)["fused"])
    assert fa.fused_architectures(str(tmp_path / "nothing")) == []
