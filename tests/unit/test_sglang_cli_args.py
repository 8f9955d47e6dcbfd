"""Flag tables from synthetic SGLang sources, one per declaration style, and argv checking."""
import os
import textwrap

import pytest

import tests.conftest  # noqa: F401  (puts module_utils on ansible.module_utils' path)
from ansible.module_utils import sglang_cli_args as cli

# Shared by every layout: the Action classes as SGLang defines them (0.5.14+ copy).
ACTIONS = '''
import argparse


class LoRAPathAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, error_message=None, nargs=0, **kwargs):
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.error_message is not None:
            parser.error(self.error_message)
        print("deprecated")


class DeprecatedAliasStoreAction(argparse.Action):
    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
'''

# Up to 0.5.9: every flag is an add_argument call; the action classes live in server_args.py.
ADD_ARGUMENT_STYLE = '''
import argparse
from dataclasses import dataclass

from sglang.srt.choices import LOAD_FORMATS

ATTENTION_BACKEND_CHOICES = ["triton", "flashinfer"] + ["fa3"]
DRAFT_QUANTIZATION_CHOICES = [*LOAD_FORMATS, "unquant"]
SAMPLING_BACKEND_CHOICES = {"flashinfer", "pytorch"}
if envs.SGLANG_ENABLE_TOKEN_ORACLE.get():
    SAMPLING_BACKEND_CHOICES.add("token_oracle")


@dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", "--model", type=str, required=True, help="Model.")
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)
        parser.add_argument("--mem-fraction-static", type=float)
        parser.add_argument("--enable-metrics", action="store_true")
        parser.add_argument("--speculative-algorithm", type=str, choices=["EAGLE", "EAGLE3", "NEXTN"])
        parser.add_argument("--attention-backend", type=str, choices=ATTENTION_BACKEND_CHOICES)
        parser.add_argument("--load-format", type=str, choices=LOAD_FORMATS)
        parser.add_argument("--draft-quantization", type=str, choices=DRAFT_QUANTIZATION_CHOICES)
        parser.add_argument("--sampling-backend", type=str, choices=SAMPLING_BACKEND_CHOICES)
        parser.add_argument("--tool-call-parser", type=str, choices=tool_call_parser_choices())
        parser.add_argument("--cuda-graph-bs", type=int, nargs="+")
        parser.add_argument("--hybrid-kvcache-ratio", nargs="?", const=0.5, type=float)
        parser.add_argument("--kv-cache-level", type=int, choices=[0, 1, 2])
        parser.add_argument("--json-model-override-args", type=json_parser, default="{}")
        parser.add_argument("--lora-paths", type=str, nargs="*", action=LoRAPathAction)
        parser.add_argument("--enable-ep-moe", action=DeprecatedAction, help="NOTE: --enable-ep-moe is gone.")
        parser.add_argument("--debug", action=argparse.BooleanOptionalAction)


class LoRAPathAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super(DeprecatedAction, self).__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError(self.help)
'''

