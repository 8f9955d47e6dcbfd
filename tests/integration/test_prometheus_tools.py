"""scripts/prometheus_series.py and scripts/dashboard_picture.py against a real Prometheus (Debian's), serving
made-up series for two hosts under every name the dashboard and the alert rules read, as a fleet's Prometheus would
hold them: SGLang's families per server (job sglang), the deploy's textfile per host (job node), the drift check's
textfile from the control node only (label host). The commands are docs/metrics.md's, run as the page writes them
(its host names are the data's) with the test's Prometheus and a time inside the data."""
import json
import os
import shlex
import struct
import time

import pytest

from tests.helpers import markdown_blocks
from tests.helpers.ansible_run import REPO
from tests.helpers.prometheus_server import openmetrics, serving
from tests.helpers.script_module import load_file

series_tool = load_file("scripts/prometheus_series.py", "prometheus_series_under_test")
picture_tool = load_file("scripts/dashboard_picture.py", "dashboard_picture_under_test")

HOSTS = ("gpu1", "gpu2")  # inventory names; the docs' addresses are NAME.example.org
CONTROL = "control.example.org:9100"
END = (int(time.time()) // 3600 - 3) * 3600  # hours back: promtool's blocks lie wholly in the past
START = END - 2 * 3600
STEP = 60


def docs_command(script):
    """The arguments of docs/metrics.md's command line for scripts/SCRIPT, its --url left out."""
    with open(os.path.join(REPO, "docs", "metrics.md"), encoding="utf-8") as handle:
        text = handle.read()
    lines = [shlex.split(block.replace("\\\n", " ")) for block in markdown_blocks.blocks(text, "sh")]
    found = [words[1:] for words in lines if words and words[0] == "scripts/" + script]
    assert len(found) == 1, "docs/metrics.md gives one command for %s" % script
    words = found[0]
    at = words.index("--url")
    return words[:at] + words[at + 2:]


def _address(host, port):
    return "%s.example.org:%d" % (host, port)


def _labels(metric):
    """[labels...] of METRIC's series, as the lab's scrape jobs would label them."""
    if metric == "up":
        return [{"job": "sglang", "instance": _address(host, 30000)} for host in HOSTS]
    if metric.startswith("sglang:"):
        return [{"job": "sglang", "instance": _address(host, 30000)} for host in HOSTS]
    if metric == "sglang_drift_last_run_timestamp_seconds":
        return [{"job": "node", "instance": CONTROL}]
    if metric == "sglang_drift_items":
        return [{"job": "node", "instance": CONTROL, "host": host, "category": category}
                for host in HOSTS for category in ("packages", "config")]
    if metric.startswith("sglang_drift_"):
        return [{"job": "node", "instance": CONTROL, "host": host} for host in HOSTS]
    if metric.startswith("sglang_deploy_"):
        extra = {"sglang_deploy_info": {"sglang_version": "0.5.17", "flashinfer_version": "0.4.1", "lock": "lock-1",
                                        "model_revision": "abc"},
                 "sglang_deploy_allreduce_path_info": {"path": "fused"}}.get(metric, {})
        return [dict(extra, job="node", instance=_address(host, 9100)) for host in HOSTS]
    raise AssertionError("the test does not know how %s is labelled: add it here" % metric)


def _value(metric, kind, index, number, moment):
    if metric.endswith("_timestamp_seconds"):
        return float(moment)
    if kind == "counter":
        return float(index * (number + 1))
    return 1.0 + (index // 30 + number) % 3  # a step every half hour


def families(leave_out=lambda metric, labels: False):
    """Every metric the dashboard and the rules read, a sample a minute over the window; LEAVE_OUT(metric, labels)
    drops a series."""
    found = []
    for metric in series_tool.load_uses():
        kind = "counter" if metric.endswith("_total") else "gauge"
        series = []
        for number, labels in enumerate(_labels(metric)):
            if leave_out(metric, labels):
                continue
            samples = [(moment, _value(metric, kind, index, number, moment))
                       for index, moment in enumerate(range(START, END + 1, STEP))]
            series.append((labels, samples))
        if series:
            found.append((metric, kind, series))
    return found


def _gpu2_unfused_and_no_drift(metric, labels):
    return metric.startswith("sglang_drift_") or (
        metric == "sglang_deploy_fused" and labels["instance"] == _address("gpu2", 9100))


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("complete"), openmetrics(families())) as url:
        yield url


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    text = openmetrics(families(_gpu2_unfused_and_no_drift))
    with serving(tmp_path_factory.mktemp("partial"), text) as url:
        yield url


def test_every_series_the_dashboard_and_rules_read_is_there(complete, capsys):
    assert series_tool.main(docs_command("prometheus_series.py") + ["--url", complete, "--time", str(END)]) == 0
    out = capsys.readouterr().out
    for metric in series_tool.load_uses():
        assert "\n" + metric + " " in out
    assert "MISSING" not in out
    assert "%d of %d metrics have every series asked for" % ((len(series_tool.load_uses()),) * 2) in out


def test_a_series_left_out_is_named_with_its_instance(partial, capsys):
    assert series_tool.main(docs_command("prometheus_series.py") + ["--url", partial, "--time", str(END)]) == 1
    missing = sorted(line for line in capsys.readouterr().out.splitlines() if line.startswith("MISSING"))
    assert missing == ["MISSING sglang_deploy_fused: instance=gpu2.example.org:9100",
                       "MISSING sglang_drift_items: host=gpu1, host=gpu2",
                       "MISSING sglang_drift_last_run_timestamp_seconds: instance=%s" % CONTROL,
                       "MISSING sglang_drift_status: host=gpu1, host=gpu2"]


def test_a_series_asked_for_with_a_star_needs_only_to_exist(partial, capsys):
    assert series_tool.main(["--url", partial, "--time", str(END), "--expect", "instance=*",
                             "--expect", "sglang_drift_:host=*"]) == 1
    missing = sorted(line for line in capsys.readouterr().out.splitlines() if line.startswith("MISSING"))
    assert missing == ["MISSING %s: (no series)" % name for name in
                       ("sglang_drift_items", "sglang_drift_last_run_timestamp_seconds", "sglang_drift_status")]


def test_after_the_data_nothing_is_there(complete, capsys):
    # An instant query sees a sample up to 5 minutes old: an hour after the last one, every metric is missing.
    assert series_tool.main(["--url", complete, "--time", str(END + 3600), "--expect", "instance=*"]) == 1
    assert capsys.readouterr().out.count("MISSING") == len(series_tool.load_uses())


def test_an_answer_that_is_not_prometheus_json_is_a_message(complete, capsys):
    # Prometheus' own 404 page under a path that is not its API.
    assert series_tool.main(["--url", complete + "/nothing-here"]) == 2
    assert "did not answer with Prometheus' JSON" in capsys.readouterr().err
    assert picture_tool.main(["--url", complete + "/nothing-here", "--out", "/nonexistent/x.png"]) == 2


def _dashboard():
    with open(series_tool.DASHBOARD, encoding="utf-8") as handle:
        return json.load(handle)


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _titles():
    return [panel["title"] for panel in series_tool.dashboard_panels(_dashboard())]


def _expected_size(panels):
    rows = -(-panels // picture_tool.COLUMNS)
    width, height = picture_tool.PANEL_SIZE
    return round(width * picture_tool.COLUMNS * 100), round((height * rows + 0.6) * 100)


def test_the_picture_draws_every_panel_with_data(complete, tmp_path):
    out = tmp_path / "fleet.png"
    drawn = picture_tool.render(complete, _dashboard(), str(out), START, END, 300)
    assert drawn == [(title, True) for title in _titles()]
    assert _png_size(out) == _expected_size(len(drawn))


def test_the_docs_picture_command(complete, tmp_path, capsys):
    out = tmp_path / "fleet.png"
    args = docs_command("dashboard_picture.py") + ["--url", complete, "--out", str(out), "--end", str(END)]
    assert picture_tool.main(args) == 0
    captured = capsys.readouterr()
    assert captured.out == "wrote %s: %d panels, 0 without data\n" % (out, len(_titles()))
    assert captured.err == ""
    assert _png_size(out) == _expected_size(len(_titles()))


def test_the_picture_names_the_panels_without_data(partial, tmp_path, capsys):
    out = tmp_path / "fleet.png"
    args = ["--url", partial, "--out", str(out), "--start", str(START), "--end", str(END), "--step", "300"]
    assert picture_tool.main(args) == 0
    captured = capsys.readouterr()
    drift = ["Drift per host", "Drift items per category", "Age of the last drift check"]
    assert sorted(captured.err.splitlines()) == sorted("no data: %s" % title for title in drift)
    assert "%d panels, 3 without data" % len(_titles()) in captured.out
    assert _png_size(out) == _expected_size(len(_titles()))
    assert picture_tool.main(args + ["--require-data"]) == 1
