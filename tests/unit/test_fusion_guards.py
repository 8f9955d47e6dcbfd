"""Site finding and planning on small sources written in each style SGLang has used."""
import textwrap

import pytest

from ansible.module_utils import fusion_guards as fg
from tests.helpers.gate_check import gate_report, multicast_failure_raises

COMM = "sglang/srt/layers/communicator.py"
ADD_NORM = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
FUSION = fg.FUSION_FILE
ALL_HELPERS = {"is_sm120_supported": True, "is_sm120": True}


def src(text):
    return textwrap.dedent(text).lstrip("\n").encode("utf-8")


V054_INLINE = src("""
    from sglang.srt.utils import (
        is_cuda,
        is_sm90_supported,
        is_sm100_supported,
    )

    _is_sm90_supported = is_cuda() and is_sm90_supported()
    _is_sm100_supported = is_cuda() and is_sm100_supported()


    class CommunicateWithAllReduceAndLayerNormFn:
        def _gather_hidden_states_and_residual(self, hidden_states):
            if (
                (_is_sm100_supported or _is_sm90_supported)
                and hidden_states.shape[0] <= 4096
            ):
                return 1
            return 0
    """)

V019_PLATFORM = src("""
    from sglang.srt.runtime_context import get_platform
    from sglang.srt.utils import is_cuda

    _is_cuda = is_cuda()
    _is_sm90_supported = _is_cuda and get_platform().is_sm90
    _is_sm100_supported = _is_cuda and get_platform().is_sm100


    def apply_flashinfer_allreduce_fusion(batch_size: int):
        return (_is_sm90_supported or _is_sm100_supported) and batch_size > 0
    """)

FUSION_014 = src("""
    from sglang.srt.utils import (
        ceil_align,
        is_sm90_supported,
        is_sm100_supported,
    )


    def _resolve_backend(backend: str, is_multi_node: bool = False) -> str:
        if not (is_sm90_supported() or is_sm100_supported()):
            raise ValueError("FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.")
        return backend


    def _flashinfer_trtllm_workspace_allocation_sizes(cuda_driver, sizes):
        out = []
        for size in sizes:
            err, mc_granularity = cuda_driver.cuMulticastGetGranularity(
                size,
                cuda_driver.CUmulticastGranularity_flags.CU_MULTICAST_GRANULARITY_RECOMMENDED,
            )
            if err != cuda_driver.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuMulticastGetGranularity failed: {err}")
            out.append(ceil_align(size, mc_granularity))
        return out
    """)


def apply_plan(files, helpers=ALL_HELPERS, g3=True):
    layout, sites, changed = fg.plan(files, helpers, g3)
    merged = dict(files)
    merged.update(changed)
    for path, data in changed.items():
        compile(data, path, "exec")
    return layout, sites, merged, changed


def test_inline_guard_without_is_cuda_flag_mirrors_the_file_own_names():
    layout, sites, merged, changed = apply_plan({COMM: V054_INLINE})
    text = merged[COMM].decode()
    assert layout == "communicator:_gather_hidden_states_and_residual"
    assert "from sglang.srt.utils import is_sm120_supported" in text
    assert "_is_sm120_supported = is_cuda() and is_sm120_supported()" in text  # no _is_cuda in this file
    report, unresolved = gate_report(text)
    assert report and all(admits for _f, _t, admits in report) and not unresolved
    assert [s.gate for s in sites] == ["G1"] and not sites[0].admitted


def test_platform_attribute_form_uses_get_platform_is_sm120():
    _layout, _sites, merged, _changed = apply_plan({ADD_NORM: V019_PLATFORM})
    text = merged[ADD_NORM].decode()
    assert "_is_sm120_supported = _is_cuda and get_platform().is_sm120" in text
    assert "import is_sm120_supported" not in text


def test_platform_form_refused_when_sglang_has_no_is_sm120():
    with pytest.raises(fg.LayoutError, match="is_sm120"):
        fg.plan({ADD_NORM: V019_PLATFORM}, {"is_sm120_supported": True, "is_sm120": False})


