#!/usr/bin/env python3
"""SGLang server STAND-IN for tests and the container lab: NOT SGLang, it loads no model and runs no kernel.

It is started the way a systemd unit starts the real server, with the real flags:

    ExecStart=<venv>/bin/python <path>/sglang_server_standin.py --model-path ... --tp-size 8 ...

and answers SGLang 0.5.21's HTTP API (/health, /health_generate, /ready, /server_info, /model_info,
/v1/models, /generate, /v1/completions, /v1/chat/completions, /flush_cache, /metrics) with the real paths and
JSON shapes. Completions are made-up words produced at a configured rate (greedy output is a deterministic
function of the prompt), so a benchmark client, a correctness check and a health wait can run against it.
It prints SGLang's real start-up log lines (format strings copied from the sglang 0.5.21 wheel), including the
FlashInfer allreduce-fusion lines, so log checks can be tested.

Behaviour comes from a JSON file: $SGLANG_STANDIN_CONFIG, else /etc/sglang-standin/config.json (missing file:
defaults). Keys: see CONFIG_DEFAULTS below and lab/standins/README.md.

Flags are checked against the installed SGLang's own definitions when the module `sglang_cli_args` can be
imported from the directory in $SGLANG_STANDIN_CLI_ARGS; otherwise against the list in this file (sglang
0.5.21's spelling; argparse abbreviations allowed, as in the real CLI).

Python 3 standard library only: it runs inside the deployed venv, which has no torch or fastapi.
Production never installs it.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import random
import re
import signal
import socket
import sys
import sysconfig
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STANDIN = "sglang server STAND-IN (sglang-sm120-deploy lab)"
CONFIG_ENV = "SGLANG_STANDIN_CONFIG"
CONFIG_DEFAULT_PATH = "/etc/sglang-standin/config.json"
CLI_ARGS_ENV = "SGLANG_STANDIN_CLI_ARGS"
PROG = "sglang serve"  # prog of the real parser (sglang.srt.server_args.prepare_server_args)
WARMUP_HEADER = "X-Sglang-Standin-Warmup"
EX_CONFIG = 78  # bad stand-in config (sysexits.h EX_CONFIG); 2 stays reserved for bad server flags

# sglang 0.5.21 constants the log lines and endpoints use
FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048  # layer_boundary/residual/add_norm.py: max_token_num of the fusion workspace
DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams.max_new_tokens
OPENAI_DEFAULT_MAX_TOKENS = 16  # CompletionRequest.max_tokens
WARMUP_PROMPT = "The capital city of France is"  # http_server._execute_server_warmup

CONFIG_DEFAULTS = {
    "startup_delay_s": 2.0,  # /health, /health_generate, /ready answer 503 this long; then warm-up, then ready
    "never_healthy": False,  # never finish starting: health stays 503, "fired up" is never printed
    "crash_after_s": None,  # exit 1 this many seconds after start, with a scheduler traceback in the log
    "exit_on_start": None,  # exit with this code right after "Load weight begin" (a crash while loading)
    "fusion_log": None,  # enabled | skipped | disabled | refused | none; None: enabled when a fusion flag is given
    "fusion_error": None,  # the exception text in the skipped/disabled lines; None: a default per variant
    "tokens_per_s": 100.0,  # output tokens per second of one request, as a client measures it
    # the same without speculative decoding (a server started with no draft model); None: tokens_per_s
    "plain_tokens_per_s": None,
    "error_pct": 0.0,  # this share of /generate requests fails with HTTP 500 (evenly spread, deterministic)
    "accept_length": 2.0,  # tokens per verify step with speculative decoding (reported, and the chunking)
    "noise_pct": 0.0,  # each request's speed drawn uniformly within +-noise_pct % (seeded)
    "wrong_output": False,  # completions are deterministic garbage (a broken kernel that stays fast)
    # greedy output positions where the two best tokens have the same logprob (the bf16 ties the real server showed,
    # docs/benchmark-gate.md); tie_break says which of the two a greedy request takes there, first or second (on a
    # real server the kernels and the batch decide), and the rest of the completion follows from that choice
    "greedy_ties": [],
    "tie_break": "first",
    "seed": 0,  # seeds the noise and non-greedy sampling
    "health_check_s": 1.0,  # how long a 200 from /health or /health_generate takes (the real one waits >= 1 s)
    "hidden_dim": None,  # hidden_dim in the fusion line; None: the model's config.json, else 7168 (Kimi-K2)
    "access_log": True,  # uvicorn access-log lines for every request
    # per all-reduce path the server runs (read from its flags and environment as SGLang would), what changes:
    # {"fusion": {"tokens_per_s": 150, "wrong_output": true}, ...}; a path not named keeps the values above
    "allreduce_paths": {},
}
ALLREDUCE_PATHS = ("nccl", "fusion", "pcie_ipc", "fusion+pcie_ipc")
ALLREDUCE_PATH_KEYS = ("tokens_per_s", "wrong_output", "tie_break")
TIE_BREAKS = ("first", "second")
PCIE_SWITCH = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"  # sglang/srt/environ.py (0.5.21+), an EnvBool
PCIE_WORLD_SIZES = (2, 4, 8)  # _SUPPORTED_WORLD_SIZES of SGLang's and FlashInfer's pcie_ipc_ar.py
FUSION_VARIANTS = ("enabled", "skipped", "disabled", "refused", "none")
FUSION_ERROR_DEFAULTS = {
    # the RuntimeError G3 raises when the multicast granularity query fails (flashinfer_comm_fusion.py), as the real
    # 0.5.17 server logged it on an H200 without multicast (its cuda-python prints the CUresult as <NAME: value>)
    "skipped": "cuMulticastGetGranularity failed for FlashInfer workspace preflight: "
               "<CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>",
    # invented: what create_allreduce_fusion_workspace() could raise without CUDA P2P
    "disabled": "CUDA error: peer access is not supported between these two devices",
}

WORDS = ("the", "of", "and", "to", "in", "is", "that", "it", "for", "as", "with", "was", "on", "be", "by",
         "this", "are", "from", "at", "or", "an", "which", "city", "Paris", "river", "model", "kernel",
         "token", "server", "light", "blue", "north", "stone", "water", "market", "garden", "music", "paper",
         "window", "winter", "summer", "forest", "valley", "bridge", "number", "answer", "reason", "simple",
         "quiet", "early", "later", "small", "large", "first", "second", "third", "one", "two", "three", "new",
         "old", "good", "great", "little", ".", ",")
GARBAGE = "#%&*+<>?@^~|zqxjkvw"


# ----------------------------------------------------------------------------------------------- logging

_log_lock = threading.Lock()


def _stamp():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def emit(line):
    with _log_lock:
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):  # stdout gone (journald restarted, a reader closed the pipe): keep serving
            pass


def log(message, prefix=""):
    """sglang's format (utils/common.py configure_logger): [%(asctime)s{prefix}] %(message)s."""
    emit("[%s%s] %s" % (_stamp(), prefix, message))


def ulog(message, level="INFO"):
    """uvicorn's format as sglang configures it: [%(asctime)s] %(levelprefix)s %(message)s (no colours: not a tty)."""
    emit("[%s] %s %s" % (_stamp(), level + ":" + " " * (8 - len(level)), message))


def standin_note(message):
    log("sglang STAND-IN: " + message)


def die(code, message=None):
    if message:
        emit(message)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ------------------------------------------------------------------------------------------------ config

class ConfigError(Exception):
    pass


