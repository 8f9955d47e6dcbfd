"""scripts/prometheus_series.py's pure part: the metric names a PromQL expression reads, where the dashboard and the
rules read them, and the --expect rules. The check against a live Prometheus: tests/integration/
test_prometheus_tools.py."""
import json

import pytest

from tests.helpers.script_module import load_file

ps = load_file("scripts/prometheus_series.py", "prometheus_series_under_test")


@pytest.mark.parametrize("expr, names", [
    ("up", ["up"]),
    ('up{job="sglang"} == 0', ["up"]),
    ("time() - max(x)", ["x"]),
    ("a < b * (1 + c)", ["a", "b", "c"]),
    ('increase(x{a="b"}[1d]) > 0', ["x"]),
    ("sum by (host, category) (x) > 0", ["x"]),
    ("sum(x) by (host) > 0", ["x"]),
    ("sum without (instance) (x)", ["x"]),
    ("topk(3, sum without (a) (m))", ["m"]),
    ('label_replace(x, "dst", "foo($1)", "src", "(.*)")', ["x"]),
    ("label_replace(x, 'dst', 'y(', 'src', `(.*)`)", ["x"]),
    ('x{a="}", b=~"[a-z]{2}"}', ["x"]),
    ("sum(rate(sglang:generation_tokens_total[5m] offset 1h))", ["sglang:generation_tokens_total"]),
    ("x / on(instance) group_left(path) y", ["x", "y"]),
    ("x * ignoring(path) group_right y", ["x", "y"]),
    ("x and bool y or z unless w", ["x", "y", "z", "w"]),
    ("x[30m:1m] @ 1609746000 + 1e3 + 0x1F + .5 + Inf - NaN", ["x"]),
    ("x @ start() + y @ end()", ["x", "y"]),
    ('{__name__="sglang:token_usage", job="sglang"}', ["sglang:token_usage"]),
    ('{__name__=~"sglang:.*"}', []),
    ("m # a comment naming foo(\n + n", ["m", "n"]),
    ('count_values("version", sglang_deploy_info)', ["sglang_deploy_info"]),
    ("x + x", ["x", "x"]),
    ("vector(1)", []),
    ("sglang_deploy_fused < max_over_time(sglang_deploy_fused[7d])", ["sglang_deploy_fused"] * 2),
    ("histogram_quantile(0.9, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket[5m])))",
     ["sglang:e2e_request_latency_seconds_bucket"]),
])
def test_metric_names(expr, names):
    assert ps.metric_names(expr) == names


@pytest.mark.parametrize("expr", ['x{a="b"', 'label_replace(x, "a', "x[5m"])
def test_an_unclosed_expression_is_an_error(expr):
    with pytest.raises(ps.ExpressionError):
        ps.metric_names(expr)


def test_the_dashboard_expressions_include_rows_nested_panels_and_variables():
    dashboard = {
        "panels": [
            {"type": "row", "title": "open row", "panels": []},
            {"type": "timeseries", "title": "A", "targets": [{"expr": "rate(a_total[5m])"}, {"expr": ""}, {}]},
            {"type": "row", "title": "collapsed", "collapsed": True,
             "panels": [{"type": "stat", "title": "B", "targets": [{"expr": "b{x=\"$node_instance\"}"}]}]},
            {"type": "text", "title": "notes"},
        ],
        "templating": {"list": [
            {"type": "datasource", "name": "datasource", "query": "prometheus"},
            {"type": "query", "name": "v1", "query": 'label_values(up{job="sglang"}, instance)'},
            {"type": "query", "name": "v2", "query": {"query": "label_values(c, instance)", "refId": "A"}},
            {"type": "query", "name": "v3", "query": "label_values(instance)"},
            {"type": "query", "name": "v4", "query": "query_result(topk(3, d))"},
        ]},
    }
    assert [panel["title"] for panel in ps.dashboard_panels(dashboard)] == ["A", "B", "notes"]
    assert ps.dashboard_expressions(dashboard) == [
        ("panel A", "rate(a_total[5m])"), ("panel B", 'b{x="$node_instance"}'),
        ("variable v1", 'up{job="sglang"}'), ("variable v2", "c"), ("variable v4", "topk(3, d)")]


def test_the_rules_expressions_name_alerts_and_records():
    rules = {"groups": [{"name": "g", "rules": [{"alert": "Down", "expr": "up == 0"},
                                                {"record": "job:x:sum", "expr": "sum by (job) (x)"}]},
                        {"name": "empty", "rules": None}]}
    assert ps.rules_expressions(rules) == [("alert Down", "up == 0"), ("record job:x:sum", "sum by (job) (x)")]


