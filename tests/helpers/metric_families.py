"""The series the collection's rules and dashboard may read, from where each is defined, and the series a PromQL
expression reads.

Defined: the deploy's textfile (module_utils/deploy_metrics.py), the drift check's textfile
(module_utils/drift_report.py, rendered here from a report), SGLang's own /metrics as the real 0.5.17 server answered
it (tests/fixtures/device/sglang_0.5.17_real_server.json), and Prometheus' own `up`.
"""
import json
import os
import re

from ansible.module_utils import deploy_metrics
from ansible.module_utils import drift_report

from tests.helpers.script_module import load_file

_series_tool = load_file("scripts/prometheus_series.py", "prometheus_series_for_metric_families")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_SERVER = os.path.join(REPO, "tests", "fixtures", "device", "sglang_0.5.17_real_server.json")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{|\s)")


def sample_names(text):
    """The series names of the samples in exposition TEXT (histogram _bucket/_sum/_count included)."""
    return {m.group(1) for line in text.splitlines() if not line.startswith("#") for m in [_SAMPLE.match(line)] if m}


def sglang_series():
    """Every series SGLang 0.5.17's /metrics answered (the recorded capture)."""
    with open(REAL_SERVER, encoding="utf-8") as handle:
        recorded = json.load(handle)
    texts = [entry.get("text") or "" for group in ("responses", "unauthorized") for entry in recorded.get(group, [])
             if isinstance(entry, dict)]
    metrics = [text for text in texts if "# TYPE sglang:" in text]
    assert metrics, "the real server capture holds no /metrics answer"
    return sample_names(metrics[0])


def deploy_series():
    return {deploy_metrics.PREFIX + name for name in deploy_metrics.KINDS} | {
        deploy_metrics.PREFIX + "info", deploy_metrics.PREFIX + "allreduce_path_info"}


def drift_series():
    report = {"hosts": {"gpu1": {"status": "clean", "counts": {}}}, "timestamp": 0.0}
    return sample_names(drift_report.render_prom(report))


def defined_series():
    return sglang_series() | deploy_series() | drift_series() | {"up"}


def series_in(expr):
    """The series names a PromQL expression reads (scripts/prometheus_series.py's reader, which the operator's
    check of a live Prometheus uses too)."""
    return set(_series_tool.metric_names(expr))
