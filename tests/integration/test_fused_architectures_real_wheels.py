"""Which architectures call the fused kernel, read from the real sglang wheels (their source, no install).

Checked against what the releases say themselves: SGLang auto-enables fusion for a list of architectures "with
explicit FlashInfer AllReduce Fusion support" (server_args.py, later arg_groups/overrides.py); every one must be found
fused here, save where the release's code shows otherwise. Dense Qwen3, absent from that list, is fused: its layers
go through LayerCommunicator (the real 0.5.17 server counted 736 allreduce_fusion calls with a Qwen3 model).
"""
import re
import time
import zipfile

import pytest

from ansible.module_utils import fused_architectures as fa
from tests.helpers import wheels

pytestmark = pytest.mark.wheels

RELEASES = sorted(wheels.RELEASES + ["0.5.17"], key=lambda v: tuple(map(int, v.split("."))))
# SGLang lists it for auto-enabling, but in these releases its layers call SGLang's own fused all-reduce
# (sglang.kernels.ops.communication.all_reduce_fusion), never a norm's forward_with_allreduce_fusion.
LISTED_NOT_FLASHINFER = {"0.5.19": {"DeepseekV4ForCausalLM"}, "0.5.21": {"DeepseekV4ForCausalLM"}}
_AUTO = (re.compile(r"_FLASHINFER_ALLREDUCE_FUSION_ARCHS\s*=\s*frozenset\(\s*\{(.*?)\}", re.S),
         re.compile(r"model_arch\s+in\s+\[([^\]]*)\][^\n]*\n(?:[^\n]*\n){0,12}?[^\n]*Auto-enabling FlashInfer", re.S))


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


@pytest.fixture(scope="module", params=RELEASES)
def release(request):
    try:
        path = wheels.wheel("sglang", request.param)
    except wheels.NoWheel:
        pytest.skip("PyPI has no wheel of sglang %s" % request.param)
    with zipfile.ZipFile(path) as archive:
        everything = {name: archive.read(name).decode("utf-8", "replace") for name in archive.namelist()
                      if name.startswith("sglang/") and name.endswith(".py")}
    sources = {name: text for name, text in everything.items() if name.startswith(fa.SCOPES)}
    start = time.monotonic()
    result = fa.analyse(sources)
    return request.param, everything, result, time.monotonic() - start


def auto_enabled(everything):
    """The architectures the release auto-enables fusion for, or None where it has no such list."""
    for name in ("sglang/srt/arg_groups/overrides.py", "sglang/srt/server_args.py"):
        for pattern in _AUTO:
            match = pattern.search(everything.get(name, ""))
            if match:
                return set(re.findall(r'"(\w+)"', match.group(1)))
    return None


def test_every_caller_of_the_fused_method_lies_where_the_search_looks(release):
    version, everything, _result, _seconds = release
    callers = sorted(name for name, text in everything.items()
                     if re.search(r"\.\s*forward_with_allreduce_fusion\b", text))
    assert callers and all(name.startswith(fa.SCOPES) for name in callers), (version, callers)


def test_sglangs_own_fusion_list_is_found_fused(release):
    version, everything, result, _seconds = release
    listed = auto_enabled(everything)
    if version_tuple(version) >= (0, 5, 14):
        assert listed and "DeepseekV3ForCausalLM" in listed, version
    missing = (listed or set()) - set(result["fused"]) - LISTED_NOT_FLASHINFER.get(version, set())
    assert not missing, (version, sorted(missing))


def test_the_projects_models_are_fused_and_llama_is_not_until_its_layers_moved(release):
    version, everything, result, seconds = release
    fused = result["fused"]
    assert result["unparsed"] == [] or all(name.startswith(fa.SCOPES) for name in result["unparsed"])
    assert "DeepseekV3ForCausalLM" in fused and "Qwen3ForCausalLM" in fused, version
    if "sglang/srt/models/kimi_k25.py" in everything:
        assert fused["KimiK25ForConditionalGeneration"][1] == "sglang.srt.models.deepseek_v2:DeepseekV3ForCausalLM"
    # Llama's decoder layers hold no LayerCommunicator; 0.5.23 moved them onto the stage boundaries
    assert ("LlamaForCausalLM" in fused) == (version_tuple(version) >= (0, 5, 23)), version
    assert "LlamaForCausalLM" in set(fused) | set(result["unfused"])
    print("sglang %s: %d fused, %d not, %.1f s" % (version, len(fused), len(result["unfused"]), seconds))