def test_metric_uses_lists_each_place_once_per_expression():
    uses = ps.metric_uses([("alert A", "x\n  < max_over_time(x[7d])"), ("panel P", "y + x")])
    assert uses == {"x": [("alert A", "x < max_over_time(x[7d])"), ("panel P", "y + x")],
                    "y": [("panel P", "y + x")]}


def test_the_shipped_dashboard_and_rules_read_the_deploy_drift_and_sglang_series():
    uses = ps.load_uses()
    assert {"up", "sglang:generation_tokens_total", "sglang_deploy_fused", "sglang_drift_status",
            "sglang_drift_last_run_timestamp_seconds"} <= set(uses)
    assert ("alert SGLangServerDown", 'up{job="sglang"} == 0') in uses["up"]
    assert all(name.startswith(("sglang:", "sglang_deploy_", "sglang_drift_")) or name == "up" for name in uses)


def test_load_uses_says_what_is_not_a_dashboard(tmp_path):
    (tmp_path / "d.json").write_text(json.dumps([1]))
    (tmp_path / "r.yml").write_text("groups: []\n")
    with pytest.raises(ValueError, match="is not a dashboard"):
        ps.load_uses(str(tmp_path / "d.json"), str(tmp_path / "r.yml"))


@pytest.mark.parametrize("text, parsed", [
    ("instance=gpu1:9100,gpu2:9100", ("", "instance", ["gpu1:9100", "gpu2:9100"])),
    ("sglang::instance=gpu1:30000", ("sglang:", "instance", ["gpu1:30000"])),
    ("sglang_drift_:host=a, b", ("sglang_drift_", "host", ["a", "b"])),
    ("up:instance=*", ("up", "instance", None)),
])
def test_parse_expect(text, parsed):
    assert ps.parse_expect(text) == parsed


@pytest.mark.parametrize("text", ["instance", "instance=", "sglang:=a", "bad-label=a", "1x:instance=a", "=a"])
def test_parse_expect_refuses(text):
    with pytest.raises(ValueError, match="--expect"):
        ps.parse_expect(text)


def test_the_longest_prefix_wins():
    expects = [("", "instance", ["n1"]), ("sglang_drift_", "host", ["h1"]),
               ("sglang_drift_last_run_timestamp_seconds", "instance", None)]
    assert ps.expectation("sglang_deploy_fused", expects) == ("instance", ["n1"])
    assert ps.expectation("sglang_drift_status", expects) == ("host", ["h1"])
    assert ps.expectation("sglang_drift_last_run_timestamp_seconds", expects) == ("instance", None)
    assert ps.expectation("up", expects[1:]) == (None, None)


def test_the_table_shows_missing_and_unlabelled_series():
    text = ps.table([("up", "instance", ["a", "b"], ["a"], ["b"]), ("x", "", None, [], []),
                     ("y", "host", ["h"], [""], ["h"])])
    lines = text.splitlines()
    assert lines[0].split() == ["metric", "label", "expected", "found", "missing"]
    assert lines[1].split() == ["up", "instance", "a,b", "a", "b"]
    assert lines[2].split() == ["x", "-", "*", "-", "-"]
    assert lines[3].split() == ["y", "host", "h", '""', "h"]


def test_the_listing_without_url_names_each_metric_and_its_readers(capsys):
    assert ps.main([]) == 0
    out = capsys.readouterr().out
    assert "sglang_deploy_fused\n" in out
    assert "    alert SGLangFusionLost: sglang_deploy_fused < max_over_time(sglang_deploy_fused[7d])" in out


def test_a_bad_expect_or_file_is_a_message(tmp_path, capsys):
    assert ps.main(["--expect", "nonsense"]) == 2
    assert ps.main(["--rules", str(tmp_path / "absent.yml")]) == 2
    (tmp_path / "bad.yml").write_text("groups: [\n")
    assert ps.main(["--rules", str(tmp_path / "bad.yml")]) == 2
    err = capsys.readouterr().err
    assert err.count("prometheus_series: ") == 3 and "Traceback" not in err


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:1", "cannot reach Prometheus"),
    ("ftp://127.0.0.1:9090", "is not an http(s) URL"),
    ("not a url", "is not an http(s) URL"),
    ("", "is not an http(s) URL"),
    ("http://127.0.0.1:notaport", "cannot reach Prometheus"),
])
def test_a_bad_url_is_a_message(url, says, capsys):
    assert ps.main(["--url", url]) == 2
    error = capsys.readouterr().err
    assert says in error and "Traceback" not in error