# 0.5.14-0.5.19: annotated dataclass fields, a few add_argument calls for the rest.
ANNOTATED_STYLE = '''
from __future__ import annotations

import argparse
import dataclasses
from typing import List, Literal, Optional

from sglang.srt.arg_groups.arg_utils import A, NS, Arg, add_cli_args_from_dataclass
from sglang.srt.arg_groups.argparse_actions import DeprecatedAction, DeprecatedAliasStoreAction, LoRAPathAction
from sglang.srt.choices import LOAD_FORMATS


@dataclasses.dataclass
class ServerArgs:
    model_path: A[str, Arg(help="The model.", aliases=["--model"])]
    tp_size: A[int, Arg(help="TP size.", aliases=["--tensor-parallel-size"]), NS("parallel")] = 1
    host: A[str, "The host."] = "127.0.0.1"
    api_key: A[Optional[str], "The API key."] = None
    enable_metrics: A[bool, "Enable metrics."] = False
    mem_fraction_static: A[float | None, "Fraction."] = None
    load_format: A[str, Arg(help="Format.", choices=LOAD_FORMATS)] = "auto"
    flashinfer_allreduce_fusion_backend: A[
        Optional[Literal["auto", "trtllm", "mnnvl"]],
        Arg(help="Fusion backend."),
    ] = None
    kv_cache_level: A[Literal[0, 1, 2], "Level."] = 0
    cuda_graph_backend: A[Optional[Literal["full", "disabled"]], Arg(help="x", choices=Backend.ALL)] = None
    fp8_gemm_runner_backend: A[str, Arg(help="FP8 GEMM.", cli_name="--fp8-gemm-backend")] = "auto"
    cuda_graph_bs: A[Optional[List[int]], "Batch sizes."] = None
    numa_node: A[Optional[List[int]], Arg(help="NUMA.", nargs="*")] = None
    context_length: A[Optional[int], Arg(help="Context.", type_parser=human_readable_int)] = None
    json_list: A[Optional[List[str]], Arg(help="J.", type_parser=json_list_type)] = None
    model_checksum: A[Optional[str], Arg(help="Checksum.", nargs="?", const="")] = None
    enable_fused_qk: A[bool, Arg(help="Fused.", action=argparse.BooleanOptionalAction)] = True
    lora_paths: A[
        Optional[List[str]], Arg(help="LoRA.", action=LoRAPathAction, action_kwargs={"type": str, "nargs": "*"})
    ] = None
    stat_loggers: A[Optional[list], Arg(no_cli=True)] = None
    world_rank: A[int, NS("parallel")] = 0
    plain: int = 0
    items: list = dataclasses.field(default_factory=list)

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--config", type=str)
        parser.add_argument("--reasoning-parser", type=str, choices=["auto"] + reasoning_parser_choices)
        parser.add_argument(
            "--enable-expert-distribution-metrics",
            action=DeprecatedAction,
            error_message="--enable-expert-distribution-metrics is no longer supported.",
        )
        parser.add_argument("--collect-tokens-histogram", action=DeprecatedAction, help="Deprecated.")
        parser.add_argument("--cuda-graph-max-bs", type=int, action=DeprecatedAliasStoreAction,
                            dest="cuda_graph_max_bs_decode", new_flag="--cuda-graph-max-bs-decode")
        parser.add_argument("--enable-flashinfer-allreduce-fusion", action="store_true",
                            help="(Deprecated: use --flashinfer-allreduce-fusion-backend=auto) Fusion.")
'''

# 0.5.21+: the fields live on namespace classes in arg_groups/fields/*.py.
NAMESPACE_SERVER_ARGS = '''
from __future__ import annotations

import argparse

import msgspec

from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
from sglang.srt.arg_groups.fields import collect_input_fields
from sglang.srt.arg_groups.fields.parallel import Parallel
from sglang.srt.arg_groups.fields.spec import Spec


class ServerArgs:
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--sampling-backend", type=str, choices=sampling_backend_choices)


_INPUT_NAMESPACES = [Parallel, Spec]
_annotations, _defaults, _namespaces = collect_input_fields(_INPUT_NAMESPACES)
ServerArgs = msgspec.defstruct("ServerArgs", [])
'''
NAMESPACE_PARALLEL = '''
import msgspec

from sglang.srt.arg_groups.arg_utils import A, Arg


class Parallel(msgspec.Struct):
    _NS_PATH = "parallel"
    tp_size: A[int, Arg(help="TP.", aliases=["--tensor-parallel-size"])] = 1
    model_path: A[str, Arg(help="Model.", aliases=["--model"])]
    rank: A[int, Arg(no_cli=True)] = 0
'''
NAMESPACE_SPEC = '''
from typing import Optional

import msgspec

from ..arg_utils import A, Arg
from ..choices import SPEC_CHOICES


class Spec(msgspec.Struct):
    _NS_PATH = "spec"
    speculative_algorithm: A[Optional[str], Arg(help="Algo.", choices=SPEC_CHOICES)] = None
    speculative_num_steps: A[Optional[int], "Steps."] = None
    speculative_eagle_topk: A[Optional[int], "Top-k."] = None
'''


