"""scripts/dashboard_picture.py's pure part: the dashboard's variables and Grafana's intervals in a query, legends,
the window. Drawing from a live Prometheus: tests/integration/test_prometheus_tools.py."""
import argparse
import datetime

import pytest

from tests.helpers.script_module import load_file

dp = load_file("scripts/dashboard_picture.py", "dashboard_picture_under_test")


@pytest.mark.parametrize("expr, expected", [
    ('x{instance=~"$node_instance"}', 'x{instance=~".*"}'),
    ('x{instance=~"${node_instance}", a=~"${node_instance:regex}"}', 'x{instance=~".*", a=~".*"}'),
    ('x{instance=~"[[sglang_instance]]"}', 'x{instance=~".*"}'),
    ("rate(x[$__rate_interval])", "rate(x[60s])"),
    ("rate(x[$__interval]) / $__range_s", "rate(x[15s]) / 3600"),
    ('x{a="$unknown"}', 'x{a="$unknown"}'),
    ("label_replace(x, \"dst\", \"$1\", \"src\", \"(.*)\")", "label_replace(x, \"dst\", \"$1\", \"src\", \"(.*)\")"),
])
def test_substitute(expr, expected):
    assert dp.substitute(expr, {"node_instance", "sglang_instance"}, 15, 3600) == expected


def test_the_rate_interval_follows_a_long_step():
    assert dp.substitute("rate(x[$__rate_interval])", set(), 300, 86400) == "rate(x[1200s])"


@pytest.mark.parametrize("target, labels, shown", [
    ({"legendFormat": "{{instance}} queued"}, {"instance": "gpu1:30000"}, "gpu1:30000 queued"),
    ({"legendFormat": "{{ host }} {{category}}"}, {"host": "h", "category": "pkg"}, "h pkg"),
    ({"legendFormat": "{{absent}} x"}, {}, "x"),
    ({}, {"__name__": "up", "job": "node", "instance": "a"}, 'up{instance="a", job="node"}'),
    ({"legendFormat": "__auto"}, {"job": "j"}, '{job="j"}'),
])
def test_legend(target, labels, shown):
    assert dp.legend(target, labels) == shown


@pytest.mark.parametrize("value, unit, shown", [
    (0.5, "percentunit", "50.0%"), (30, "s", "30 s"), (600, "s", "10 min"), (7200, "s", "2 h"),
    (3 * 86400, "s", "3 d"), (123456.0, "none", "1.235e+05"), (float("nan"), "s", "NaN"),
])
def test_numbers(value, unit, shown):
    assert dp._number(value, unit) == shown  # pylint: disable=protected-access


def test_moment():
    assert dp.moment("1700000000") == 1700000000.0
    expected = datetime.datetime(2026, 12, 8, 1, 0, tzinfo=datetime.timezone.utc).timestamp()
    assert dp.moment("2026-12-08T01:00:00Z") == expected
    assert dp.moment("2026-12-08T01:00:00") == expected
    assert dp.moment("2026-12-08T02:00:00+01:00") == expected
    with pytest.raises(argparse.ArgumentTypeError):
        dp.moment("yesterday")


def _args(**given):
    values = {"start": None, "end": None, "minutes": 60.0, "step": None}
    values.update(given)
    return argparse.Namespace(**values)


def test_the_window():
    assert dp.window_of(_args(end=10000.0)) == (6400.0, 10000.0, 15.0)
    assert dp.window_of(_args(start=0.0, end=86400.0)) == (0.0, 86400.0, 360)
    assert dp.window_of(_args(start=0.0, end=100.0, step=5.0)) == (0.0, 100.0, 5.0)


@pytest.mark.parametrize("given", [{"start": 10.0, "end": 5.0}, {"end": 100.0, "step": 0.0},
                                   {"start": 0.0, "end": 86400.0 * 30, "step": 1.0},
                                   {"end": 100.0, "step": float("nan")}, {"end": float("nan")}])
def test_a_window_refused(given):
    with pytest.raises(ValueError):
        dp.window_of(_args(**given))


def test_a_bad_window_or_url_is_a_message(tmp_path, capsys):
    out = str(tmp_path / "x.png")
    assert dp.main(["--url", "http://127.0.0.1:9090", "--out", out, "--start", "10", "--end", "5"]) == 2
    assert dp.main(["--url", "gopher://x", "--out", out]) == 2
    assert dp.main(["--url", "http://127.0.0.1:1", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("dashboard_picture: ") == 3 and "Traceback" not in err
    assert not (tmp_path / "x.png").exists()


def test_a_long_table_cell_is_cut():
    assert dp._cell("0123456789" * 4) == "01234567890123456789012\u2026"  # pylint: disable=protected-access
    assert dp._cell("abc") == "abc"  # pylint: disable=protected-access
