"""The stand-in's own typed table of sglang 0.5.21's launch_server flags, used when the installed SGLang's
definitions cannot be read (flags.parse_flags says which was used in the first log line).

Every flag, alias, type and choice list here is the real 0.5.21 parser's, read from its arg_groups/fields/*.py
(choices printed by module_utils/sglang_cli_args.known_flags from the wheel); the defaults are the stand-in's.
tests/unit/test_sglang_standin_flag_table.py holds the table to the real wheel: a flag, alias or abbreviation the
real parser refuses, a type or a choice list that differs, fails it.
"""
import argparse
import re
import sys
from decimal import Decimal

from sglang_standin.config import CONFIG_DEFAULT_PATH, CONFIG_DEFAULTS, CONFIG_ENV, STANDIN
from sglang_standin.sglang_flag_names import FLAG_NAMES

PROG = "sglang serve"  # prog of the real parser (sglang.srt.server_args.prepare_server_args)

# sglang 0.5.21's Literal choices, in its order
TOKENIZER_MODE_CHOICES = ("auto", "slow")
LOAD_FORMAT_CHOICES = ("auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "presharded", "gguf",
                       "expert_pack", "bitsandbytes", "mistral", "layered", "flash_rl", "remote", "remote_instance",
                       "fastsafetensors", "private", "runai_streamer")
DTYPE_CHOICES = ("auto", "half", "float16", "bfloat16", "float", "float32")
QUANTIZATION_CHOICES = ("awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
                        "modelopt", "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4",
                        "w8a8_int8", "w8a8_fp8", "moe_wna16", "w4afp8", "mxfp4", "auto-round", "auto-round-int8",
                        "compressed-tensors", "modelslim", "mxfp_w4a8", "quark", "quark_int4fp8_moe", "quark_mxfp4",
                        "mlx_q4", "mlx_q8", "unquant", "humming")
KV_CACHE_DTYPE_CHOICES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")
SCHEDULE_POLICY_CHOICES = ("lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key", "hrrn",
                           "shortest-prefill-first")
ATTENTION_BACKEND_CHOICES = ("triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed",
                             "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla",
                             "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave",
                             "intel_amx", "ascend", "intel_xpu")
MOE_RUNNER_BACKEND_CHOICES = ("auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm",
                              "experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutlass",
                              "flashinfer_mxfp4", "flashinfer_cutedsl", "flashinfer_megamoe", "cutlass", "aiter",
                              "marlin", "humming", "experimental_sgl_marlin", "hpc_ops", "megamoe", "intel_xpu")


