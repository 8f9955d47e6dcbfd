"""module_utils/deploy_metrics.py: the deploy's facts as a textfile Debian's promtool accepts, read back, merged."""
import json
import math

import pytest

from ansible.module_utils import deploy_metrics as dm
from ansible.module_utils import gate_verdict
from tests.helpers.promtool import check_metrics

INFO = {"sglang_version": "0.5.17", "flashinfer_version": "0.6.18", "lock": "sm120-0.5.17",
        "model_revision": "6f1c2e0a9b"}
RESTARTS_LOG = (
    "gpu1 start=2026-12-07T10:00:00+00:00 ready=2026-12-07T10:04:10+00:00 waited_s=250 pid=4242 why=deploy\n"
    "gpu1 start=2026-12-07T10:20:00+00:00 ready=2026-12-07T10:24:01+00:00 waited_s=241 pid=4300 "
    "why=benchmark-baseline\n"
    "gpu1 start=2026-12-07T10:40:00+00:00 ready=2026-12-07T10:44:02+00:00 waited_s=242 pid=4391 why=rollback\n"
)


def recorded_verdict(passed=True, **details):
    """A verdict as sglang_benchmark_verdict writes it (gate_verdict.record), read back as the module reads it."""
    figures = {"median_tok_s": 141.25, "bar_tok_s": 86.1, "baseline_tok_s": 82.0, "margin_pct": 5.0,
               "gate_concurrency": 1}
    text = gate_verdict.record("abc123", "d" * 64, passed, "2026-12-07T10:30:00+00:00", "passed",
                               dict({"verdict": figures, "results": {}, "allreduce": None}, **details))
    verdict, problem = gate_verdict.parse(text)
    assert problem is None
    return verdict


def full_facts():
    facts = {"info": INFO, "allreduce_path": "fusion-trtllm", "fused": 1,
             "last_deploy_timestamp_seconds": 1796638800.0, "last_drift_check_timestamp_seconds": 1796642400.5}
    facts.update(dm.gate_facts(recorded_verdict(accept_length=3.25, match_rate=0.8, min_match_rate=0.75)))
    facts["restarts_total"], facts["rollbacks_total"] = dm.count_restarts(RESTARTS_LOG)
    return facts


def test_promtool_accepts_the_textfile_of_a_full_deploy():
    text = dm.render(full_facts())
    assert check_metrics(text) == (0, "")
    assert 'sglang_deploy_info{sglang_version="0.5.17",flashinfer_version="0.6.18",lock="sm120-0.5.17",' \
           'model_revision="6f1c2e0a9b"} 1' in text.splitlines()
    assert "sglang_deploy_gate_margin_ratio 0.05" in text.splitlines()
    assert "sglang_deploy_restarts_total 3" in text.splitlines()
    assert "sglang_deploy_rollbacks_total 1" in text.splitlines()


def test_promtool_rejects_what_the_renderer_must_never_write():
    # The check is real: a counter without _total is what promtool reports.
    rc, output = check_metrics("# HELP x_restarts Restarts.\n# TYPE x_restarts counter\nx_restarts 3\n")
    assert "counter metrics should have \"_total\" suffix" in output, (rc, output)


def test_a_host_with_no_gate_yet_has_no_gate_series_and_still_lints():
    facts = {"info": INFO, "fused": 0, "allreduce_path": "nccl", "restarts_total": 0, "rollbacks_total": 0}
    text = dm.render(facts)
    assert "sglang_deploy_gate_" not in text
    assert check_metrics(text) == (0, "")


def test_label_values_are_escaped_and_read_back_whole():
    odd = dict(INFO, model_revision='rev "main" \\ 2')
    text = dm.render({"info": odd})
    assert check_metrics(text) == (0, "")
    assert dm.parse(text)["info"] == odd


@pytest.mark.parametrize("value, why", [("a\nb", "control character"), ("", "empty"), ("x" * 201, "longer"),
                                        (5, "must be text")])
def test_bad_label_values_are_refused_with_their_name(value, why):
    with pytest.raises(dm.MetricsError, match="info's lock.*" + why):
        dm.render({"info": dict(INFO, lock=value)})


@pytest.mark.parametrize("name, value", [("gate_throughput_tokens_per_second", math.nan),
                                         ("gate_throughput_tokens_per_second", math.inf),
                                         ("fused", 2), ("fused", True), ("restarts_total", 1.5),
                                         ("restarts_total", -1), ("gate_margin_ratio", -0.1)])
def test_numbers_that_are_not_the_series_kind_are_refused(name, value):
    with pytest.raises(dm.MetricsError, match=name):
        dm.render({name: value})


def test_unknown_facts_and_incomplete_info_are_refused():
    assert dm.check({"speed": 1}) == ["unknown facts: speed"]
    assert "info must hold exactly" in dm.check({"info": {"lock": "x"}})[0]


def test_parse_reads_back_what_render_wrote():
    facts = full_facts()
    assert dm.parse(dm.render(facts)) == facts


