#!/usr/bin/env python3
"""The fleet's Grafana dashboard, generated with Grafana's own grafana-foundation-sdk (pinned in
requirements-dev.txt) into monitoring/grafana/sglang-fleet.json, which the collection ships.

    scripts/grafana_dashboard.py            # write the JSON
    scripts/grafana_dashboard.py --check    # exit 1 when the committed JSON differs from what this writes

Panels per host: SGLang's own families (throughput, accept length, queue, KV usage; scrape job "sglang"), what the
deploy decided (sglang_deploy_*: fused, path, releases, gate history, restarts and rollbacks) and the drift check
(sglang_drift_*). tests/unit/test_grafana_dashboard.py holds the JSON to this output and every query to series the
collection or SGLang defines.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import prometheus as prom_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO, "monitoring", "grafana", "sglang-fleet.json")
UID = "gpufleet-sglang-fleet"
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
SGLANG = '{job="sglang", instance=~"$sglang_instance"}'
NODE = '{instance=~"$node_instance"}'

# (title, kind, unit, [(expr, legend)], description): one panel each, in rows of its section.
SECTIONS = [
    ("SGLang, per server (its own /metrics)", [
        ("Output throughput", "timeseries", "short",
         [("sum by (instance) (rate(sglang:generation_tokens_total%s[5m]))" % SGLANG, "{{instance}}")],
         "Generated tokens per second, from SGLang's counter."),
        ("Speculative accept length", "timeseries", "short",
         [("avg by (instance) (sglang:spec_accept_length%s)" % SGLANG, "{{instance}}")],
         "Mean accepted drafts + bonus token per forward (EAGLE-3)."),
        ("Queue and running requests", "timeseries", "short",
         [("sum by (instance) (sglang:num_queue_reqs%s)" % SGLANG, "{{instance}} queued"),
          ("sum by (instance) (sglang:num_running_reqs%s)" % SGLANG, "{{instance}} running")],
         "Requests waiting for the scheduler and requests running."),
        ("KV cache usage", "timeseries", "percentunit",
         [("max by (instance) (sglang:token_usage%s)" % SGLANG, "{{instance}}")],
         "Share of the KV cache's tokens in use."),
    ]),
    ("What the deploy decided, per host (sglang_deploy_*)", [
        ("Fused all-reduce", "stat", "none",
         [("sglang_deploy_fused%s" % NODE, "{{instance}}")],
         "1: the server's last proven start ran the fused all-reduce+RMSNorm; 0: it does not."),
        ("All-reduce path", "table", "none",
         [("sglang_deploy_allreduce_path_info%s" % NODE, "")],
         "The path the deploy chose (label path)."),
        ("Releases, lock, model revision", "table", "none",
         [("sglang_deploy_info%s" % NODE, "")],
         "SGLang and FlashInfer releases, the lock and the model revision each host runs."),
        ("Gate: throughput against the bar", "timeseries", "short",
         [("sglang_deploy_gate_throughput_tokens_per_second%s" % NODE, "{{instance}} measured"),
          ("sglang_deploy_gate_baseline_tokens_per_second%s * (1 + sglang_deploy_gate_margin_ratio%s)"
           % (NODE, NODE), "{{instance}} required")],
         "The gate's last median throughput and what it requires: baseline x (1 + margin)."),
        ("Gate: accept length and correctness", "timeseries", "short",
         [("sglang_deploy_gate_accept_length%s" % NODE, "{{instance}} accept length"),
          ("sglang_deploy_gate_match_ratio%s" % NODE, "{{instance}} match ratio"),
          ("sglang_deploy_gate_min_match_ratio%s" % NODE, "{{instance}} required match ratio")],
         "Accept length and the share of greedy completions matching the baseline's."),
        ("Gate verdicts", "statetimeline", "none",
         [("sglang_deploy_gate_passed%s" % NODE, "{{instance}}")],
         "The gate's verdict over time: 1 passed, 0 failed."),
        ("Restarts and rollbacks (1 day)", "timeseries", "short",
         [("increase(sglang_deploy_restarts_total%s[1d])" % NODE, "{{instance}} restarts"),
          ("increase(sglang_deploy_rollbacks_total%s[1d])" % NODE, "{{instance}} rollbacks")],
         "Restarts the roles made and the gate's rollbacks, over the last day."),
    ]),
    ("Drift (the drift check's report)", [
        ("Drift per host", "statetimeline", "none",
         [("sglang_drift_status", "{{host}}")],
         "0 clean, 1 drift, 2 error, 3 unreachable."),
        ("Drift items per category", "timeseries", "short",
         [("sum by (host, category) (sglang_drift_items) > 0", "{{host}} {{category}}")],
         "What the last drift check found, by category."),
        ("Age of the last drift check", "stat", "s",
         [("time() - max(sglang_drift_last_run_timestamp_seconds)", "age")],
         "Seconds since the last drift report (the stale alert fires past one day)."),
    ]),
]
BUILDERS = {"timeseries": timeseries.Panel, "stat": stat.Panel, "table": table.Panel,
            "statetimeline": statetimeline.Panel}
WIDTH, HEIGHT, PER_ROW = 8, 8, 3


def _panel(panel_id, title, kind, unit, queries, description, x, y):
    panel = (BUILDERS[kind]().id(panel_id).title(title).description(description).unit(unit)
             .datasource(DATASOURCE).grid_pos(model.GridPos(h=HEIGHT, w=WIDTH, x=x, y=y)))
    for index, (expr, legend) in enumerate(queries):
        query = prometheus.Dataquery().expr(expr).ref_id(chr(ord("A") + index)).datasource(DATASOURCE)
        if kind == "table":
            query = query.instant().format(prom_model.PromQueryFormat.TABLE)
        elif legend:
            query = query.legend_format(legend)
        panel = panel.with_target(query)
    return panel


def _variable(name, label, query):
    return (db.QueryVariable(name).label(label).datasource(DATASOURCE).query(query)
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).multi(True).include_all(True).all_value(".*"))


def build():
    """The dashboard, as the JSON-ready mapping Grafana imports."""
    board = (db.Dashboard("gpufleet SGLang fleet").uid(UID).tags(["gpufleet", "sglang"]).editable()
             .time("now-24h", "now").refresh("1m").timezone("utc")
             .with_variable(db.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
             .with_variable(_variable("sglang_instance", "SGLang server", 'label_values(up{job="sglang"}, instance)'))
             .with_variable(_variable("node_instance", "Host (node exporter)",
                                      "label_values(sglang_deploy_fused, instance)")))
    panel_id, y = 1, 0
    for section, panels in SECTIONS:
        board = board.with_row(db.Row(section).id(panel_id).grid_pos(model.GridPos(h=1, w=24, x=0, y=y)))
        panel_id, y = panel_id + 1, y + 1
        for index, (title, kind, unit, queries, description) in enumerate(panels):
            x = (index % PER_ROW) * WIDTH
            row_y = y + (index // PER_ROW) * HEIGHT
            board = board.with_panel(_panel(panel_id, title, kind, unit, queries, description, x, row_y))
            panel_id += 1
        y += -(-len(panels) // PER_ROW) * HEIGHT
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def render():
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def expressions(dashboard):
    """Every PromQL expression in DASHBOARD: the panels' queries and the variables' queries."""
    found = []
    for panel in dashboard.get("panels", []):
        found += [target["expr"] for target in panel.get("targets", []) if "expr" in target]
        for inner in panel.get("panels", []):
            found += [target["expr"] for target in inner.get("targets", []) if "expr" in target]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            found.append(query[len("label_values("):-1].rsplit(",", 1)[0] if query.startswith("label_values(")
                         else query)
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed JSON is not this output")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        try:
            with open(OUTPUT, encoding="utf-8") as handle:
                same = handle.read() == text
        except FileNotFoundError:
            same = False
        if not same:
            print("%s differs from the generator's output: run scripts/grafana_dashboard.py" % OUTPUT)
            return 1
        return 0
    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    with open(OUTPUT, "w", encoding="utf-8") as handle:
        handle.write(text)
    print("wrote %s" % os.path.relpath(OUTPUT, REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
