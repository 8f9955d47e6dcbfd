# -*- coding: utf-8 -*-
"""The benchmark gate's artifacts on the controller: one JSON per run, a Markdown summary, a PNG history chart.

Layout under the results directory (one folder per host):
    <host>/runs/<stamp>.json   everything about one gate run (inputs, per-run results, verdict)
    <host>/history.jsonl       one line per gate run: time, median tok/s, bar, verdict (the chart's data)
    <host>/summary.md          the latest verdict and the history table
    <host>/throughput.png      median output tok/s per gate run, with the required bar and the baseline
    <host>/allreduce-paths.png the latest run's all-reduce path trials side by side (auto with several candidates)
"""
from __future__ import annotations

import json
import os

from ansible.module_utils.atomic_files import write_atomic  # pylint: disable=import-error

HISTORY_KEYS = ("stamp", "passed", "median_tok_s", "bar_tok_s", "baseline_tok_s", "spread_pct",
                "accept_length", "match_rate", "venv", "sglang", "rolled_back", "allreduce_path")


def history_line(record):
    line = {k: record.get(k) for k in HISTORY_KEYS}
    if record.get("allreduce"):
        line["allreduce_path"] = record["allreduce"].get("winner") or "none won"
    return line


def allreduce_table(allreduce):
    """The all-reduce path trials side by side (Markdown lines)."""
    lines = ["## All-reduce paths (auto: every candidate measured)", "",
             "Chosen: **%s**. %s" % (allreduce.get("winner") or "none", allreduce.get("why", "")), "",
             "| path | verdict | median tok/s | required | baseline | match % | why not |", "|---|---|---|---|---|---|---|"]
    for row in allreduce.get("paths", []):
        match = None if row.get("match_rate") is None else 100 * row["match_rate"]
        lines.append("| %s%s | %s | %s | %s | %s | %s | %s |" % (
            row.get("path"), " (chosen)" if row.get("path") == allreduce.get("winner") else "",
            "pass" if row.get("passed") else "FAIL", _cell(row.get("median_tok_s")), _cell(row.get("bar_tok_s")),
            _cell(row.get("baseline_tok_s")), _cell(match), "; ".join(row.get("failures") or []) or "-"))
    return lines + [""]


def read_history(path):
    rows = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        continue  # a torn line from an interrupted run: skip it, keep the rest
    return rows


def _cell(value, pattern="%.1f"):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return pattern % value
    return str(value)


def markdown(host, record, history):
    lines = ["# Benchmark gate: %s" % host, "",
             "Latest run %s: **%s**" % (record["stamp"], "PASSED" if record["passed"] else "FAILED"), "",
             record["message"], ""]
    if record.get("rolled_back"):
        lines += ["Rolled back: %s" % record["rolled_back"], ""]
    if record.get("allreduce"):
        lines += allreduce_table(record["allreduce"])
    lines += ["| concurrency | runs counted | median tok/s | min | max | spread % | TTFT ms | TPOT ms | accept length |",
              "|---|---|---|---|---|---|---|---|---|"]
    for concurrency, s in sorted(record["summary"].items(), key=lambda item: int(item[0])):
        lines.append("| %s | %d/%d | %s | %s | %s | %s | %s | %s | %s |" % (
            concurrency, s["counted"], s["runs"], _cell(s["median_output_tok_s"]), _cell(s["min_output_tok_s"]),
            _cell(s["max_output_tok_s"]), _cell(s["spread_pct"]), _cell(s["median_ttft_ms"]),
            _cell(s["median_tpot_ms"], "%.2f"), _cell(s["accept_length"], "%.2f")))
    lines += ["", "## History", "", "| run | verdict | median tok/s | required | baseline | match % | sglang | venv |",
              "|---|---|---|---|---|---|---|---|"]
    for row in reversed(history[-50:]):
        match = None if row.get("match_rate") is None else 100 * row["match_rate"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row.get("stamp"), "pass" if row.get("passed") else "FAIL", _cell(row.get("median_tok_s")),
            _cell(row.get("bar_tok_s")), _cell(row.get("baseline_tok_s")), _cell(match),
            _cell(row.get("sglang")), _cell(row.get("venv"))))
    return "\n".join(lines) + "\n"