@pytest.mark.parametrize("gate", [
    "(_is_sm100_supported or _is_sm90_supported)",
    "(\n                _is_sm90_supported   # hopper\n                or\n                _is_sm100_supported\n            )",
    "((_is_sm90_supported) or (_is_sm100_supported))",
])
def test_formatting_line_breaks_and_operand_order_are_tolerated(gate):
    source = V019_PLATFORM.replace(b"(_is_sm90_supported or _is_sm100_supported)", gate.encode())
    _layout, sites, merged, _changed = apply_plan({ADD_NORM: source})
    report, unresolved = gate_report(merged[ADD_NORM].decode())
    assert [admits for _f, _t, admits in report] == [True] and not unresolved
    assert len(sites) == 1


def test_call_form_in_backend_resolution_gets_an_import():
    files = {COMM: V054_INLINE, FUSION: FUSION_014}
    layout, sites, merged, changed = apply_plan(files)
    assert layout.endswith("+backend+preflight")
    text = merged[FUSION].decode()
    assert "is_sm90_supported() or is_sm100_supported() or is_sm120_supported()" in text
    assert text.count("from sglang.srt.utils import is_sm120_supported") == 1
    assert not multicast_failure_raises(text)
    assert {s.gate for s in sites} == {"G1", "G2", "G3"}
    assert sorted(changed) == sorted(files)


def test_workspace_preflight_can_be_left_alone():
    _layout, sites, merged, _changed = apply_plan({COMM: V054_INLINE, FUSION: FUSION_014}, g3=False)
    assert multicast_failure_raises(merged[FUSION].decode())
    assert "G3" not in {s.gate for s in sites}


def test_patched_sources_plan_no_further_change():
    files = {COMM: V054_INLINE, FUSION: FUSION_014}
    _layout, _sites, merged, _changed = apply_plan(files)
    ok, sites = fg.verify_admitted(merged, ALL_HELPERS)
    assert ok and all(site.admitted for site in sites)
    assert not fg.verify_admitted(files, ALL_HELPERS)[0]


def test_sed_style_hand_patch_is_recognised_and_not_doubled():
    sed = V019_PLATFORM.replace(b"(_is_sm90_supported or _is_sm100_supported)",
                                b"(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)")
    _layout, sites, merged, changed = apply_plan({ADD_NORM: sed})
    assert sites[0].admitted
    text = merged[ADD_NORM].decode()
    assert text.count("or _is_sm120_supported") == 1
    assert "_is_sm120_supported = _is_cuda and get_platform().is_sm120" in text  # was a NameError waiting


def test_upstream_style_admission_with_defined_flag_changes_nothing():
    upstream = V019_PLATFORM.replace(
        b"_is_sm100_supported = _is_cuda and get_platform().is_sm100\n",
        b"_is_sm100_supported = _is_cuda and get_platform().is_sm100\n"
        b"_is_sm120_supported = _is_cuda and get_platform().is_sm120\n").replace(
        b"(_is_sm90_supported or _is_sm100_supported)",
        b"(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)")
    _layout, sites, _merged, changed = apply_plan({ADD_NORM: upstream})
    assert changed == {} and sites[0].admitted


def test_restructured_guard_is_a_layout_error_naming_what_was_sought():
    odd = V019_PLATFORM.replace(b"(_is_sm90_supported or _is_sm100_supported)", b"_arch() in (90, 100)")
    with pytest.raises(fg.LayoutError) as raised:
        fg.plan({ADD_NORM: odd}, ALL_HELPERS)
    message = str(raised.value)
    assert "apply_flashinfer_allreduce_fusion" in message and ADD_NORM in message


def test_backend_function_without_recognised_check_is_refused():
    odd = FUSION_014.replace(b"if not (is_sm90_supported() or is_sm100_supported()):", b"if not _ok():")
    with pytest.raises(fg.LayoutError, match="_resolve_backend"):
        fg.plan({COMM: V054_INLINE, FUSION: odd}, ALL_HELPERS)


def test_unrecognised_multicast_check_is_refused():
    check = (b"        if err != cuda_driver.CUresult.CUDA_SUCCESS:\n"
             b"            raise RuntimeError(f\"cuMulticastGetGranularity failed: {err}\")\n")
    assert check in FUSION_014
    odd = FUSION_014.replace(check, b"        assert err == 0\n")
    with pytest.raises(fg.LayoutError, match="cuMulticastGetGranularity"):
        fg.plan({COMM: V054_INLINE, FUSION: odd}, ALL_HELPERS)


