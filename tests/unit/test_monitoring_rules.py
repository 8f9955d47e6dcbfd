"""The alert rules the collection ships (monitoring/prometheus/), checked and unit-tested with Debian's promtool."""
import os
import shutil

import yaml

from tests.helpers import metric_families
from tests.helpers.promtool import run

REPO = metric_families.REPO
RULES = os.path.join(REPO, "monitoring", "prometheus", "sglang-alerts.yml")
TESTS = os.path.join(REPO, "tests", "monitoring")
RULE_TESTS = os.path.join(TESTS, "sglang-alerts.test.yml")


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def alerts():
    return [rule for group in load(RULES)["groups"] for rule in group["rules"]]


def test_promtool_accepts_the_rules():
    result = run("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: %d rules found" % len(alerts()) in result.stdout


def test_every_rule_passes_its_promtool_unit_tests():
    result = run("test", "rules", os.path.basename(RULE_TESTS), cwd=TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_rule_has_a_test_that_fires_it():
    tested = {case["alertname"] for test in load(RULE_TESTS)["tests"] for case in test.get("alert_rule_test", [])
              if case.get("exp_alerts")}
    assert {rule["alert"] for rule in alerts()} == tested


def test_the_tests_fail_when_a_rule_is_changed(tmp_path):
    # The staleness threshold doubled: the 25 h case no longer fires, and promtool says so.
    (tmp_path / "monitoring" / "prometheus").mkdir(parents=True)
    with open(RULES, encoding="utf-8") as handle:
        text = handle.read()
    assert "> 86400" in text
    (tmp_path / "monitoring" / "prometheus" / "sglang-alerts.yml").write_text(text.replace("> 86400", "> 172800"))
    (tmp_path / "tests" / "monitoring").mkdir(parents=True)
    shutil.copy(RULE_TESTS, str(tmp_path / "tests" / "monitoring"))
    result = run("test", "rules", os.path.basename(RULE_TESTS), cwd=str(tmp_path / "tests" / "monitoring"))
    assert result.returncode != 0 and "SGLangDriftCheckStale" in result.stdout + result.stderr


def test_every_rule_reads_only_series_the_collection_or_sglang_defines():
    defined = metric_families.defined_series()
    for rule in alerts():
        used = metric_families.series_in(rule["expr"])
        assert used and used <= defined, (rule["alert"], used - defined)