def load_config():
    path = os.environ.get(CONFIG_ENV) or CONFIG_DEFAULT_PATH
    cfg = dict(CONFIG_DEFAULTS)
    if not os.path.exists(path):
        return cfg, path, False
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError("cannot read %s: %s" % (path, exc))
    if not isinstance(data, dict):
        raise ConfigError("%s must hold a JSON object" % path)
    unknown = sorted(set(data) - set(CONFIG_DEFAULTS))
    if unknown:
        raise ConfigError("%s: unknown key(s) %s; known: %s" % (path, ", ".join(unknown), ", ".join(CONFIG_DEFAULTS)))
    cfg.update(data)
    number = (int, float)
    for key in ("startup_delay_s", "tokens_per_s", "accept_length", "noise_pct", "health_check_s", "error_pct"):
        if isinstance(cfg[key], bool) or not isinstance(cfg[key], number) or cfg[key] < 0:
            raise ConfigError("%s: %s must be a number >= 0, not %r" % (path, key, cfg[key]))
    if cfg["tokens_per_s"] <= 0:
        raise ConfigError("%s: tokens_per_s must be > 0" % path)
    if cfg["plain_tokens_per_s"] is not None and (isinstance(cfg["plain_tokens_per_s"], bool)
                                                  or not isinstance(cfg["plain_tokens_per_s"], number)
                                                  or cfg["plain_tokens_per_s"] <= 0):
        raise ConfigError("%s: plain_tokens_per_s must be null or a number > 0" % path)
    if cfg["error_pct"] > 100:
        raise ConfigError("%s: error_pct must be <= 100" % path)
    if cfg["accept_length"] < 1:
        raise ConfigError("%s: accept_length must be >= 1 (it counts the bonus token)" % path)
    if cfg["noise_pct"] >= 100:
        raise ConfigError("%s: noise_pct must be < 100" % path)
    for key in ("never_healthy", "wrong_output", "access_log"):
        if not isinstance(cfg[key], bool):
            raise ConfigError("%s: %s must be true or false, not %r" % (path, key, cfg[key]))
    if cfg["crash_after_s"] is not None and (isinstance(cfg["crash_after_s"], bool)
                                             or not isinstance(cfg["crash_after_s"], number)
                                             or cfg["crash_after_s"] < 0):
        raise ConfigError("%s: crash_after_s must be null or a number >= 0" % path)
    for key in ("exit_on_start", "seed", "hidden_dim"):
        if cfg[key] is not None and (isinstance(cfg[key], bool) or not isinstance(cfg[key], int)):
            raise ConfigError("%s: %s must be null or an integer, not %r" % (path, key, cfg[key]))
    if cfg["seed"] is None:
        cfg["seed"] = 0
    if cfg["fusion_log"] is not None and cfg["fusion_log"] not in FUSION_VARIANTS:
        raise ConfigError("%s: fusion_log must be one of %s" % (path, ", ".join(FUSION_VARIANTS)))
    if cfg["fusion_error"] is not None and not isinstance(cfg["fusion_error"], str):
        raise ConfigError("%s: fusion_error must be null or a string" % path)
    if not isinstance(cfg["greedy_ties"], list) or any(isinstance(p, bool) or not isinstance(p, int) or p < 0
                                                       for p in cfg["greedy_ties"]):
        raise ConfigError("%s: greedy_ties must be a list of output positions (integers >= 0)" % path)
    if cfg["tie_break"] not in TIE_BREAKS:
        raise ConfigError("%s: tie_break must be one of %s" % (path, ", ".join(TIE_BREAKS)))
    check_allreduce_paths(path, cfg["allreduce_paths"])
    return cfg, path, True


def check_allreduce_paths(path, paths):
    """allreduce_paths: {path: {tokens_per_s: > 0, wrong_output: bool}} for the paths of docs/allreduce-paths.md."""
    if not isinstance(paths, dict):
        raise ConfigError("%s: allreduce_paths must be an object of path: {...}" % path)
    for name, override in paths.items():
        if name not in ALLREDUCE_PATHS:
            raise ConfigError("%s: allreduce_paths: unknown path %r; known: %s" % (path, name, ", ".join(ALLREDUCE_PATHS)))
        if not isinstance(override, dict) or set(override) - set(ALLREDUCE_PATH_KEYS):
            raise ConfigError("%s: allreduce_paths.%s must be an object with only %s"
                              % (path, name, ", ".join(ALLREDUCE_PATH_KEYS)))
        rate = override.get("tokens_per_s", 1)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            raise ConfigError("%s: allreduce_paths.%s.tokens_per_s must be a number > 0" % (path, name))
        if not isinstance(override.get("wrong_output", False), bool):
            raise ConfigError("%s: allreduce_paths.%s.wrong_output must be true or false" % (path, name))
        if override.get("tie_break", "first") not in TIE_BREAKS:
            raise ConfigError("%s: allreduce_paths.%s.tie_break must be one of %s" % (path, name, ", ".join(TIE_BREAKS)))


# ------------------------------------------------------------------------------------------- server flags

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


def _site_packages():
    """The running interpreter's site-packages, the one holding sglang when there is one."""
    candidates = []
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key) and paths[key] not in candidates:
            candidates.append(paths[key])
    for entry in sys.path:
        if entry.endswith("site-packages") and entry not in candidates:
            candidates.append(entry)
    for path in candidates:
        if os.path.isdir(os.path.join(path, "sglang")):
            return path
    return candidates[0] if candidates else None


