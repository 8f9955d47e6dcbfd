"""The alert rules against what sglang_deploy_metrics really writes: a host deployed fused, then deployed again
after its fusion canary failed and its gate rolled it back. The two textfiles, as node_exporter would expose them
one after the other, are the input series of a promtool rule test: SGLangFusionLost and SGLangGateRolledBack fire
on the second, nothing on the first."""
import os
import re

import yaml

from tests.helpers.ansible_run import run_module
from tests.helpers.promtool import run as promtool
from tests.integration.test_deploy_metrics_module import LINE, host_files, records

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "monitoring", "prometheus", "sglang-alerts.yml")
SAMPLE = re.compile(r"^(sglang_deploy_[a-z_]+) (\S+)$")  # the unlabelled series


def samples(text):
    return {m.group(1): m.group(2) for line in text.splitlines() for m in [SAMPLE.match(line)] if m}


def test_a_fusion_rollback_deploy_fires_fusion_lost_and_gate_rolled_back(tmp_path):
    args = dict(records(tmp_path), **host_files(tmp_path))
    with open(args["restarts_log"], "w") as log:
        log.write(LINE % (1, "deploy"))
    assert not run_module("sglang_deploy_metrics", args).get("failed")
    before = samples(open(args["path"]).read())

    # The next deploy: the canary failed (the unit keeps fusion off) and the gate rolled the host back.
    with open(args["unit_file"], "w") as unit:
        unit.write("[Service]\nExecStart=/x --tp-size 2 --enforce-disable-flashinfer-allreduce-fusion\n")
    with open(args["restarts_log"], "a") as log:
        log.write(LINE % (2, "deploy") + LINE % (3, "rollback"))
    assert run_module("sglang_deploy_metrics", args)["changed"]
    after = samples(open(args["path"]).read())
    assert (before["sglang_deploy_fused"], after["sglang_deploy_fused"]) == ("1", "0")
    assert (before["sglang_deploy_rollbacks_total"], after["sglang_deploy_rollbacks_total"]) == ("0", "1")

    labels = '{instance="gpu1:9100", job="node"}'
    series = [{"series": name + labels, "values": "%sx30 %sx30" % (before[name], after[name])}
              for name in sorted(set(before) & set(after))]
    labels_of = {"severity": "warning", "instance": "gpu1:9100", "job": "node"}
    cases = [{"eval_time": "20m", "alertname": name, "exp_alerts": []}
             for name in ("SGLangFusionLost", "SGLangGateRolledBack")]
    fusion_lost = {"summary": "gpu1:9100 no longer runs the fused all-reduce",
                   "description": "The last deploy's proof found the server unfused on a host that ran fused in the "
                                  "last 7 days."}
    rolled_back = {"summary": "The benchmark gate rolled gpu1:9100 back",
                   "description": "1 rollback restart(s) in the last day: a deploy was slower than its baseline or "
                                  "incorrect."}
    cases += [{"eval_time": "50m", "alertname": name,
               "exp_alerts": [{"exp_labels": labels_of, "exp_annotations": annotations}]}
              for name, annotations in (("SGLangFusionLost", fusion_lost), ("SGLangGateRolledBack", rolled_back))]
    test = {"rule_files": [RULES], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": cases}]}
    (tmp_path / "from-textfiles.test.yml").write_text(yaml.safe_dump(test))
    result = promtool("test", "rules", "from-textfiles.test.yml", cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
