"""One request's generation: made-up tokens handed on step by step at the configured rate (deadline-paced, so a
benchmark client measures that rate), the meta_info SGLang sends with them, and the counters and the decode log
line a finished request leaves."""
import json
import threading
import time
import uuid

from sglang_standin import speculation, tokens
from sglang_standin.logs import log, tp_prefix

DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams.max_new_tokens


def step_deadlines(sizes, rate):
    """The pacing of one request: for each forward step of `sizes` tokens, (tokens done after it, seconds after the
    first step when it is sent): done / rate. The pauses aim at these deadlines, not at a step's length, so a late
    step is made up by the next pause and a request of n tokens takes n / rate whatever its step sizes."""
    plan, done = [], 0
    for size in sizes:
        done += size
        plan.append((done, done / rate))
    return plan


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
            msg += speculation.decode_accept_text(server.spec, len(self.ids), self.verify_ct)
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
                meta.update(speculation.spec_meta_info(server.spec, len(self.ids), self.verify_ct))
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
        """The logprob fields of the tokens sent so far (tokens.logprob_fields)."""
        return tokens.logprob_fields(self.tokens, self.top, len(self.ids), self.top_logprobs_num)

    def out(self, final):
        return {"text": self.text, "output_ids": list(self.ids), "meta_info": self.meta_info(final)}


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