def _pkg_versions_shim():
    """The two functions of module_utils/pkg_versions.py that sglang_cli_args uses, for a directory without it."""
    import glob  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel

    def normalize_name(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    def installed_versions(site_packages):
        versions = {}
        for meta in glob.glob(os.path.join(site_packages, "*.dist-info", "METADATA")):
            fields = {}
            with open(meta, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    fields.setdefault(key, value.strip())
            if fields.get("Name") and fields.get("Version"):
                versions.setdefault(normalize_name(fields["Name"]), []).append(fields["Version"])
        return versions

    def find_distribution(versions, name):
        found = versions.get(normalize_name(name)) or []
        return found[-1] if found else None

    shim = types.ModuleType("ansible.module_utils.pkg_versions")
    shim.normalize_name, shim.installed_versions, shim.find_distribution = (normalize_name, installed_versions,
                                                                             find_distribution)
    return shim


def _cli_args_module():
    """sglang_cli_args from $SGLANG_STANDIN_CLI_ARGS, or (None, why not).

    It imports its sibling as ``ansible.module_utils.pkg_versions`` (it is an Ansible module_utils file); the
    deployed venv has no Ansible, so the directory is put on that package's path, or a stand-in package is made,
    and a minimal pkg_versions is supplied when the directory has none.
    """
    import importlib  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    directory = os.environ.get(CLI_ARGS_ENV)
    if not directory:
        return None, "$%s is not set" % CLI_ARGS_ENV
    if not os.path.isfile(os.path.join(directory, "sglang_cli_args.py")):
        return None, "no sglang_cli_args.py in %s ($%s)" % (directory, CLI_ARGS_ENV)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        try:
            package = importlib.import_module("ansible.module_utils")
        except ImportError:
            ansible = sys.modules.setdefault("ansible", types.ModuleType("ansible"))
            if not hasattr(ansible, "__path__"):
                ansible.__path__ = []
            package = types.ModuleType("ansible.module_utils")
            package.__path__ = []
            sys.modules["ansible.module_utils"] = package
            ansible.module_utils = package
        if directory not in package.__path__:
            package.__path__.append(directory)
        try:
            importlib.import_module("ansible.module_utils.pkg_versions")
        except ImportError:
            sys.modules["ansible.module_utils.pkg_versions"] = _pkg_versions_shim()
            package.pkg_versions = sys.modules["ansible.module_utils.pkg_versions"]
        module = importlib.import_module("sglang_cli_args")
    except Exception as exc:  # pylint: disable=broad-except  (a helper that fails must not stop the lab)
        return None, "cannot import sglang_cli_args from %s (%s: %s)" % (directory, type(exc).__name__, exc)
    if not (hasattr(module, "known_flags") and hasattr(module, "check_argv")):
        return None, "%s/sglang_cli_args.py has no known_flags/check_argv" % directory
    return module, None


def _usage_error(message):
    sys.stderr.write("usage: %s [-h] --model-path MODEL_PATH [options]   (%s)\n%s: error: %s\n"
                     % (PROG, STANDIN, PROG, message))
    sys.stderr.flush()
    sys.exit(2)


def _check_with_sglang(module, argv):
    """(flags, errors, parsed) from SGLang's own definitions in this interpreter's site-packages, or a reason."""
    site = _site_packages()
    try:
        flags = module.known_flags(site)
    except Exception as exc:  # pylint: disable=broad-except  (no sglang here, or a layout it does not know)
        return None, "sglang_cli_args.known_flags(%s) failed (%s: %s)" % (site, type(exc).__name__, exc)
    try:
        errors, parsed = module.check_argv(flags, list(argv), allow_abbrev=True)  # argparse's default, as the CLI
    except TypeError:
        errors, parsed = module.check_argv(flags, list(argv))
    version = getattr(flags, "version", None) or "?"
    return (flags, errors, parsed), "SGLang %s's own flag definitions (sglang_cli_args, %d flags, %s)" % (
        version, len(flags), site)


# dests of SGLang <= 0.5.9's add_argument("--tensor-parallel-size", "--tp-size", ...) style -> the field names
OLD_DESTS = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
             "data_parallel_size": "dp_size", "cuda_graph_max_bs": "cuda_graph_max_bs_decode"}


def _read_yaml_mapping(path):
    """The top-level mapping of a YAML options file: PyYAML when the venv has it (SGLang needs it), else the
    subset the sglang_server role writes (``key: "JSON string"``, ``key: scalar``, ``key: true``)."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        import yaml  # pylint: disable=import-outside-toplevel
        data = yaml.safe_load(text)
    except ImportError:
        data = {}
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, _, raw = line.partition(":")
            raw = raw.strip()
            value = json.loads(raw) if raw.startswith('"') else {"true": True, "false": False}.get(raw, raw)
            data[key.strip()] = value
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    return data


def merge_config(argv):
    """``--config FILE`` as sglang 0.5.21's ConfigArgumentMerger does it: the file's options first, then the
    command line (which wins). The merged list stays in memory: the process arguments show only the path."""
    if "--config" not in argv:
        return argv
    index = argv.index("--config")
    if index == len(argv) - 1:
        _usage_error("No config file specified after --config flag!")
    path = argv[index + 1]
    if not path.endswith((".yaml", ".yml")) or not os.path.exists(path):
        _usage_error("Config file must be YAML format and exist, got: %s" % path)
    merged = []
    for key, value in _read_yaml_mapping(path).items():
        if isinstance(value, bool):
            merged += ["--%s" % key] if value else []
        elif isinstance(value, list):
            merged += ["--%s" % key] + [str(item) for item in value] if value else []
        else:
            merged += ["--%s" % key, str(value)]
    return merged + argv[:index] + argv[index + 2:]


def parse_flags(argv):
    """(namespace, extra {dest: value} the stand-in has no flag for, how the flags were checked)."""
    parser = build_parser()
    if "-h" in argv or "--help" in argv:
        parser.parse_args(["--help"])  # prints the stand-in's help, exits 0
    module, why_not = _cli_args_module()
    if module is not None:
        result, how = _check_with_sglang(module, argv)
        if result is not None:
            _flags, errors, parsed = result
            if errors:
                _usage_error("; ".join(str(e) for e in ([errors] if isinstance(errors, str) else errors)))
            # SGLang's definitions decide; the stand-in's parser only supplies defaults and types.
            model = parsed.get("model_path")
            namespace = parser.parse_args(["--model-path", str(model)])
            actions = {action.dest: action for action in parser._actions}  # pylint: disable=protected-access
            extra = {}
            for dest, value in parsed.items():
                dest = OLD_DESTS.get(dest, dest)
                if dest not in actions:
                    extra[dest] = value
                    continue
                kind = actions[dest].type
                if kind in (int, float) and value is not None and not isinstance(value, (list, bool)):
                    value = kind(value)
                setattr(namespace, dest, value)
            return namespace, extra, how
        why_not = how
    namespace = parser.parse_args(argv)  # unknown or ambiguous flags: exit 2 with argparse's message
    return namespace, {}, "the stand-in's own list of sglang 0.5.21 flags (%s)" % why_not


# ------------------------------------------------------------------------------------------------- model

def read_model_config(model_path):
    """config.json of a local model directory, when there is one (the lab has no weights; it is optional)."""
    path = os.path.join(model_path, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _from_config(hf, key):
    if key in hf:
        return hf[key]
    text = hf.get("text_config")
    return text.get(key) if isinstance(text, dict) else None


def noisy_rate(rate, noise_pct, draw):
    """rate moved by draw (in [-1, 1]) times noise_pct %: within +-noise_pct % of rate."""
    return rate * (1.0 + draw * noise_pct / 100.0)


def step_deadlines(sizes, rate):
    """The pacing of one request: for each forward step of `sizes` tokens, (tokens done after it, seconds after the
    first step when it is sent): done / rate. The pauses aim at these deadlines, not at a step's length, so a late
    step is made up by the next pause and a request of n tokens takes n / rate whatever its step sizes."""
    plan, done = [], 0
    for size in sizes:
        done += size
        plan.append((done, done / rate))
    return plan


class Server(object):
    """Everything the HTTP handler and the timers share."""

    def __init__(self, args, extra, cfg, argv):
        self.args = args
        self.cfg = cfg
        self.argv = argv
        self.lock = threading.Lock()
        self.rng = random.Random(cfg["seed"])
        # the clock and the sleep that pace generations and the health check (tests replace them)
        self.clock, self.sleep = time.monotonic, time.sleep
        self.started_at = time.time()
        self.ready = False
        self.startup_time = None
        self.warmup_token = uuid.uuid4().hex
        self.hf = read_model_config(args.model_path)
        self.context_len = args.context_length or _from_config(self.hf, "max_position_embeddings") or 262144
        self.hidden_dim = cfg["hidden_dim"] or _from_config(self.hf, "hidden_size") or 7168
        self.architecture = (self.hf.get("architectures") or ["DeepseekV3ForCausalLM"])[0]
        self.served_model_name = args.served_model_name or args.model_path
        self.tokenizer_path = args.tokenizer_path or args.model_path
        self.speculative = bool(args.speculative_algorithm)
        self.spec = self._resolve_speculative()
        self.fusion_backend = args.flashinfer_allreduce_fusion_backend
        if args.enable_flashinfer_allreduce_fusion and self.fusion_backend is None:
            self.fusion_backend = "auto"  # serving_hook._handle_deprecated_args
        if args.enforce_disable_flashinfer_allreduce_fusion:
            self.fusion_backend = None
        # What the path the server runs changes (allreduce_paths), applied over the rest of the configuration.
        self.allreduce_path = allreduce_path(self, os.environ)
        self.cfg = dict(cfg, **cfg["allreduce_paths"].get(self.allreduce_path, {}))
        self.max_total_num_tokens = 1000000
        self.max_running_requests = args.max_running_requests or 2048
        self.generate_calls = 0
        self.stats = {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0, "spec_forward_ct": 0,
                      "spec_accept_tokens": 0, "last_gen_throughput": 0.0, "running": 0,
                      "by_streaming": {}}  # the tokenizer's counters, per is_streaming label ("true"/"false")
        self.server_args = self._server_args(extra)

    def _resolve_speculative(self):
        a = self.args
        steps, topk, draft = a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens
        if self.speculative and steps is None and topk is None and draft is None:
            steps, topk, draft = 3, 1, 4  # what SGLang picks for DeepSeek-like MoE models
        if self.speculative:
            steps = 3 if steps is None else steps
            topk = 1 if topk is None else topk
            draft = (steps + 1 if topk == 1 else 4) if draft is None else draft
        return {"speculative_num_steps": steps, "speculative_eagle_topk": topk, "speculative_num_draft_tokens": draft}

    def _server_args(self, extra):
        d = dict(extra)
        d.update(vars(self.args))
        d.update(self.spec)
        d.update({
            "tokenizer_path": self.tokenizer_path,
            "served_model_name": self.served_model_name,
            "context_length": self.args.context_length,
            "flashinfer_allreduce_fusion_backend": self.fusion_backend,
            "enable_flashinfer_allreduce_fusion": False,  # resolved away by _handle_deprecated_args
            "cuda_graph_max_bs_decode": self.args.cuda_graph_max_bs_decode,
        })
        d.pop("config", None)
        return d

    # ---- sglang version, tokens, output

    def sglang_version(self):
        try:
            import importlib.metadata as metadata  # pylint: disable=import-outside-toplevel
            return metadata.version("sglang")
        except Exception:  # no sglang in this interpreter (unit tests)
            return "0.0.0+standin"

    @staticmethod
    def count_prompt_tokens(prompt):
        if isinstance(prompt, list):
            return max(1, len(prompt))
        return max(1, len(re.findall(r"\w+|[^\w\s]", prompt or "")))

    def make_tokens(self, prompt_key, n, temperature, seed):
        """n (token_id, text) pairs and each one's top two [(token_id, logprob), ...]. Greedy (temperature 0, or an
        explicit seed) is a function of the prompt; at a greedy tie (greedy_ties) both tokens have one logprob and
        tie_break picks the one taken, from which the rest of the completion follows."""
        wrong = self.cfg["wrong_output"]

        def seeded(tag):
            digest = hashlib.sha256(("%s|%s|%s%s" % ("wrong" if wrong else "right",
                                                     "" if temperature == 0 else seed, prompt_key, tag)).encode())
            return random.Random(digest.digest())
        if temperature == 0 or seed is not None:
            rng = seeded("")
        else:
            with self.lock:
                rng = random.Random(self.rng.random())
        ties = set(self.cfg["greedy_ties"]) if temperature == 0 and not wrong else set()
        tokens, top = [], []
        for position in range(n):
            if wrong:
                text = " " + "".join(rng.choice(GARBAGE) for _ in range(rng.randint(2, 5)))
                token_id = 100000 + rng.randrange(50000)
                tokens.append((token_id, text))
                top.append([(token_id, -1.5), (token_id + 1, -2.25)])
                continue
            index = rng.randrange(len(WORDS))
            other = (index + 7) % len(WORDS)  # the runner-up, and its logprob, follow from the token (no draw)
            best = -0.25 - 0.125 * (index % 8)
            top.append([(1000 + index, best), (1000 + other, best if position in ties else best - 0.5)])
            if position in ties and self.cfg["tie_break"] == "second":
                index, rng = other, seeded("|tie at %d" % position)
            word = WORDS[index]
            tokens.append((1000 + index, word if word in ".," else " " + word))
        return tokens, top

    def speed(self):
        """One request's rate: tokens_per_s (plain_tokens_per_s without speculation), with its noise drawn."""
        rate = float(self.cfg["tokens_per_s"])
        if not self.speculative and self.cfg["plain_tokens_per_s"] is not None:
            rate = float(self.cfg["plain_tokens_per_s"])
        if self.cfg["noise_pct"]:
            with self.lock:
                draw = self.rng.uniform(-1.0, 1.0)
            rate = noisy_rate(rate, self.cfg["noise_pct"], draw)
        return rate

    def injected_failure(self):
        """True for error_pct % of /generate calls, spread evenly: call k fails when floor(k*pct/100) steps up."""
        pct = float(self.cfg["error_pct"])
        with self.lock:
            self.generate_calls += 1
            k = self.generate_calls
        return pct > 0 and math.floor(k * pct / 100.0 + 1e-9) > math.floor((k - 1) * pct / 100.0 + 1e-9)

    def steps(self, n):
        """Tokens per forward step: 1 without speculation, else accept_length on average (bonus token included)."""
        if not self.speculative:
            return [1] * n
        length, sizes, acc, done = float(self.cfg["accept_length"]), [], 0.0, 0
        while done < n:
            acc += length
            size = max(1, min(int(math.floor(acc + 1e-9)) - done, n - done))
            sizes.append(size)
            done += size
        return sizes


