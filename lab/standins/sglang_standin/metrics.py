"""GET /metrics (only with --enable-metrics): the sglang:* families the lab reads, in Prometheus' text format."""
import math

from sglang_standin.speculation import average_accept_length

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


def render_metrics(server):
    """The families of SGLang's metrics_collector.py the lab reads, as the real 0.5.17 server exposed them
    (tests/fixtures/device/): the tokenizer's counters per is_streaming, the scheduler's gauges per rank (rank 0
    only: --enable-metrics-for-all-schedulers is not imitated), values as prometheus_client prints them."""
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
    # Every request runs as it arrives (no waiting queue) and no KV cache is imitated: 0, as the idle real server.
    family("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", [(rank, 0)])
    family("token_usage", "gauge", "The token usage.", [(rank, 0)])
    family("gen_throughput", "gauge", "The generation throughput (token/s).",
           [(rank, stats["last_gen_throughput"])])
    if server.speculative:
        family("spec_accept_length", "gauge", "Mean acceptance length of speculative decoding "
               "(accepted drafts + bonus token per forward).", [(rank, average_accept_length(stats, 0.0))])
    return "\n".join(lines) + "\n"
