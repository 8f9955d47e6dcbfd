"""The stand-in's behaviour: the JSON file in $SGLANG_STANDIN_CONFIG, its keys, defaults and checks.

A bad file stops the start with EX_CONFIG (78), never 2: 2 stays the answer to bad server flags.
"""
import json
import os

STANDIN = "sglang server STAND-IN (sglang-sm120-deploy lab)"
CONFIG_ENV = "SGLANG_STANDIN_CONFIG"
CONFIG_DEFAULT_PATH = "/etc/sglang-standin/config.json"
EX_CONFIG = 78  # bad stand-in config (sysexits.h EX_CONFIG); 2 stays reserved for bad server flags

CONFIG_DEFAULTS = {
    "startup_delay_s": 2.0,  # /health, /health_generate, /ready answer 503 this long; then warm-up, then ready
    # a first start that compiles (what a real one does with empty Triton and FlashInfer caches): before the delay
    # above, this long writing a kernel a second into $HOME/.triton/cache; a start that finds them there skips it
    "first_start_compile_s": 0.0,
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
FUSION_VARIANTS = ("enabled", "skipped", "disabled", "refused", "none")


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
    for key in ("startup_delay_s", "tokens_per_s", "accept_length", "noise_pct", "health_check_s", "error_pct",
                "first_start_compile_s"):
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