class Generation(object):
    """One request's generation: yields (tokens so far, finished) at the configured rate."""

    def __init__(self, server, prompt, params, rid=None, logprobs=(False, 0)):
        self.server = server
        self.prompt = prompt
        self.prompt_key = json.dumps(prompt) if isinstance(prompt, list) else prompt
        self.prompt_tokens = server.count_prompt_tokens(prompt)
        self.max_new_tokens = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        if self.max_new_tokens is None:
            self.max_new_tokens = DEFAULT_MAX_NEW_TOKENS
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be a non-negative integer, got %r" % (self.max_new_tokens,))
        self.temperature = params.get("temperature", 1.0)
        if self.temperature is None:
            self.temperature = 1.0
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or self.temperature < 0:
            raise ValueError("temperature must be a non-negative number, got %r" % (self.temperature,))
        stop = params.get("stop") or []
        self.stop = [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str) and s]
        self.rid = rid or uuid.uuid4().hex
        self.tokens, self.top = server.make_tokens(self.prompt_key, self.max_new_tokens, self.temperature,
                                                   params.get("sampling_seed", params.get("seed")))
        self.return_logprob, self.top_logprobs_num = logprobs
        if not isinstance(self.return_logprob, bool):
            raise ValueError("return_logprob must be true or false, got %r" % (self.return_logprob,))
        if isinstance(self.top_logprobs_num, bool) or not isinstance(self.top_logprobs_num, int) \
                or self.top_logprobs_num < 0:
            raise ValueError("top_logprobs_num must be a non-negative integer, got %r" % (self.top_logprobs_num,))
        self.start = time.time()
        self.rate = server.speed()
        self.text = ""
        self.ids = []
        self.finish_reason = None
        self.verify_ct = 0
        self.streaming = False  # set by the handler of a streamed request (the metrics' is_streaming label)
        self.first_token_at = None
        self.finished_at = None

    def run(self):
        """Generator of the state after each forward step; the last one has finish_reason set."""
        server = self.server
        with server.lock:
            server.stats["running"] += 1
        try:
            if self.max_new_tokens == 0:
                self.finish_reason = {"type": "length", "length": 0}
                yield self
                return
            t0 = server.clock()
            previous = 0
            for done, deadline in step_deadlines(server.steps(self.max_new_tokens), self.rate):
                new = self.tokens[previous:done]
                previous = done
                self.verify_ct += 1
                pause = t0 + deadline - server.clock()
                if pause > 0:
                    server.sleep(pause)
                if self.first_token_at is None:
                    self.first_token_at = time.time()
                for token_id, piece in new:
                    self.ids.append(token_id)
                    self.text += piece
                    for stop in self.stop:
                        cut = self.text.find(stop)
                        if cut >= 0:
                            self.text = self.text[:cut]
                            self.finish_reason = {"type": "stop", "matched": stop}
                            break
                    if self.finish_reason:
                        break
                if self.finish_reason is None and done >= self.max_new_tokens:
                    self.finish_reason = {"type": "length", "length": self.max_new_tokens}
                yield self
                if self.finish_reason:
                    return
        finally:
            with server.lock:
                server.stats["running"] -= 1
            if self.finish_reason:
                self._account()

    def _account(self):
        server = self.server
        self.finished_at = time.time()
        elapsed = max(self.finished_at - self.start, 1e-9)
        with server.lock:
            stats = server.stats
            stats["requests"] += 1
            stats["prompt_tokens"] += self.prompt_tokens
            stats["generation_tokens"] += len(self.ids)
            mine = stats["by_streaming"].setdefault("true" if self.streaming else "false",
                                                    {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0})
            mine["requests"] += 1
            mine["prompt_tokens"] += self.prompt_tokens
            mine["generation_tokens"] += len(self.ids)
            if server.speculative and self.verify_ct:
                stats["spec_forward_ct"] += self.verify_ct
                stats["spec_accept_tokens"] += len(self.ids)
            stats["last_gen_throughput"] = len(self.ids) / elapsed
        if self.ids:
            self._decode_log(elapsed)

    def _decode_log(self, elapsed):
        """scheduler_components/metrics_reporter.py's decode line, once per request here (not every 40 steps)."""
        server = self.server
        msg = "Decode batch, #running-req: 1, #token: %d, token usage: 0.00, " % (self.prompt_tokens + len(self.ids))
        if server.speculative:
            length = len(self.ids) / float(self.verify_ct)
            per_round = (server.spec["speculative_num_draft_tokens"] or 1) - 1
            rate = (length - 1) / per_round if per_round > 0 else 0.0
            msg += "accept len: %.2f, accept rate: %.2f, " % (length, rate)
        msg += "cuda graph: True, gen throughput (token/s): %.2f, #queue-req: 0" % (len(self.ids) / elapsed)
        log(msg, tp_prefix(server, 0))

    def meta_info(self, final):
        server = self.server
        meta = {
            "id": self.rid,
            "finish_reason": self.finish_reason if final else None,
            "prompt_tokens": self.prompt_tokens,
            "weight_version": server.args.weight_version,
            "num_retractions": 0,
        }
        timed = server.args.enable_metrics  # request time stats are kept only with metrics on (req_time_stats.py)
        if timed:
            meta.update({"forward_entry_time": self.start, "prefill_finished_time": self.first_token_at or self.start,
                         "queue_time": 0.0})
        meta.update({
            "reasoning_tokens": 0,
            "completion_tokens": len(self.ids),
            "cached_tokens": 0,
            "cached_tokens_details": None,  # as the real 0.5.17 server sends (tests/fixtures/device/)
            "dp_rank": None,
        })
        if final:
            meta["e2e_latency"] = time.time() - self.start
            if server.speculative and self.verify_ct > 0:
                proposed = self.verify_ct * ((server.spec["speculative_num_draft_tokens"] or 1) - 1)
                correct = len(self.ids) - self.verify_ct
                if proposed > 0:
                    meta["spec_accept_rate"] = correct / float(proposed)
                    meta["spec_accept_length"] = len(self.ids) / float(self.verify_ct)
                    meta["spec_num_correct_drafts"] = correct
                    meta["spec_num_proposed_drafts"] = proposed
                    meta["spec_verify_ct"] = self.verify_ct
                    meta["spec_accepted_drafts"] = correct
                    meta["spec_proposed_drafts"] = proposed
            if timed:
                meta.update(self.time_stats())
            meta["response_sent_to_client_ts"] = time.time()
        if self.return_logprob:
            meta.update(self.logprobs())
        return meta

    def time_stats(self):
        """What 0.5.21's ReqTimeStats.convert_to_output_meta_info adds to a finished request's meta_info."""
        finished = self.finished_at or time.time()
        out = {"request_received_ts": self.start}
        if self.first_token_at is not None and self.first_token_at > self.start:
            out["first_token_latency"] = self.first_token_at - self.start
        out.update(api_server_dispatch_finish_ts=self.start, request_finished_ts=finished)
        decode = finished - (self.first_token_at or finished)
        if decode > 0 and len(self.ids) > 1:
            out["decode_throughput"] = (len(self.ids) - 1) / decode
        return out

    def logprobs(self):
        """tokenizer_manager.add_logprob_to_meta_info(): (logprob, token id, text) entries, text None unless asked
        for; no input side without logprob_start_len (empty lists, as the real 0.5.17 server answered)."""
        chosen = [[dict(pairs)[token_id], token_id, None] for (token_id, _text), pairs in zip(self.tokens, self.top)]
        out = {"input_token_logprobs": [], "output_token_logprobs": chosen[:len(self.ids)],
               "output_token_logprobs_length": len(self.ids)}
        if self.top_logprobs_num > 0:
            out["input_top_logprobs"] = []
            out["output_top_logprobs"] = [[[logprob, token_id, None] for token_id, logprob in pairs][
                :self.top_logprobs_num] for pairs in self.top[:len(self.ids)]]
        return out

    def out(self, final):
        return {"text": self.text, "output_ids": list(self.ids), "meta_info": self.meta_info(final)}


