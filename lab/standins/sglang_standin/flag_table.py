"""The stand-in's own typed table of sglang 0.5.21's launch_server flags, used when the installed SGLang's
definitions cannot be read (flags.parse_flags says which was used in the first log line).

Every flag, alias, type and choice list here is one the real 0.5.21 parser declares:
tests/unit/test_standin_flag_table.py holds this table to the real wheel's definitions.
"""
import argparse

from sglang_standin.config import CONFIG_DEFAULT_PATH, CONFIG_DEFAULTS, CONFIG_ENV, STANDIN

PROG = "sglang serve"  # prog of the real parser (sglang.srt.server_args.prepare_server_args)


def _bool_flag(parser, *names, **kw):
    parser.add_argument(*names, action="store_true", **kw)


def build_parser():
    """sglang 0.5.21's launch_server flags that matter here (dests and defaults as in arg_groups/fields/*.py).

    argparse abbreviations stay on, as in the real parser: `--tp 8` is `--tp-size 8`; `--cuda-graph-max-bs` is
    ambiguous (0.5.21 has only -decode and -prefill) and fails exactly as the real CLI does.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="%s. NOT SGLang: no model, no GPU; fake completions at a configured rate, the real "
                    "start-up log lines, the real HTTP API. Behaviour: JSON file $%s (default %s). For tests "
                    "and the container lab only." % (STANDIN, CONFIG_ENV, CONFIG_DEFAULT_PATH),
        epilog="Config keys: " + ", ".join(CONFIG_DEFAULTS) + ". See lab/standins/README.md.")
    a = parser.add_argument
    # model
    a("--model-path", "--model", dest="model_path", type=str, required=True)
    a("--tokenizer-path", type=str, default=None)
    a("--tokenizer-mode", type=str, default="auto")
    _bool_flag(parser, "--skip-tokenizer-init")
    a("--load-format", type=str, default="auto")
    _bool_flag(parser, "--trust-remote-code")
    a("--context-length", type=int, default=None)
    a("--revision", type=str, default=None)
    a("--dtype", type=str, default="auto")
    a("--quantization", type=str, default=None)
    a("--kv-cache-dtype", type=str, default="auto")
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
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--page-size", type=int, default=None)
    a("--schedule-policy", type=str, default="fcfs")
    _bool_flag(parser, "--enable-mixed-chunk")
    _bool_flag(parser, "--disable-radix-cache")
    # parallelism
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    a("--ep-size", type=int, default=1)
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
    a("--attention-backend", type=str, default=None)
    a("--moe-runner-backend", type=str, default="auto")
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