def test_no_guard_file_at_all_is_refused():
    with pytest.raises(fg.LayoutError, match="found files: none"):
        fg.plan({}, ALL_HELPERS)


def test_unicode_before_a_gate_keeps_byte_offsets_right():
    """ast column offsets count UTF-8 bytes; an edit placed by characters would land too early."""
    source = V019_PLATFORM.replace(b"return (_is_sm90_supported",
                                   "return ('fusi\u00f3n \u2014 \u00e9t\u00e9' > '') and (_is_sm90_supported".encode())
    _layout, _sites, merged, _changed = apply_plan({ADD_NORM: source})
    text = merged[ADD_NORM].decode()
    assert "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)" in text


@pytest.mark.parametrize("body,expected", [
    (b"class ServerArgs:\n    flashinfer_allreduce_fusion_backend: Optional[str] = None\n",
     ["--flashinfer-allreduce-fusion-backend", "trtllm"]),
    (b"def add(parser):\n    parser.add_argument('--enable-flashinfer-allreduce-fusion', action='store_true')\n",
     ["--enable-flashinfer-allreduce-fusion"]),
    (b"class ServerArgs:\n    other: int = 1\n", []),
])
def test_server_flag_read_from_argument_definitions(body, expected):
    assert fg.server_flag([("server_args.py", body)]) == expected


OFF = ["--enforce-disable-flashinfer-allreduce-fusion"]


@pytest.mark.parametrize("body,expected", [
    # 0.5.14-0.5.19 on ServerArgs, 0.5.21+ on the namespace classes of arg_groups/fields: a help string makes the flag
    (b"class ServerArgs:\n    enforce_disable_flashinfer_allreduce_fusion: A[\n"
     b"        bool, 'Enforce disable FlashInfer allreduce fusion.', NS('exec.comm')\n    ] = False\n", OFF),
    (b"class Exec:\n    enforce_disable_flashinfer_allreduce_fusion: Annotated[bool, Arg(help='x')] = False\n", OFF),
    (b"class E:\n    enforce_disable_flashinfer_allreduce_fusion: 'A[bool, \"Enforce disable.\"]' = False\n", OFF),
    (b"class E:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, ('Enforce ' 'disable ' + 'it.')] = False\n",
     OFF),
    (b"class E:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, Arg(\n"
     b"        cli_name='--enforce-disable-flashinfer-allreduce-fusion')] = False\n", OFF),
    # the add_argument style of releases before the annotated fields
    (b"def add(parser):\n    parser.add_argument(\n        '--enforce-disable-flashinfer-allreduce-fusion',\n"
     b"        action='store_true')\n", OFF),
    # hidden from the command line, renamed, metadata only, a plain dataclass field: no such flag
    (b"class E:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, Arg(no_cli=True), NS('x')] = False\n", []),
    (b"class E:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, Arg(cli_name='--no-fusion')] = False\n", []),
    (b"class E:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, NS('exec.comm')] = False\n", []),
    (b"class ServerArgs:\n    enforce_disable_flashinfer_allreduce_fusion: bool = False\n", []),
    # the flag named in a log message, not declared (0.5.17's arg_groups/overrides.py)
    (b"logger.info('FlashInfer allreduce fusion is forcibly disabled '\n"
     b"            'via --enforce-disable-flashinfer-allreduce-fusion.')\n"
     b"x = '--enforce-disable-flashinfer-allreduce-fusion'\n", []),
    # the fusion-on flags alone (0.5.4-0.5.9 have no off switch)
    (b"def add(parser):\n    parser.add_argument('--enable-flashinfer-allreduce-fusion', action='store_true')\n", []),
    (b"class ServerArgs:\n    def broken(:\n", []),
])
def test_no_fusion_flag_read_from_argument_definitions(body, expected):
    assert fg.server_no_fusion_flag([("server_args.py", body)]) == expected


def test_no_fusion_flag_found_in_any_of_the_sources():
    sources = [("server_args.py", b"class ServerArgs:\n    tp_size: A[int, 'TP.'] = 1\n"),
               ("arg_groups/fields/exec_.py",
                b"class Exec:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, 'Off.'] = False\n")]
    assert fg.server_no_fusion_flag(sources) == OFF
    assert fg.server_no_fusion_flag(sources[:1]) == [] and fg.server_no_fusion_flag([]) == []