def _save_png(plt, fig, path):
    """Lay the figure out and write it to `path` whole (a reader never sees half a PNG)."""
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, format="png")
    plt.close(fig)
    os.replace(tmp, path)


def render_png(host, history, path):
    """The throughput history chart. matplotlib is part of the controller toolchain (requirements-dev.txt)."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    from matplotlib.ticker import MaxNLocator  # pylint: disable=import-outside-toplevel

    rows = history[-100:]
    xs = list(range(1, len(rows) + 1))
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.plot(xs, [r.get("median_tok_s") for r in rows], marker="o", color="#1f77b4", label="median output tok/s")
    ax.plot(xs, [r.get("bar_tok_s") for r in rows], linestyle="--", color="#d62728", label="required")
    ax.plot(xs, [r.get("baseline_tok_s") for r in rows], linestyle=":", color="#7f7f7f", label="baseline")
    for x, row in zip(xs, rows):
        if not row.get("passed") and row.get("median_tok_s") is not None:
            ax.scatter([x], [row["median_tok_s"]], marker="x", s=80, color="#d62728", zorder=3)
    ax.set_title("SGLang benchmark gate: %s" % host)
    ax.set_xlabel("gate run (oldest to newest; x = failed)")
    ax.set_ylabel("output tokens/s, single stream")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    _save_png(plt, fig, path)


def render_paths_png(host, allreduce, path):
    """The latest trials: one bar per all-reduce path (median tok/s; hatched = failed), the required bar as a line."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    rows = allreduce.get("paths", [])
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    names = [r["path"] + (" *" if r["path"] == allreduce.get("winner") else "") for r in rows]
    heights = [r.get("median_tok_s") or 0 for r in rows]
    bars = ax.bar(names, heights, color=["#2ca02c" if r.get("passed") else "#d62728" for r in rows])
    for patch, row in zip(bars, rows):
        if not row.get("passed"):
            patch.set_hatch("//")
    bar_line = next((r.get("bar_tok_s") for r in rows if r.get("bar_tok_s") is not None), None)
    if bar_line is not None:
        ax.axhline(bar_line, linestyle="--", color="#7f7f7f", label="required (baseline + margin)")
        ax.legend(loc="lower left", fontsize=8)
    ax.set_title("All-reduce paths on %s (* chosen; red = failed)" % host)
    ax.set_ylabel("median output tokens/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, axis="y")
    _save_png(plt, fig, path)


def write_artifacts(results_dir, host, record):
    """Writes the run JSON, appends to the history, rewrites the summary and the chart; returns their paths."""
    folder = os.path.join(results_dir, host)
    os.makedirs(os.path.join(folder, "runs"), exist_ok=True)
    paths = {"run": os.path.join(folder, "runs", record["stamp"] + ".json"),
             "history": os.path.join(folder, "history.jsonl"),
             "summary": os.path.join(folder, "summary.md"),
             "chart": os.path.join(folder, "throughput.png")}
    write_atomic(paths["run"], (json.dumps(record, indent=1, sort_keys=True) + "\n").encode(), mode=0o644)
    history = read_history(paths["history"]) + [history_line(record)]
    write_atomic(paths["history"], "".join(json.dumps(r, sort_keys=True) + "\n" for r in history).encode(),
                 mode=0o644)
    write_atomic(paths["summary"], markdown(host, record, history).encode(), mode=0o644)
    render_png(host, history, paths["chart"])
    if record.get("allreduce"):
        paths["allreduce_chart"] = os.path.join(folder, "allreduce-paths.png")
        render_paths_png(host, record["allreduce"], paths["allreduce_chart"])
    return paths