def test_parse_drops_foreign_and_damaged_lines():
    text = ("node_load1 3\nsglang_deploy_fused 7\nsglang_deploy_restarts_total abc\n"
            "sglang_deploy_rollbacks_total 2\nsglang_deploy_info{lock=\"x\"} 1\n")
    assert dm.parse(text) == {"rollbacks_total": 2}
    assert dm.parse(None) == {}


def test_count_restarts_counts_only_restart_lines_and_rollbacks_by_their_reason():
    assert dm.count_restarts(RESTARTS_LOG + "garbage\n\n") == (3, 1)
    assert dm.count_restarts(None) == (0, 0)


def test_merge_keeps_unset_facts_and_counters_never_go_down():
    previous = {"fused": 1, "allreduce_path": "fusion-trtllm", "restarts_total": 9, "rollbacks_total": 1}
    # A drift check learns nothing about fusion; a truncated log counts fewer restarts than were made.
    merged = dm.merge(previous, {"fused": None, "restarts_total": 2, "rollbacks_total": 3,
                                 "last_drift_check_timestamp_seconds": 5.0})
    assert merged == {"fused": 1, "allreduce_path": "fusion-trtllm", "restarts_total": 9, "rollbacks_total": 3,
                      "last_drift_check_timestamp_seconds": 5.0}
    assert dm.merge(previous, {"fused": 0})["fused"] == 0


def test_gate_facts_from_a_failed_verdict_and_from_an_older_one_without_accept_length():
    failed = dm.gate_facts(recorded_verdict(passed=False))
    assert failed["gate_passed"] == 0
    assert failed["gate_throughput_tokens_per_second"] == 141.25
    assert failed["gate_baseline_tokens_per_second"] == 82.0
    assert failed["gate_timestamp_seconds"] == 1796639400.0
    assert "gate_accept_length" not in failed and "gate_match_ratio" not in failed
    assert dm.gate_facts(None) == {}


def test_gate_facts_leave_out_figures_that_are_not_finite():
    verdict = json.loads(json.dumps(recorded_verdict(accept_length=3.0)))
    verdict["details"]["verdict"]["median_tok_s"] = None
    verdict["details"]["accept_length"] = True
    facts = dm.gate_facts(verdict)
    assert "gate_throughput_tokens_per_second" not in facts and "gate_accept_length" not in facts


@pytest.mark.parametrize("value, expected", [(12, 12.0), ("1970-01-01T00:01:00+00:00", 60.0),
                                             ("1970-01-01T00:01:00Z", 60.0), ("1970-01-01T00:01:00", None),
                                             ("yesterday", None), (-5, None), (True, None), (math.nan, None)])
def test_timestamps(value, expected):
    assert dm.timestamp(value) == expected


def test_a_later_time_alone_does_not_rewrite_the_file_but_any_other_fact_does():
    before = dm.render(full_facts())
    later = dm.render(dict(full_facts(), last_deploy_timestamp_seconds=1796700000.0,
                           last_drift_check_timestamp_seconds=1796700001.0))
    assert not dm.differs(before, later)
    assert dm.differs(before, dm.render(dict(full_facts(), fused=0)))
    assert dm.differs(before, dm.render(dict(full_facts(), restarts_total=4)))
    assert dm.differs(None, before)
    # A first time where none was recorded is written.
    assert dm.differs(dm.render({"fused": 1}), dm.render({"fused": 1, "last_deploy_timestamp_seconds": 3.0}))


UNIT = "[Service]\nExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --model-path /m --tp-size %s %s\n"


@pytest.mark.parametrize("tp, flags, fused", [
    (8, "--flashinfer-allreduce-fusion-backend trtllm", 1),
    (8, "--enable-flashinfer-allreduce-fusion", 1),
    (1, "--flashinfer-allreduce-fusion-backend trtllm", 0),
    (8, "", 0),
    (8, "--enforce-disable-flashinfer-allreduce-fusion", 0),
])
def test_fused_is_the_proofs_fusion_expected_for_the_unit(tp, flags, fused):
    assert dm.fused_from_unit(UNIT % (tp, flags)) == fused


def test_a_unit_the_proof_cannot_read_is_refused():
    with pytest.raises(dm.MetricsError, match="no ExecStart"):
        dm.fused_from_unit("[Service]\n")


def test_release_info_from_installed_versions():
    versions = {"sglang": ["0.5.17"], "flashinfer-python": ["0.6.18"]}
    assert dm.release_info(versions, "sm120-0.5.17", "6f1c2e0") == {
        "sglang_version": "0.5.17", "flashinfer_version": "0.6.18", "lock": "sm120-0.5.17",
        "model_revision": "6f1c2e0"}
    assert dm.release_info({"sglang": ["0.5.17"]}, "sm120", "rev")["flashinfer_version"] == "none"
    with pytest.raises(dm.MetricsError, match="cannot tell the lock, model_revision"):
        dm.release_info(versions, "", "")
