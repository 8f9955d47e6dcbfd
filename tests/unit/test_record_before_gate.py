"""A deploy that fails at its benchmark gate keeps a record of what converged before it (playbooks/plays/
converge_record.yml writes it through filter sglang_fast_path_without): the next comparison finds the gate not
recorded (the host goes down the full path, through the gate again) and the rest as it was, so that run installs
and fetches nothing it need not; what the gate's rollback changed differs again; a record written in full matches."""
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible.module_utils import deploy_preflight as dp
from module_utils import converge_state as cs
from tests.helpers.script_module import load_file

fast_path = load_file("filter_plugins/sglang_fast_path.py", "sglang_fast_path_filters")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


TABLE = load("roles/sglang_fast_path/vars/main.yml")["__sglang_fast_path_capabilities"]
BEFORE_GATE_WITHOUT = load("playbooks/plays/converge_record.yml")[0]["vars"]["__deploy_record_before_gate_without"]


def test_the_record_before_the_gate_leaves_out_the_gate_and_what_is_published_after_it():
    assert BEFORE_GATE_WITHOUT == ["benchmark", "metrics"]
    kept = fast_path.sglang_fast_path_without(TABLE, BEFORE_GATE_WITHOUT)
    assert set(kept) == set(TABLE) - {"benchmark", "metrics"}
    assert {"install", "model", "server", "nccl"} <= set(kept)


def test_a_capability_name_that_is_not_one_is_refused_not_recorded():
    with pytest.raises(AnsibleFilterError, match="benchmarks is none of the capabilities"):
        fast_path.sglang_fast_path_without(TABLE, ["benchmarks"])
    with pytest.raises(AnsibleFilterError, match="must be a list"):
        fast_path.sglang_fast_path_without(TABLE, "benchmark")
    # The covers hold no entry for some capabilities (metrics): left out where present, refused nowhere.
    assert fast_path.sglang_fast_path_without({"install": 1, "benchmark": 2}, ["benchmark", "metrics"], False) == {
        "install": 1}


class Host:
    """A host's files under tmp_path: the venv link's target (install), a model file (model), the gate's verdict."""

    def __init__(self, root):
        self.root = root
        (root / "model").mkdir()
        for name, text in (("current", "venv-a"), ("model/model.safetensors", "w" * 64), ("verdict.json", "{}")):
            (root / name).write_text(text)
        self.covers = {"install": {"files": [str(root / "current")]},
                       "model": {"sizes": [str(root / "model")]},
                       "benchmark": {"files": [str(root / "verdict.json")]}}
        self.inputs = {name: {"var %s_x" % name: "d1", "role %s" % name: "c1"} for name in TABLE}
        self.inputs["code"] = {"code library": "c1", "tags": "t"}

    def observe(self, covers):
        return cs.observe(covers, lambda argv: (1, "", "not asked"), lambda url, key: 0, None)

    def record(self, without=()):
        inputs = fast_path.sglang_fast_path_without(dict(self.inputs), list(without), False)
        covers = fast_path.sglang_fast_path_without(self.covers, list(without), False)
        return cs.parse(cs.render(inputs, covers, self.observe(covers)))

    def comparison(self, recorded):
        differences = cs.compare(recorded, self.inputs, self.observe(cs.covers_of(recorded)))
        return {"matched": not any(differences.values()), "differences": differences}


def test_after_a_failed_gate_the_gate_runs_again_and_nothing_is_installed_or_fetched(tmp_path):
    host = Host(tmp_path)
    comparison = host.comparison(host.record(BEFORE_GATE_WITHOUT))
    assert comparison["matched"] is False
    assert {name: lines for name, lines in comparison["differences"].items() if lines} == {
        "benchmark": ["not in the converge record"], "metrics": ["not in the converge record"]}
    assert dp.installs(comparison) == (
        False, "install, model and code as the last converge left them: nothing to install or fetch")
    hostvars = {"gpu-a": {"sglang_fast_path_comparison": comparison}}
    assert fast_path.sglang_fast_path_converged(["gpu-a"], hostvars) == []
    assert fast_path.sglang_fast_path_summary(["gpu-a"], hostvars) == [
        "full path on gpu-a: benchmark: not in the converge record | metrics: not in the converge record"]


def test_what_the_gates_rollback_changed_differs_again(tmp_path):
    host = Host(tmp_path)
    recorded = host.record(BEFORE_GATE_WITHOUT)
    (tmp_path / "current").write_text("venv-previous")  # the rollback put the known-good venv back
    comparison = host.comparison(recorded)
    assert comparison["differences"]["install"] == ["file %s: content differs from its converge" % (
        tmp_path / "current")]
    assert dp.installs(comparison) == (True, "changed since the last converge: install")


def test_a_record_written_in_full_after_the_gate_matches(tmp_path):
    host = Host(tmp_path)
    assert host.comparison(host.record())["matched"] is True