def allreduce_path(server, environ):
    """The all-reduce path this start runs: fusion when its workspace came up (a fusion flag, TP > 1, the 'enabled'
    variant), PCIe IPC when SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is true at a world size it supports. The stand-in does
    not model FlashInfer < 0.7.0 (where SGLang falls back to NCCL): the lab's candidates never include pcie_ipc."""
    fusion = server.fusion_backend is not None and server.args.tp_size > 1 and fusion_variant(server) == "enabled"
    ipc = (environ.get(PCIE_SWITCH, "").strip().lower() in ("1", "true", "yes", "y", "on")
           and server.args.tp_size in PCIE_WORLD_SIZES)
    return "+".join(name for name, on in (("fusion", fusion), ("pcie_ipc", ipc)) if on) or "nccl"


def tp_prefix(server, rank):
    """scheduler.py's logger prefix: ' TP{rank}' only when tp_size > 1 (no DP/PP/EP here)."""
    return " TP%d" % rank if server.args.tp_size > 1 else ""


# ---------------------------------------------------------------------------------------------- start-up

def local_ranks(args):
    per_node = max(1, args.tp_size // max(1, args.nnodes))
    first = args.node_rank * per_node
    return list(range(first, first + per_node))


def fusion_variant(server):
    wanted = server.cfg["fusion_log"]
    if server.fusion_backend is None:
        return "none" if wanted is None else wanted
    return "enabled" if wanted is None else wanted


def fusion_backend_error(server):
    """flashinfer_comm_fusion._resolve_backend() on an SM120 host whose G2 gate admits it (the patched lab)."""
    backend, multi_node = server.fusion_backend, server.args.nnodes > 1
    if backend == "cutedsl":
        return "FlashInfer allreduce fusion cutedsl backend requires a Blackwell system."
    if backend == "auto" and multi_node:
        return "FlashInfer allreduce fusion does not support multi-node on non-Blackwell systems."
    if backend == "trtllm" and multi_node:
        return "FlashInfer allreduce fusion trtllm backend supports single-node only."
    if backend == "mnnvl":
        return "FlashInfer allreduce fusion mnnvl backend requires a Blackwell system, or SM90 single-node."
    return None


def scheduler_crash(server, rank, exc_type, message, frames):
    """scheduler.py run_scheduler_process: 'Scheduler hit an exception: <traceback>', then SIGQUIT to the parent."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append('  File "%s", line %d, in %s' % (path, line, func))
        lines.append("    " + code)
    lines.append("%s: %s" % (exc_type, message))
    log("Scheduler hit an exception: " + "\n".join(lines) + "\n", tp_prefix(server, rank))
    if server.ready:  # the tokenizer manager's running-phase handler
        log("SIGQUIT received. signum=%d, frame=None. It usually means one child failed." % signal.SIGQUIT)
    else:  # engine.py's launch-phase handler
        log("Received sigquit from a child process. It usually means the child failed.")


def print_fusion_lines(server, variant):
    """The lines SGLang 0.5.21 prints while pre-initializing the fusion workspaces (flashinfer_comm_fusion.py)."""
    args = server.args
    if variant == "none" or args.tp_size <= 1:
        return True  # world_size <= 1: ensure_workspace_initialized() returns before logging anything
    backend = "trtllm" if server.fusion_backend in (None, "auto") else server.fusion_backend
    error = server.cfg["fusion_error"] or FUSION_ERROR_DEFAULTS.get(variant, "")
    site = "/opt/sglang/current/lib/python3/site-packages/sglang/srt/layers/flashinfer_comm_fusion.py"
    if variant == "refused" or fusion_backend_error(server):
        message = fusion_backend_error(server) or "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."
        scheduler_crash(server, local_ranks(args)[0], "ValueError", message, [
            (site, 97, "resolve_flashinfer_allreduce_fusion_backend",
             "return _resolve_backend(backend, get_parallel().nnodes > 1)"),
            (site, 47, "_resolve_backend", "raise ValueError(")])
        return False
    for rank in local_ranks(args):
        prefix = tp_prefix(server, rank)
        if variant == "enabled":
            for _workspace in ("moe", "attn"):  # pre_initialize_workspaces(): one manager per group, each logs once
                log("FlashInfer AllReduce Fusion enabled and workspace initialized: "
                    "backend=%s, rank=%d, world_size=%d, max_token_num=%d, hidden_dim=%d"
                    % (backend, rank, args.tp_size, FUSE_ALLREDUCE_MAX_BATCH_SIZE, server.hidden_dim), prefix)
        elif variant == "skipped":
            log("FlashInfer workspace preflight probe failed (%s). Skipping allreduce fusion." % error, prefix)
            log("FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank. Skipping "
                "allreduce fusion to avoid cross-rank desync inside the flashinfer collective.", prefix)
        elif variant == "disabled":
            log("Failed to initialize FlashInfer workspace (backend=%s): %s. Disabling flashinfer allreduce "
                "fusion permanently." % (backend, error), prefix)
    return True


def print_startup(server, checked_with, config_path, config_found):
    args, cfg = server.args, server.cfg
    standin_note("this is a stand-in for sglang.launch_server (sglang-sm120-deploy lab), NOT SGLang: no model is "
                 "loaded, no GPU is used, completions are made up. Flags checked with %s; behaviour from %s%s."
                 % (checked_with, config_path, "" if config_found else " (absent: defaults)"))
    if cfg["allreduce_paths"]:
        standin_note("all-reduce path %s (allreduce_paths%s): tokens_per_s=%s, wrong_output=%s"
                     % (server.allreduce_path, "" if server.allreduce_path in cfg["allreduce_paths"] else
                        " names no override for it", cfg["tokens_per_s"], str(cfg["wrong_output"]).lower()))
    if args.enable_flashinfer_allreduce_fusion and args.flashinfer_allreduce_fusion_backend is None:
        log("--enable-flashinfer-allreduce-fusion is deprecated. "
            "Please use --flashinfer-allreduce-fusion-backend=auto instead.")
    log("server_args=%s" % (server.server_args,))
    for rank in local_ranks(args):
        log("Load weight begin. avail mem=%.2f GB" % 94.41, tp_prefix(server, rank))
    if cfg["exit_on_start"] is not None:
        code = cfg["exit_on_start"]
        scheduler_crash(server, local_ranks(args)[0], "RuntimeError",
                        "sglang STAND-IN: exit_on_start=%d (simulated failure while loading the model)" % code,
                        [("sglang/srt/model_executor/model_runner.py", 1190, "load_model",
                          "self.model = self.loader.load_model(...)")])
        die(code)
    for rank in local_ranks(args):
        prefix = tp_prefix(server, rank)
        log("Load weight end. elapsed=%.2f s, type=%s, avail mem=%.2f GB, mem usage=%.2f GB."
            % (0.01, server.architecture, 21.35, 73.06), prefix)
        log("Memory pool end. avail mem=%.2f GB" % 9.12, prefix)
    if not print_fusion_lines(server, fusion_variant(server)):
        die(1)
    for rank in local_ranks(args):
        capture = "target verify" if server.speculative else "target decode"
        log("Capture %s CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB."
            % (capture, 0.01, 1.25, 7.87), tp_prefix(server, rank))
    if 0 in local_ranks(args):
        log("max_total_num_tokens=%d, chunked_prefill_size=%s, max_prefill_tokens=%d, max_running_requests=%d, "
            "context_len=%d, available_gpu_mem=%.2f GB"
            % (server.max_total_num_tokens, args.chunked_prefill_size or 8192, 16384, server.max_running_requests,
               server.context_len, 7.87), tp_prefix(server, 0))


# --------------------------------------------------------------------------------------------------- HTTP

# The real server's answer to a chat request when the tokenizer has no chat template (recorded from 0.5.17).
NO_CHAT_TEMPLATE = ("Cannot use chat template functions because tokenizer.chat_template is not set and no template "
                    "argument was passed! For information about writing templates and setting the "
                    "tokenizer.chat_template attribute, please see the documentation at "
                    "https://huggingface.co/docs/transformers/main/en/chat_templating")


def has_chat_template(model_path):
    """False only when the model directory's tokenizer_config.json is there and names no chat template."""
    config = os.path.join(model_path, "tokenizer_config.json")
    if not os.path.exists(config) or os.path.exists(os.path.join(model_path, "chat_template.jinja")):
        return True
    try:
        with open(config, encoding="utf-8") as handle:
            return bool(json.load(handle).get("chat_template"))
    except (OSError, ValueError):
        return True


def error_response(message, status=400):
    """ErrorResponse of the OpenAI-compatible layer (validation failures)."""
    return status, {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": status}


def prometheus_float(value):
    """A sample value as prometheus_client writes it (floatToGoString): repr of the float, Go's exponent form for
    large positive values."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        return "%se+%02d" % (("%s.%s%s" % (text[0], text[1:dot], text[dot + 1:])).rstrip("0."), dot - 1)
    return text


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    standin = None  # Server, set in main()

    # ---- plumbing

    def log_message(self, fmt, *args):  # noqa: A003  (BaseHTTPRequestHandler API)
        pass

    def log_request(self, code="-", size="-"):
        if not self.standin.cfg["access_log"]:
            return
        try:
            phrase = self.responses[int(code)][0]
        except (KeyError, ValueError):
            phrase = ""
        host, port = self.client_address[0], self.client_address[1]
        ulog('%s:%s - "%s" %s %s' % (host, port, self.requestline, code, phrase))

    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else (
            body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode("utf-8"))
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _empty(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def _start_stream(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data):
        raw = data.encode("utf-8")
        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
        self.wfile.flush()

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _read_body(self):
        """Read the whole request body first, whatever the answer: on a kept-alive connection an unread body
        would be taken for the next request."""
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        self._raw = self.rfile.read(length) if length > 0 else b""

    def _body(self):
        if not self._raw:
            return {}
        return json.loads(self._raw.decode("utf-8"))

    def _authorized(self, path):
        """utils/auth.py decide_request_auth(): /health*, /ready*, /metrics* are always open; the rest need the key."""
        key = self.standin.args.api_key
        if not key or path.startswith(("/health", "/ready", "/metrics")):
            return True
        header = self.headers.get("authorization") or ""
        parts = header.split(" ", 1)
        return len(parts) == 2 and parts[0].lower() == "bearer" and parts[1] == key

    def _route(self, method):
        self._read_body()
        path = self.path.split("?", 1)[0]
        if not self._authorized(path):
            return self._send(401, {"error": "Unauthorized"})
        routes = {
            "/health": ("GET",), "/health_generate": ("GET",), "/ready": ("GET",),
            "/server_info": ("GET",), "/get_server_info": ("GET",),
            "/model_info": ("GET",), "/get_model_info": ("GET",), "/v1/models": ("GET",),
            "/generate": ("POST", "PUT"), "/v1/completions": ("POST",), "/v1/chat/completions": ("POST",),
            "/flush_cache": ("GET", "POST"),
        }
        if self.standin.args.enable_metrics:
            routes["/metrics"] = ("GET",)
        if path.startswith("/v1/models/") and method == "GET":
            return self.model_card(path[len("/v1/models/"):])
        if path not in routes:
            return self._send(404, {"detail": "Not Found"})
        if method not in routes[path]:
            return self._send(405, {"detail": "Method Not Allowed"})
        handler = getattr(self, "r_" + path.strip("/").replace("/", "_").replace("v1_", "v1"))
        try:
            return handler()
        except (BrokenPipeError, ConnectionResetError):
            return None

    def do_GET(self):  # noqa: N802
        self._route("GET")

    def do_POST(self):  # noqa: N802
        self._route("POST")

    def do_PUT(self):  # noqa: N802
        self._route("PUT")

    def _warmup_request(self):
        return self.headers.get(WARMUP_HEADER) == self.standin.warmup_token

    # ---- endpoints

    def r_ready(self):
        self._empty(200 if self.standin.ready else 503)

    def r_health(self):
        if not self.standin.ready:
            return self._empty(503)
        self.standin.sleep(self.standin.cfg["health_check_s"])  # the real check waits for a one-token generation, >= 1 s
        return self._empty(200)

    r_health_generate = r_health

    def r_server_info(self):
        server = self.standin
        with server.lock:
            stats = dict(server.stats)
        internal = dict(server.server_args)
        internal.update({"world_size": server.args.tp_size * server.args.pp_size,
                         "last_gen_throughput": stats["last_gen_throughput"],
                         "effective_max_running_requests_per_dp": server.max_running_requests})
        if server.speculative:
            internal["avg_spec_accept_length"] = (
                stats["spec_accept_tokens"] / float(stats["spec_forward_ct"]) if stats["spec_forward_ct"]
                else float(server.cfg["accept_length"]))
        info = dict(server.server_args)
        info.update({
            "launch_command": " ".join(server.argv),
            "status": "ready",
            "max_total_num_tokens": server.max_total_num_tokens,
            "max_req_input_len": server.context_len - 1,
            "startup_time": server.startup_time,
            "internal_states": [internal],
            "version": server.sglang_version(),
            "frontend": "python",
            "kv_events": None,
            "standin": STANDIN,
            "standin_allreduce_path": server.allreduce_path,
        })
        self._send(200, info)

    def r_get_server_info(self):
        log("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
            "Please use '/server_info' instead.")
        self.r_server_info()

    def r_model_info(self):
        server = self.standin
        self._send(200, {
            "model_path": server.args.model_path,
            "served_model_name": server.served_model_name,
            "tokenizer_path": server.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": server.args.weight_version,
            "load_format": server.args.load_format,
            "reasoning_parser": server.args.reasoning_parser,
            "tool_call_parser": server.args.tool_call_parser,
            "disaggregation_mode": "null",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": _from_config(server.hf, "model_type"),
            "architectures": server.hf.get("architectures"),
        })

    def r_get_model_info(self):
        log("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
            "Please use '/model_info' instead.")
        self.r_model_info()

    def _card(self, name):
        return {"id": name, "object": "model", "created": int(self.standin.started_at), "owned_by": "sglang",
                "root": name, "parent": None, "max_model_len": self.standin.context_len}

    def r_v1models(self):
        self._send(200, {"object": "list", "data": [self._card(self.standin.served_model_name)]})

    def model_card(self, name):
        if name != self.standin.served_model_name:
            return self._send(404, {"error": {"message": "The model '%s' does not exist" % name,
                                              "type": "invalid_request_error", "param": "model",
                                              "code": "model_not_found"}})
        return self._send(200, self._card(name))

    def r_flush_cache(self):
        self._send(200, "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
                        "waiting requests, the operation will not be performed.)\n", "text/plain; charset=utf-8")

    def r_metrics(self):
        """The families of SGLang's metrics_collector.py the lab reads, as the real 0.5.17 server exposed them
        (tests/fixtures/device/): the tokenizer's counters per is_streaming, the scheduler's gauges per rank (rank 0
        only: --enable-metrics-for-all-schedulers is not imitated), values as prometheus_client prints them."""
        server = self.standin
        with server.lock:
            stats = dict(server.stats, by_streaming={k: dict(v) for k, v in server.stats["by_streaming"].items()})
        model = 'model_name="%s"' % server.served_model_name.replace("\\", "\\\\").replace('"', '\\"')
        rank = 'engine_type="unified",%s,moe_ep_rank="0",pp_rank="0",tp_rank="0"' % model
        lines = []

        def family(name, kind, text, samples):
            lines.extend(["# HELP sglang:%s %s" % (name, text), "# TYPE sglang:%s %s" % (name, kind)])
            lines.extend("sglang:%s{%s} %s" % (name, labels, prometheus_float(value)) for labels, value in samples)

        for name, field, text in (("prompt_tokens_total", "prompt_tokens", "Number of prefill tokens processed."),
                                  ("generation_tokens_total", "generation_tokens",
                                   "Number of generation tokens processed."),
                                  ("num_requests_total", "requests", "Number of requests processed.")):
            family(name, "counter", text, [('engine_type="unified",is_streaming="%s",%s' % (flag, model), mine[field])
                                           for flag, mine in sorted(stats["by_streaming"].items())])
        family("num_running_reqs", "gauge", "The number of running requests.", [(rank, stats["running"])])
        family("gen_throughput", "gauge", "The generation throughput (token/s).",
               [(rank, stats["last_gen_throughput"])])
        if server.speculative:
            length = (stats["spec_accept_tokens"] / float(stats["spec_forward_ct"]) if stats["spec_forward_ct"]
                      else 0.0)
            family("spec_accept_length", "gauge", "Mean acceptance length of speculative decoding "
                   "(accepted drafts + bonus token per forward).", [(rank, length)])
        self._send(200, "\n".join(lines) + "\n", "text/plain; version=0.0.4; charset=utf-8")

    # ---- generation

    def _not_ready(self):
        if self.standin.ready or self._warmup_request():
            return False
        self._send(503, {"error": {"message": "sglang STAND-IN: the server is still starting"}})
        return True

    def r_generate(self):
        if self._not_ready():
            return None
        try:
            body = self._body()
        except ValueError as exc:
            return self._send(*error_response("JSON decode error: %s" % exc))
        if not isinstance(body, dict):
            return self._send(*error_response("the request body must be a JSON object"))
        if body.get("text") is not None:
            prompts, batch = body["text"], isinstance(body["text"], list)
        elif body.get("input_ids") is not None:
            ids = body["input_ids"]
            batch = bool(ids) and isinstance(ids[0], list)
            prompts = ids
        else:
            return self._send(400, {"error": {"message": "Either text, input_ids or input_embeds should be "
                                                         "provided."}})
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            return self._send(400, {"error": {"message": "sampling_params must be an object"}})
        if not self._warmup_request() and self.standin.injected_failure():
            return self._send(500, {"error": {"message": "sglang STAND-IN: injected failure (error_pct)"}})
        try:
            gens = [Generation(self.standin, p, params, body.get("rid") if not batch else None,
                               (body.get("return_logprob", False), body.get("top_logprobs_num") or 0))
                    for p in (prompts if batch else [prompts])]
        except ValueError as exc:
            return self._send(400, {"error": {"message": str(exc)}})
        if body.get("stream"):
            if batch:
                return self._send(400, {"error": {"message": "sglang STAND-IN: streaming a batch is not "
                                                             "supported by the stand-in"}})
            gen = gens[0]
            return self._stream(gen, (state.out(state.finish_reason is not None) for state in gen.run()))
        outs = run_batch(gens)
        return self._send(200, outs if batch else outs[0])

    def _openai_body(self):
        media = (self.headers.get("content-type") or "").lower().split(";", 1)[0].strip()
        if media != "application/json":
            self._send(*error_response("1 validation error: Unsupported Media Type: Only 'application/json' is "
                                       "allowed"))
            return None
        try:
            body = self._body()
        except ValueError as exc:
            self._send(*error_response("JSON decode error: %s" % exc))
            return None
        if not isinstance(body, dict):
            self._send(*error_response("the request body must be a JSON object"))
            return None
        return body

    def _stream(self, gen, events):
        """Send `events` (JSON objects made while `gen` runs) as server-sent events, then [DONE]; a client that
        hangs up ends it quietly."""
        gen.streaming = True
        self._start_stream()
        try:
            for event in events:
                self._chunk("data: " + json.dumps(event) + "\n\n")
            self._chunk("data: [DONE]\n\n")
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _include_usage(body):
        return bool((body.get("stream_options") or {}).get("include_usage"))

    @staticmethod
    def _openai_params(body):
        params = {"max_new_tokens": body.get("max_tokens", body.get("max_completion_tokens"))}
        if params["max_new_tokens"] is None:
            params["max_new_tokens"] = OPENAI_DEFAULT_MAX_TOKENS if "messages" not in body else DEFAULT_MAX_NEW_TOKENS
        params["temperature"] = body.get("temperature", 1.0)
        params["stop"] = body.get("stop")
        params["seed"] = body.get("seed")
        return params

    def r_v1completions(self):
        if self._not_ready():
            return None
        body = self._openai_body()
        if body is None:
            return None
        prompt = body.get("prompt")
        if prompt is None:
            return self._send(*error_response("1 validation error for CompletionRequest\nprompt\n  Field required"))
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
            prompts = prompt
        else:
            prompts = [prompt]
        model = body.get("model") or self.standin.served_model_name
        n = body.get("n") or 1
        try:
            gens = [Generation(self.standin, p, self._openai_params(body)) for p in prompts for _ in range(n)]
        except ValueError as exc:
            return self._send(*error_response(str(exc)))
        created = int(time.time())
        if body.get("stream"):
            if len(gens) != 1:
                return self._send(*error_response("sglang STAND-IN: streaming several prompts or n > 1 is not "
                                                  "supported by the stand-in"))
            head = {"id": gens[0].rid, "object": "text_completion", "created": created, "model": model}
            return self._stream(gens[0], completion_events(gens[0], head, self._include_usage(body)))
        outs = run_batch(gens)
        choices = []
        for index, out in enumerate(outs):
            finish = out["meta_info"]["finish_reason"]
            text = out["text"]
            if body.get("echo") and isinstance(gens[index].prompt, str):
                text = gens[index].prompt + text
            choices.append(dict({"index": index, "text": text, "logprobs": None}, **finish_fields(finish)))
        prompt_tokens = sum(g.prompt_tokens for g in gens[::n])
        completion_tokens = sum(len(g.ids) for g in gens)
        return self._send(200, {
            "id": outs[0]["meta_info"]["id"], "object": "text_completion", "created": created, "model": model,
            "choices": choices,
            "usage": openai_usage(prompt_tokens, completion_tokens),
            "metadata": {"weight_version": self.standin.args.weight_version}})

    def r_v1chat_completions(self):
        if self._not_ready():
            return None
        body = self._openai_body()
        if body is None:
            return None
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._send(*error_response("1 validation error for ChatCompletionRequest\nmessages\n  "
                                              "Field required"))
        if not has_chat_template(self.standin.args.model_path):
            status, error = error_response(NO_CHAT_TEMPLATE)
            return self._send(status, dict(error, type="BadRequest"))
        prompt = "\n".join("%s: %s" % (m.get("role"), m.get("content")) for m in messages if isinstance(m, dict))
        model = body.get("model") or self.standin.served_model_name
        try:
            gen = Generation(self.standin, prompt, self._openai_params(body))
        except ValueError as exc:
            return self._send(*error_response(str(exc)))
        created = int(time.time())
        if body.get("stream"):
            head = {"id": gen.rid, "object": "chat.completion.chunk", "created": created, "model": model}
            return self._stream(gen, chat_events(gen, head, self._include_usage(body)))
        out = run_batch([gen])[0]
        finish = out["meta_info"]["finish_reason"]
        return self._send(200, {
            "id": gen.rid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out["text"],
                                                 "reasoning_content": None, "tool_calls": None},
                         "logprobs": None, **finish_fields(finish)}],
            "usage": openai_usage(gen.prompt_tokens, len(gen.ids)),
            "metadata": {"weight_version": self.standin.args.weight_version}})


def openai_usage(prompt_tokens, completion_tokens, streamed=False):
    """An OpenAI-style answer's `usage` (a streamed one's last chunk has no prompt_tokens_details)."""
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
             "completion_tokens": completion_tokens}
    if not streamed:
        usage["prompt_tokens_details"] = None
    usage["reasoning_tokens"] = 0
    return usage


def text_deltas(gen):
    """Run `gen`, yielding the text each step added and the finish reason so far."""
    sent = ""
    for state in gen.run():
        delta, sent = state.text[len(sent):], state.text
        yield delta, state.finish_reason


def finish_fields(finish):
    return {"finish_reason": finish["type"] if finish else None,
            "matched_stop": finish.get("matched") if finish else None}


def usage_event(gen, head, include_usage):
    """The last chunk of a stream whose request set stream_options.include_usage, else nothing."""
    if include_usage:
        yield dict(head, choices=[], usage=openai_usage(gen.prompt_tokens, len(gen.ids), streamed=True))


def completion_events(gen, head, include_usage):
    for delta, finish in text_deltas(gen):
        yield dict(head, choices=[dict({"index": 0, "text": delta, "logprobs": None}, **finish_fields(finish))],
                   usage=None)
    yield from usage_event(gen, head, include_usage)


def chat_events(gen, head, include_usage):
    yield dict(head, choices=[dict({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None},
                                   **finish_fields(None))], usage=None)
    for delta, finish in text_deltas(gen):
        yield dict(head, choices=[dict({"index": 0, "delta": {"content": delta}, "logprobs": None},
                                       **finish_fields(finish))], usage=None)
    yield from usage_event(gen, head, include_usage)


def run_batch(gens):
    """Run generations side by side (a batch takes as long as its longest member) and return their outputs."""
    if len(gens) == 1:
        for _ in gens[0].run():
            pass
        return [gens[0].out(True)]
    threads = [threading.Thread(target=lambda g=g: [None for _ in g.run()]) for g in gens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [g.out(True) for g in gens]


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            return
        ulog("Exception in ASGI application\n" + traceback.format_exc().rstrip(), "ERROR")


class HTTPServer6(HTTPServer):
    address_family = socket.AF_INET6


# ------------------------------------------------------------------------------------------- life cycle

def local_url(server):
    host = server.args.host
    if not host or host == "0.0.0.0":
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = "[%s]" % host
    return "http://%s:%d" % (host, server.args.port)


def warmup(server):
    """http_server._execute_server_warmup(): GET /model_info, then an 8-token greedy /generate, over HTTP."""
    headers = {WARMUP_HEADER: server.warmup_token, "Content-Type": "application/json"}
    if server.args.api_key:
        headers["Authorization"] = "Bearer " + server.args.api_key
    url = local_url(server)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via $http_proxy
    try:
        with opener.open(urllib.request.Request(url + "/model_info", headers=headers), timeout=5) as r:
            json.loads(r.read().decode("utf-8"))
        body = json.dumps({"sampling_params": {"temperature": 0, "max_new_tokens": 8},
                           "text": WARMUP_PROMPT}).encode("utf-8")
        with opener.open(urllib.request.Request(url + "/generate", data=body, headers=headers), timeout=60) as r:
            json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        log("Initialization failed. warmup error: %s" % traceback.format_exc())
        die(1)


def become_ready(server):
    delay = server.cfg["startup_delay_s"]
    time.sleep(delay)
    if server.cfg["never_healthy"]:
        standin_note("never_healthy is set: start-up never completes, health stays 503")
        return
    if not server.args.skip_server_warmup:
        warmup(server)
    server.startup_time = time.time() - server.started_at
    server.ready = True
    log("The server is fired up and ready to roll!")


def crash_later(server, after):
    time.sleep(after)
    scheduler_crash(server, 0, "RuntimeError",
                    "sglang STAND-IN: crash_after_s=%s (simulated crash of a scheduler process)" % (after,),
                    [("sglang/srt/managers/scheduler.py", 6088, "run_scheduler_process",
                      "scheduler.run_event_loop()")])
    die(1)


def on_sigterm(signum, _frame):
    # The handler runs in the main thread between two bytecodes, possibly inside emit() with _log_lock held:
    # logging here would wait on that lock forever. A thread logs once the main thread lets go of it.
    threading.Thread(target=shut_down, args=(signum,), daemon=True).start()


def shut_down(signum):
    log("SIGTERM received. signum=%d frame=None. Draining requests and shutting down..." % signum)
    log("Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].")
    ulog("Shutting down")
    ulog("Waiting for application shutdown.")
    ulog("Application shutdown complete.")
    ulog("Finished server process [%d]" % os.getpid())
    die(0)


def main(argv):
    try:
        cfg, config_path, config_found = load_config()
    except ConfigError as exc:
        sys.stderr.write("sglang STAND-IN: bad config: %s\n" % exc)
        return EX_CONFIG
    args, extra, checked_with = parse_flags(merge_config(list(argv)))
    server = Server(args, extra, cfg, list(argv))  # launch_command: the flags, as prepare_server_args keeps them
    Handler.standin = server
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)
    if cfg["crash_after_s"] is not None:
        threading.Thread(target=crash_later, args=(server, cfg["crash_after_s"]), daemon=True).start()
    print_startup(server, checked_with, config_path, config_found)
    if args.node_rank >= 1:
        # launch_server(): nodes other than 0 run schedulers only, no HTTP server.
        standin_note("node_rank=%d: no HTTP server on this node, as in SGLang; waiting for SIGTERM" % args.node_rank)
        while True:
            time.sleep(3600)
    host = args.host or "0.0.0.0"
    cls = HTTPServer6 if ":" in host else HTTPServer
    try:
        httpd = cls((host, args.port), Handler)
    except OSError as exc:
        ulog("[Errno %s] error while attempting to bind on address %r: %s"
             % (exc.errno, (host, args.port), (exc.strerror or str(exc)).lower()), "ERROR")
        die(1)
    ulog("Started server process [%d]" % os.getpid())
    ulog("Waiting for application startup.")
    ulog("Application startup complete.")
    ulog("Uvicorn running on %s (Press CTRL+C to quit)" % ("http://%s:%d" % (
        "[%s]" % host if ":" in host else host, args.port)))
    threading.Thread(target=become_ready, args=(server,), daemon=True).start()
    httpd.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