def write(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(textwrap.dedent(text))
    return str(root)


def dist_info(version):
    return {"sglang-%s.dist-info/METADATA" % version: "Metadata-Version: 2.1\nName: sglang\nVersion: %s\n\n" % version}


@pytest.fixture
def add_argument_style(tmp_path):
    return write(tmp_path / "add_argument", dict(dist_info("0.5.4"), **{
        "sglang/srt/server_args.py": ADD_ARGUMENT_STYLE,
        "sglang/srt/choices.py": 'LOAD_FORMATS = ["auto", "pt"] + EXTRA\nEXTRA = ["gguf"]\n',
    }))


@pytest.fixture
def annotated_style(tmp_path):
    return write(tmp_path / "annotated", {
        "sglang/_version.py": "__version__ = version = '0.5.14'\n",
        "sglang/srt/server_args.py": ANNOTATED_STYLE,
        "sglang/srt/choices.py": 'LOAD_FORMATS = ("auto", "pt")\n',
        "sglang/srt/arg_groups/argparse_actions.py": ACTIONS,
    })


@pytest.fixture
def namespace_style(tmp_path):
    return write(tmp_path / "namespaces", dict(dist_info("0.5.21"), **{
        "sglang/srt/server_args.py": NAMESPACE_SERVER_ARGS,
        "sglang/srt/arg_groups/fields/parallel.py": NAMESPACE_PARALLEL,
        "sglang/srt/arg_groups/fields/spec.py": NAMESPACE_SPEC,
        "sglang/srt/arg_groups/choices.py": 'SPEC_CHOICES = ["EAGLE", "EAGLE3"]\n',
    }))


def without_source(entry):
    return {key: value for key, value in entry.items() if key != "source"}


# --- add_argument style -------------------------------------------------------------------------

def test_add_argument_flags_aliases_and_dest(add_argument_style):
    flags = cli.known_flags(add_argument_style)
    assert flags.version == "0.5.4"
    assert flags.sources == ["sglang/srt/server_args.py"]
    # argparse names the dest after the first long flag: --tp-size lands in tensor_parallel_size
    assert flags["--tp-size"] is flags["--tensor-parallel-size"]
    assert flags["--tp-size"]["dest"] == "tensor_parallel_size"
    assert flags["--model"]["dest"] == "model_path" and flags["--model"]["required"]
    assert without_source(flags["--mem-fraction-static"]) == {
        "dest": "mem_fraction_static", "takes_value": True, "nargs": None, "type": "float", "choices": None,
        "required": False, "deprecated": False, "refuses": None, "const": None}
    assert not flags["--enable-metrics"]["takes_value"] and flags["--enable-metrics"]["const"] is True


def test_add_argument_choices_literal_constant_imported_and_dynamic(add_argument_style):
    flags = cli.known_flags(add_argument_style)
    assert flags["--speculative-algorithm"]["choices"] == ["EAGLE", "EAGLE3", "NEXTN"]
    assert flags["--attention-backend"]["choices"] == ["triton", "flashinfer", "fa3"]  # module constant, folded
    assert flags["--load-format"]["choices"] == ["auto", "pt", "gguf"]  # imported from another module
    assert flags["--draft-quantization"]["choices"] == ["auto", "pt", "gguf", "unquant"]  # [*X, ...]
    assert flags["--tool-call-parser"]["choices"] is None  # computed at start-up: unchecked
    assert flags["--sampling-backend"]["choices"] is None  # changed at import time, per environment
    assert flags["--kv-cache-level"]["choices"] == [0, 1, 2]


def test_add_argument_nargs_types_and_actions(add_argument_style):
    flags = cli.known_flags(add_argument_style)
    assert flags["--cuda-graph-bs"]["nargs"] == "+" and flags["--cuda-graph-bs"]["type"] == "int"
    assert flags["--hybrid-kvcache-ratio"]["nargs"] == "?" and flags["--hybrid-kvcache-ratio"]["const"] == 0.5
    assert flags["--json-model-override-args"]["type"] is None  # custom parser: not checked
    assert flags["--lora-paths"]["takes_value"] and flags["--lora-paths"]["nargs"] == "*"
    # DeprecatedAction defaults nargs=0 and, in this layout, raises: the launch stops
    assert not flags["--enable-ep-moe"]["takes_value"]
    assert flags["--enable-ep-moe"]["deprecated"]
    assert flags["--enable-ep-moe"]["refuses"] == "NOTE: --enable-ep-moe is gone."
    assert flags["--no-debug"]["dest"] == "debug" and flags["--no-debug"]["const"] is False


# --- annotated dataclass style (0.5.14-0.5.19) ---------------------------------------------------

def test_annotated_fields_become_flags(annotated_style):
    flags = cli.known_flags(annotated_style)
    assert flags.version == "0.5.14"  # from sglang/_version.py: no dist-info here
    assert flags["--tp-size"] is flags["--tensor-parallel-size"] and flags["--tp-size"]["dest"] == "tp_size"
    assert flags["--model"]["dest"] == "model_path" and flags["--model-path"]["required"]  # no default
    assert not flags["--host"]["required"] and flags["--host"]["type"] == "str"
    assert flags["--api-key"]["takes_value"]
    assert not flags["--enable-metrics"]["takes_value"]  # bool -> store_true
    assert flags["--mem-fraction-static"]["type"] == "float"  # `float | None`
    assert flags["--fp8-gemm-backend"]["dest"] == "fp8_gemm_runner_backend"  # Arg(cli_name=...)
    assert "--fp8-gemm-runner-backend" not in flags
    for hidden in ("--stat-loggers", "--world-rank", "--plain", "--items"):  # no_cli, NS only, not annotated
        assert hidden not in flags


def test_annotated_choices_nargs_and_actions(annotated_style):
    flags = cli.known_flags(annotated_style)
    assert flags["--flashinfer-allreduce-fusion-backend"]["choices"] == ["auto", "trtllm", "mnnvl"]  # Literal
    assert flags["--kv-cache-level"]["choices"] == [0, 1, 2] and flags["--kv-cache-level"]["type"] == "int"
    assert flags["--load-format"]["choices"] == ["auto", "pt"]  # Arg(choices=NAME) through an import
    assert flags["--cuda-graph-backend"]["choices"] is None  # Arg(choices=Backend.ALL) wins, unknown statically
    assert flags["--cuda-graph-bs"]["nargs"] == "+" and flags["--cuda-graph-bs"]["type"] == "int"
    assert flags["--numa-node"]["nargs"] == "*"
    assert flags["--context-length"]["type"] is None and flags["--context-length"]["nargs"] is None
    assert flags["--json-list"]["nargs"] is None  # a type_parser takes the whole list as one value
    assert flags["--model-checksum"]["nargs"] == "?" and flags["--model-checksum"]["const"] == ""
    assert not flags["--enable-fused-qk"]["takes_value"]
    assert flags["--no-enable-fused-qk"]["dest"] == "enable_fused_qk"  # BooleanOptionalAction
    assert flags["--lora-paths"]["nargs"] == "*" and flags["--lora-paths"]["type"] == "str"


def test_annotated_manual_registrations(annotated_style):
    flags = cli.known_flags(annotated_style)
    assert flags["--reasoning-parser"]["choices"] is None
    assert flags["--enable-expert-distribution-metrics"]["refuses"] == \
        "--enable-expert-distribution-metrics is no longer supported."
    assert flags["--collect-tokens-histogram"]["refuses"] is None  # warns only, no error_message
    alias = flags["--cuda-graph-max-bs"]
    assert alias["takes_value"] and alias["deprecated"] and alias["dest"] == "cuda_graph_max_bs_decode"
    assert flags["--enable-flashinfer-allreduce-fusion"]["deprecated"]
    assert not flags["--flashinfer-allreduce-fusion-backend"]["deprecated"]


# --- namespace classes (0.5.21+) -------------------------------------------------------------------

def test_namespace_classes_are_collected(namespace_style):
    flags = cli.known_flags(namespace_style)
    assert flags.version == "0.5.21"
    assert flags["--tp-size"]["source"] == "sglang/srt/arg_groups/fields/parallel.py"
    assert flags["--speculative-algorithm"]["choices"] == ["EAGLE", "EAGLE3"]  # relative import followed
    assert flags["--speculative-num-steps"]["type"] == "int"
    assert "--rank" not in flags
    assert flags["--sampling-backend"]["choices"] is None  # a local of add_cli_args: unchecked
    assert flags.sources == ["sglang/srt/arg_groups/fields/parallel.py", "sglang/srt/arg_groups/fields/spec.py",
                             "sglang/srt/server_args.py"]


def test_missing_sglang_and_unknown_layout(tmp_path):
    with pytest.raises(cli.SourceError, match="not installed"):
        cli.known_flags(str(tmp_path))
    root = write(tmp_path, {"sglang/srt/server_args.py": "class ServerArgs:\n    pass\n"})
    with pytest.raises(cli.SourceError, match="no ServerArgs.add_cli_args"):
        cli.known_flags(root)
    write(tmp_path, {"sglang/srt/server_args.py": ADD_ARGUMENT_STYLE.replace('"--model-path", ', "")})
    with pytest.raises(cli.SourceError, match="not --model-path"):
        cli.known_flags(root)


# --- check_argv ---------------------------------------------------------------------------------

def test_check_argv_parses_a_good_command_line(namespace_style):
    flags = cli.known_flags(namespace_style)
    errors, parsed = cli.check_argv(flags, ["--model", "m", "--tp-size=8", "--speculative-algorithm", "EAGLE3",
                                            "--speculative-num-steps", "3", "--speculative-eagle-topk", "-1"])
    assert errors == []
    assert parsed == {"model_path": "m", "tp_size": 8, "speculative_algorithm": "EAGLE3",
                      "speculative_num_steps": 3, "speculative_eagle_topk": -1}  # -1 is a value, as in argparse


def test_check_argv_errors_name_flag_version_and_file(namespace_style):
    flags = cli.known_flags(namespace_style)
    errors, parsed = cli.check_argv(flags, ["--model-path", "m", "--speculative-num-stepz", "3",
                                            "--tp-size", "--speculative-algorithm", "MEDUSA",
                                            "--speculative-eagle-topk", "one"])
    assert len(errors) == 4, errors
    assert errors[0].startswith("unknown flag --speculative-num-stepz: did you mean --speculative-num-steps or ")
    assert errors[0].endswith("(sglang 0.5.21, looked up in sglang/srt/server_args.py, "
                              "sglang/srt/arg_groups/fields/*.py (2 files))")
    assert errors[1] == "--tp-size needs a value, got none (sglang 0.5.21, sglang/srt/arg_groups/fields/parallel.py)"
    assert errors[2].startswith("--speculative-algorithm: 'MEDUSA' is not one of EAGLE, EAGLE3 (sglang 0.5.21, ")
    assert errors[3].startswith("--speculative-eagle-topk: 'one' is not a valid int")
    assert parsed == {"model_path": "m"}  # the unknown flag's value "3" is not reported again as stray


def test_abbreviations_strict_by_default(namespace_style):
    flags = cli.known_flags(namespace_style)
    errors, _ = cli.check_argv(flags, ["--model-path", "m", "--tp", "8"])
    assert errors and "argparse would expand this abbreviation to --tp-size" in errors[0]
    assert "did you mean --tp-size?" in errors[0]
    errors, parsed = cli.check_argv(flags, ["--model-path", "m", "--tp", "8"], allow_abbrev=True)
    assert errors == [] and parsed["tp_size"] == 8
    errors, _ = cli.check_argv(flags, ["--model-path", "m", "--speculative-", "1"], allow_abbrev=True)
    assert "ambiguous abbreviation of --speculative-algorithm, --speculative-eagle-topk" in errors[0]


def test_check_argv_values_and_flags(add_argument_style):
    flags = cli.known_flags(add_argument_style)
    notes = []
    errors, parsed = cli.check_argv(flags, [
        "--model-path", "m", "--cuda-graph-bs", "1", "2", "4", "--hybrid-kvcache-ratio", "--lora-paths",
        "--kv-cache-level", "2", "--enable-metrics", "--no-debug", "--json-model-override-args", '{"a": 1}',
        "--tool-call-parser", "anything"], notes=notes)
    assert errors == []
    assert parsed == {"model_path": "m", "cuda_graph_bs": [1, 2, 4], "hybrid_kvcache_ratio": 0.5, "lora_paths": [],
                      "kv_cache_level": 2, "enable_metrics": True, "debug": False,
                      "json_model_override_args": '{"a": 1}', "tool_call_parser": "anything"}
    errors, _ = cli.check_argv(flags, ["--model-path", "m", "--enable-metrics=yes", "--kv-cache-level", "7",
                                       "--cuda-graph-bs", "stray", "--", "x"])
    assert errors[0].startswith("--enable-metrics takes no value, got 'yes'")
    assert errors[1].startswith("--kv-cache-level: 7 is not one of 0, 1, 2")
    assert errors[2].startswith("--cuda-graph-bs: 'stray' is not a valid int")
    assert errors[3].startswith("'--' ends the options")


def test_required_refused_and_deprecated(add_argument_style, annotated_style):
    flags = cli.known_flags(add_argument_style)
    errors, _ = cli.check_argv(flags, ["--tp-size", "2", "value"])
    assert errors == ["stray value 'value': no flag before it takes a value (sglang 0.5.4, looked up in "
                      "sglang/srt/server_args.py)",
                      "--model-path is required (sglang 0.5.4, sglang/srt/server_args.py)"]
    errors, _ = cli.check_argv(flags, ["--config", "server.yaml"])
    assert errors[0].startswith("unknown flag --config")  # 0.5.4-style table here has no --config
    errors, _ = cli.check_argv(flags, ["--model", "m", "--enable-ep-moe"])
    assert errors == ["--enable-ep-moe: this SGLang stops the launch on it: NOTE: --enable-ep-moe is gone. "
                      "(sglang 0.5.4, sglang/srt/server_args.py)"]
    flags = cli.known_flags(annotated_style)
    errors, _ = cli.check_argv(flags, ["--config", "server.yaml"])
    assert errors == []  # a config file may carry --model-path
    notes = []
    errors, parsed = cli.check_argv(flags, ["--model", "m", "--cuda-graph-max-bs", "64"], notes=notes)
    assert errors == [] and parsed["cuda_graph_max_bs_decode"] == 64
    assert notes == ["--cuda-graph-max-bs is deprecated in sglang 0.5.14, sglang/srt/server_args.py"]


def test_plain_dict_flags_are_enough():
    flags = {"--port": {"dest": "port", "takes_value": True, "nargs": None, "type": "int", "choices": None,
                        "source": "x.py"}}
    assert cli.check_argv(flags, ["--port", "30000"]) == ([], {"port": 30000})
    errors, _ = cli.check_argv(flags, ["--prot", "1"])
    assert errors == ["unknown flag --prot: did you mean --port? (sglang (version unknown), looked up in "
                      "its argument definitions)"]


def test_an_option_given_twice_is_refused_under_any_of_its_names(namespace_style):
    # argparse keeps the last value silently: an extra argument would override what the role set before it.
    flags = cli.known_flags(namespace_style)
    errors, parsed = cli.check_argv(flags, ["--model-path", "m", "--tp-size", "2", "--model", "other",
                                            "--tp-size=8"])
    assert len(errors) == 2, errors
    assert errors[0].startswith("--model sets model_path again (--model-path set it earlier on the command line)")
    assert errors[1].startswith("--tp-size sets tp_size again (--tp-size set it earlier")
    assert "argparse would keep the last" in errors[1]
