"""sglang_converge_state end to end on this machine (its action plugin digests the inputs, the module records and
compares): a record written, a host that matches, a change named and the stale record removed only outside check
mode, a bad cover refused with a message. The comparison runs both ways: without the module wrapper where the
connection pipelines (the interpreter named, or left to discovery), as a module where it does not or under Mitogen's
strategy; the answers are the same."""
import os
import stat
import subprocess

import pytest

from tests.helpers.ansible_run import REPO, run_module

TABLE = {"install": {"prefixes": ["sglang_install_"], "roles": ["sglang_install"]}}


def _mitogen():
    """The environment that runs Ansible under Mitogen's strategy (lab/mitogen.sh installs the pinned Mitogen)."""
    done = subprocess.run([os.path.join(REPO, "lab", "mitogen.sh")], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip("Mitogen could not be installed: %s" % done.stderr.strip()[-300:])
    return {"ANSIBLE_STRATEGY_PLUGINS": done.stdout.strip(), "ANSIBLE_STRATEGY": "mitogen_linear"}


@pytest.mark.parametrize("how", ["pipelining", "discovery", "module", "mitogen"])
def test_record_match_differ_forget(tmp_path, how):
    env = {"ANSIBLE_PIPELINING": str(how != "module")}
    if how == "mitogen":  # it replaces Ansible's module machinery: the module runs, its own way
        env.update(_mitogen())
    # localhost's Python is named (Ansible's own); "auto" leaves it to discovery, which the probe makes on its own.
    # The system's PATH: this machine's also has pyenv's shims, which answer `command -v` for versions not installed
    # (Ansible's own discovery would pick them as well).
    extra_vars = None
    if how == "discovery":
        extra_vars = {"ansible_python_interpreter": "auto_silent"}
        env["PATH"] = "/usr/local/bin:/usr/bin:/bin"

    def compare(module_args, check=False):
        result = run_module("sglang_converge_state", module_args, check=check, env=env, extra_vars=extra_vars)
        # a module's result carries its invocation; the comparison run without the wrapper has none
        assert ("invocation" in result) is (how not in ("pipelining", "discovery")), result
        return result

    env_file, record = tmp_path / "runtime.env", str(tmp_path / "converged.json")
    env_file.write_text("HOME=/var/lib/sglang\n")
    args = {"record": record, "capabilities": TABLE}
    # This machine has no nvidia-smi: what the host lacks is an observation, not a failure.
    covers = {"install": {"files": [str(env_file)], "gpu": True}}

    written = run_module("sglang_converge_state", dict(args, mode="record", covers=covers))
    assert written["changed"] and not written.get("failed"), written
    assert stat.S_IMODE(os.stat(record).st_mode) == 0o600
    again = run_module("sglang_converge_state", dict(args, mode="record", covers=covers))
    assert again["changed"] is False, again

    same = compare(dict(args, forget=True))
    assert same["matched"] and same["changed"] is False and same["differences"]["install"] == [], same

    env_file.write_text("HOME=/var/lib/sglang\nHF_HUB_OFFLINE=0\n")
    dry = compare(dict(args, forget=True), check=True)
    assert not dry["matched"] and dry["forgotten"] and os.path.exists(record), dry
    assert dry["differences"]["install"] == ["file %s: content differs from its converge" % env_file]
    real = compare(dict(args, forget=True))
    assert real["changed"] and real["forgotten"] and not os.path.exists(record), real

    none = compare(args)
    assert none["differences"] == {"record": ["no converge record on the host"]} and not none["changed"], none


def test_a_cover_it_cannot_observe_is_refused_with_its_name(tmp_path):
    result = run_module("sglang_converge_state", {"record": str(tmp_path / "r.json"), "mode": "record",
                                                  "capabilities": TABLE, "covers": {"install": {"files": ["rel"]}}})
    assert result.get("failed") and "covers.install.files must hold absolute paths" in result["msg"], result
    assert not os.path.exists(str(tmp_path / "r.json"))