def human_readable_int(value):
    """sglang.srt.utils.common.human_readable_int (0.5.21), the type of --context-length and --max-total-tokens:
    an integer, or one with an SI (k, M, G, T; decimals allowed) or IEC (Ki, Mi, Gi, Ti) suffix."""
    value = str(value).strip()  # str(): the SGLang-checked path hands on what its reader already converted
    si_multiplier = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec_multiplier = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec_multiplier:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    "Decimals are not allowed with IEC suffixes like '%s'. Use an integer IEC value such as '%s%s', "
                    "or an SI value such as '%s%s'." % (suffix, int(Decimal(number)), suffix, number, suffix[0]))
            return int(number) * iec_multiplier[suffix]
        return int(Decimal(number) * si_multiplier[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "Invalid integer value: '%s'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive." % value) from None


class SGLangParser(argparse.ArgumentParser):
    """argparse with the real parser's abbreviation rule: a prefix is matched against every flag sglang 0.5.21
    declares (sglang_flag_names.py), not only the few modelled here, so `--model-` is ambiguous as it is there."""

    def parse_known_args(self, args=None, namespace=None):
        for token in (sys.argv[1:] if args is None else args):
            if token == "--":
                break
            name = token.partition("=")[0]
            if not name.startswith("--") or " " in token or name in FLAG_NAMES:
                continue
            matches = [flag for flag in FLAG_NAMES if flag.startswith(name)]
            if len(matches) > 1:
                self.error("ambiguous option: %s could match %s" % (token, ", ".join(matches)))  # argparse's words
        return super().parse_known_args(args, namespace)


def _bool_flag(parser, *names, **kw):
    parser.add_argument(*names, action="store_true", **kw)


def build_parser():
    """sglang 0.5.21's launch_server flags that matter here (dests and defaults as in arg_groups/fields/*.py; the
    metavars keep the usage text short, as before the choices were copied).

    argparse abbreviations stay on, as in the real parser: `--tp 8` is `--tp-size 8`; `--cuda-graph-max-bs` is
    ambiguous (0.5.21 has only -decode and -prefill) and fails exactly as the real CLI does.
    """
    parser = SGLangParser(
        prog=PROG,
        description="%s. NOT SGLang: no model, no GPU; fake completions at a configured rate, the real "
                    "start-up log lines, the real HTTP API. Behaviour: JSON file $%s (default %s). For tests "
                    "and the container lab only." % (STANDIN, CONFIG_ENV, CONFIG_DEFAULT_PATH),
        epilog="Config keys: " + ", ".join(CONFIG_DEFAULTS) + ". See lab/standins/README.md.")
    a = parser.add_argument
    # model
    a("--model-path", "--model", dest="model_path", type=str, required=True)
    a("--tokenizer-path", type=str, default=None)
    a("--tokenizer-mode", type=str, default="auto", choices=TOKENIZER_MODE_CHOICES, metavar="TOKENIZER_MODE")
    _bool_flag(parser, "--skip-tokenizer-init")
    a("--load-format", type=str, default="auto", choices=LOAD_FORMAT_CHOICES, metavar="LOAD_FORMAT")
    _bool_flag(parser, "--trust-remote-code")
    a("--context-length", type=human_readable_int, default=None)
    a("--revision", type=str, default=None)
    a("--dtype", type=str, default="auto", choices=DTYPE_CHOICES, metavar="DTYPE")
    a("--quantization", type=str, default=None, choices=QUANTIZATION_CHOICES, metavar="QUANTIZATION")
    a("--kv-cache-dtype", type=str, default="auto", choices=KV_CACHE_DTYPE_CHOICES, metavar="KV_CACHE_DTYPE")
    # serving
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    _bool_flag(parser, "--skip-server-warmup")
    a("--api-key", type=str, default=None)
    a("--admin-api-key", type=str, default=None)
    a("--served-model-name", type=str, default=None)
    a("--weight-version", type=str, default="default")
    a("--chat-template", type=str, default=None)
    _bool_flag(parser, "--enable-cache-report")
    a("--stream-interval", type=int, default=1)
    _bool_flag(parser, "--incremental-streaming-output")
    a("--reasoning-parser", type=str, default=None)
    a("--tool-call-parser", type=str, default=None)
    # memory and scheduling
    a("--mem-fraction-static", type=float, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=human_readable_int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--page-size", type=int, default=None)
    a("--schedule-policy", type=str, default="fcfs", choices=SCHEDULE_POLICY_CHOICES, metavar="SCHEDULE_POLICY")
    _bool_flag(parser, "--enable-mixed-chunk")
    _bool_flag(parser, "--disable-radix-cache")
    # parallelism
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    a("--ep-size", "--ep", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    _bool_flag(parser, "--enable-dp-attention")
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", type=str, default=None)
    a("--nccl-port", type=int, default=None)
    a("--dist-timeout", type=int, default=None)
    _bool_flag(parser, "--enable-p2p-check")
    # device
    a("--random-seed", type=int, default=None)
    a("--watchdog-timeout", type=float, default=300)
    # execution
    a("--attention-backend", type=str, default=None, choices=ATTENTION_BACKEND_CHOICES, metavar="ATTENTION_BACKEND")
    a("--moe-runner-backend", type=str, default="auto", choices=MOE_RUNNER_BACKEND_CHOICES,
      metavar="MOE_RUNNER_BACKEND")
    a("--cuda-graph-max-bs-decode", type=int, default=None)
    a("--cuda-graph-max-bs-prefill", type=int, default=None)
    _bool_flag(parser, "--disable-cuda-graph", help="Deprecated. Use --cuda-graph-backend-{decode,prefill}=disabled "
                                                     "instead.")
    _bool_flag(parser, "--enable-torch-compile")
    _bool_flag(parser, "--enforce-disable-flashinfer-allreduce-fusion")
    a("--flashinfer-allreduce-fusion-backend", type=str, default=None, choices=["auto", "trtllm", "mnnvl", "cutedsl"])
    _bool_flag(parser, "--enable-flashinfer-allreduce-fusion",
               help="(Deprecated: use --flashinfer-allreduce-fusion-backend=auto) "
                    "Enable FlashInfer allreduce fusion with Residual RMSNorm.")
    # speculative decoding
    a("--speculative-algorithm", type=str, default=None)
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path", type=str,
      default=None)
    a("--speculative-draft-model-revision", type=str, default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    a("--speculative-token-map", type=str, default=None)
    # observability
    a("--log-level", type=str, default="info")
    a("--log-level-http", type=str, default=None)
    _bool_flag(parser, "--log-requests")
    _bool_flag(parser, "--enable-metrics")
    _bool_flag(parser, "--enable-metrics-for-all-schedulers")
    a("--decode-log-interval", type=int, default=40)
    a("--config", type=str, default=None)
    return parser
