"""The shipped Grafana dashboard: the generator's output, committed, and every query valid PromQL (promtool) that
reads only series the collection or SGLang defines."""
import json
import os

import yaml

from tests.helpers import metric_families
from tests.helpers.promtool import run
from tests.helpers.script_module import load_file

gd = load_file("scripts/grafana_dashboard.py", "grafana_dashboard")


def committed():
    with open(gd.OUTPUT, encoding="utf-8") as handle:
        return handle.read()


def test_the_committed_json_is_the_generators_output():
    assert committed() == gd.render(), "run scripts/grafana_dashboard.py and commit its output"
    assert gd.main(["--check"]) == 0


def test_check_says_when_the_json_was_edited_by_hand(tmp_path, monkeypatch, capsys):
    edited = tmp_path / "sglang-fleet.json"
    edited.write_text(committed().replace("Output throughput", "Output"))
    monkeypatch.setattr(gd, "OUTPUT", str(edited))
    assert gd.main(["--check"]) == 1
    assert "differs from the generator's output" in capsys.readouterr().out


def test_the_dashboard_shows_each_thing_the_issue_names():
    dashboard = json.loads(committed())
    exprs = " ".join(gd.expressions(dashboard))
    for series in ("sglang:generation_tokens_total", "sglang:spec_accept_length", "sglang:num_queue_reqs",
                   "sglang:token_usage", "sglang_deploy_fused", "sglang_deploy_allreduce_path_info",
                   "sglang_deploy_gate_passed", "sglang_drift_status"):
        assert series in exprs, series
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_every_query_reads_only_defined_series():
    defined = metric_families.defined_series()
    for expr in gd.expressions(json.loads(committed())):
        used = metric_families.series_in(expr)
        assert used and used <= defined, (expr, used - defined)


def test_every_query_is_valid_promql(tmp_path):
    # promtool parses a recording rule's expression as Prometheus would the panel's query.
    exprs = [expr.replace("$sglang_instance", ".*").replace("$node_instance", ".*")
             for expr in gd.expressions(json.loads(committed()))]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": "dashboard:query_%d" % index, "expr": expr}
                                                        for index, expr in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    result = run("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: %d rules found" % len(exprs) in result.stdout
