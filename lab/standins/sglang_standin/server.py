"""The state one stand-in process shares between its HTTP handler, its generations and its timers: the parsed
flags, the configuration (with the running all-reduce path's overrides), the model directory's config.json and
the counters /server_info and /metrics report."""
import json
import os
import random
import threading
import time
import uuid

from sglang_standin import faults, speculation, tokens
from sglang_standin.allreduce import allreduce_path


def read_model_config(model_path):
    """config.json of a local model directory, when there is one (the lab has no weights; it is optional)."""
    path = os.path.join(model_path, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def model_config_value(hf, key):
    if key in hf:
        return hf[key]
    text = hf.get("text_config")
    return text.get(key) if isinstance(text, dict) else None


def noisy_rate(rate, noise_pct, draw):
    """rate moved by draw (in [-1, 1]) times noise_pct %: within +-noise_pct % of rate."""
    return rate * (1.0 + draw * noise_pct / 100.0)



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
        self.context_len = args.context_length or model_config_value(self.hf, "max_position_embeddings") or 262144
        self.hidden_dim = cfg["hidden_dim"] or model_config_value(self.hf, "hidden_size") or 7168
        self.architecture = (self.hf.get("architectures") or ["DeepseekV3ForCausalLM"])[0]
        self.served_model_name = args.served_model_name or args.model_path
        self.tokenizer_path = args.tokenizer_path or args.model_path
        self.speculative = bool(args.speculative_algorithm)
        self.spec = speculation.resolve_speculative(args)
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
        return tokens.count_prompt_tokens(prompt)

    def make_tokens(self, prompt_key, n, temperature, seed):
        """n (token_id, text) pairs and each one's top two [(token_id, logprob), ...] (tokens.make_tokens)."""
        def fresh_rng():
            with self.lock:
                return random.Random(self.rng.random())
        return tokens.make_tokens(self.cfg, fresh_rng, prompt_key, n, temperature, seed)

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
        """True for error_pct % of /generate calls, spread evenly (faults.fails_at)."""
        with self.lock:
            self.generate_calls += 1
            call = self.generate_calls
        return faults.fails_at(call, self.cfg["error_pct"])

    def steps(self, n):
        """Tokens per forward step (speculation.step_sizes)."""
        return speculation.step_sizes(n, self.speculative, self.cfg["accept_length"])
