"""Per-input digests, the record that keeps them, and the restart decision (module_utils/server_fingerprint.py):
one decision for a real run and a dry run, naming which inputs changed (issue 39)."""
import hashlib
import json
import os

import pytest

from ansible.module_utils import server_fingerprint as sf

NAMES = ["unit", "venv target", "nccl env", "GPU driver"]


@pytest.fixture
def host(tmp_path):
    (tmp_path / "sglang.service").write_text("[Service]\n")
    (tmp_path / "venvs" / "a").mkdir(parents=True)
    (tmp_path / "venvs" / "b").mkdir(parents=True)
    os.symlink(str(tmp_path / "venvs" / "a"), str(tmp_path / "current"))
    (tmp_path / "nccl.env").write_text("NCCL_P2P_LEVEL=SYS\n")
    return [str(tmp_path / "sglang.service"), str(tmp_path / "current"), str(tmp_path / "nccl.env")]


def state(paths, pending=None, extra=("580.1",)):
    """(fingerprint, inputs) as the module computes them."""
    described = sf.apply_pending(paths, sf.describe_all(paths), pending)
    return sf.fingerprint_of(described, list(extra)), sf.input_digests(NAMES, described, list(extra))


def test_the_fingerprint_is_the_one_it_always_was_and_the_inputs_are_its_parts(host, tmp_path):
    value, inputs = state(host)
    assert value == sf.fingerprint(host, ["580.1"])
    assert inputs == {"unit": "sha1:" + hashlib.sha1(b"[Service]\n").hexdigest(),
                      "venv target": "link:" + str(tmp_path / "venvs" / "a"),
                      "nccl env": "sha1:" + hashlib.sha1(b"NCCL_P2P_LEVEL=SYS\n").hexdigest(),
                      "GPU driver": "580.1"}
    os.unlink(host[2])
    assert state(host)[1]["nccl env"] == "-"


def test_the_record_keeps_the_fingerprint_on_its_first_line(host):
    value, inputs = state(host)
    text = sf.render_record(value, inputs)
    assert text.splitlines()[0] == value and text.endswith("\n") and len(text.splitlines()) == 2
    assert sf.parse_record(text) == (value, inputs)
    # A record of an older version: the fingerprint alone. Which input changed is then unknown.
    assert sf.parse_record(value + "\n") == (value, None)
    assert sf.parse_record(value + "\nnot json\n") == (value, None)
    assert sf.parse_record(value + '\n{"inputs": {"unit": 3}}\n') == (value, None)
    assert sf.parse_record(None) == (None, None)


def test_read_recorded_still_gives_the_fingerprint_alone(host, tmp_path):
    value, inputs = state(host)
    record = tmp_path / "deployed-config"
    record.write_text(sf.render_record(value, inputs))
    assert sf.read_recorded(str(record)) == value
    assert sf.read_recorded(str(tmp_path / "none")) is None


def test_nothing_changed_means_no_restart(host):
    value, inputs = state(host)
    assert sf.restart_decision(value, value, inputs, inputs) == {"restart": False, "changed_inputs": [],
                                                                 "reasons": []}


def test_the_changed_inputs_are_named(host, tmp_path):
    value, inputs = state(host)
    with open(host[2], "a") as handle:
        handle.write("NCCL_ALGO=Ring\n")
    now, now_inputs = state(host, extra=("590.2",))
    decision = sf.restart_decision(now, value, now_inputs, inputs)
    assert decision["restart"] and decision["changed_inputs"] == ["nccl env", "GPU driver"]
    assert decision["reasons"] == ["changed: nccl env, GPU driver"]


def test_an_old_record_says_it_does_not_know_which_input(host):
    value, inputs = state(host)
    decision = sf.restart_decision("0" * 64, value, inputs, None)
    assert decision["restart"] and decision["changed_inputs"] is None
    assert decision["reasons"] == ["its fingerprint changed (unknown which input: the record predates per-input "
                                   "digests)"]
    # ... and an old record that matches restarts nothing.
    assert sf.restart_decision(value, value, inputs, None) == {"restart": False, "changed_inputs": [],
                                                               "reasons": []}


def test_no_record_an_inactive_unit_and_a_rewritten_unit_restart(host):
    value, inputs = state(host)
    assert sf.restart_decision(value, None, inputs, None)["reasons"] == ["no proven start recorded"]
    assert sf.restart_decision(value, value, inputs, inputs, "failed")["reasons"] == ["not active (failed)"]
    rewritten = sf.restart_decision(value, value, inputs, inputs, rewritten=["unit"])
    assert rewritten["restart"] and rewritten["reasons"] == ["unit rewritten"]


def test_a_dry_run_decides_on_the_files_as_the_deploy_will_leave_them(host, tmp_path):
    """The NCCL env-file tamper of issue 39: the deploy puts the file back, the running server started with it."""
    good = (tmp_path / "nccl.env").read_bytes()
    value, inputs = state(host)
    (tmp_path / "nccl.env").write_text("NCCL_P2P_LEVEL=SYS\nNCCL_ALGO=Ring\n")
    tampered_value, _ = state(host)
    assert tampered_value != value  # what the files hold now
    pending = {host[2]: "sha1:" + hashlib.sha1(good).hexdigest()}  # what nccl_tuning would write back
    predicted, predicted_inputs = state(host, pending)
    assert sf.restart_decision(predicted, value, predicted_inputs, inputs)["restart"] is False
    # A pending write of other content, a removal, an unknown content: each restarts, naming the input.
    for other in ("sha1:" + "0" * 40, "absent", "changes"):
        changed, changed_inputs = state(host, {host[2]: other})
        assert sf.restart_decision(changed, value, changed_inputs, inputs)["changed_inputs"] == ["nccl env"]


def test_pending_links_and_likes(host, tmp_path):
    value, inputs = state(host)
    switched, switched_inputs = state(host, {host[1]: "link:" + str(tmp_path / "venvs" / "b")})
    assert sf.restart_decision(switched, value, switched_inputs, inputs)["changed_inputs"] == ["venv target"]
    back, back_inputs = state(host, {host[1]: "link:" + str(tmp_path / "venvs" / "a")})
    assert back == value
    (tmp_path / "other.env").write_bytes((tmp_path / "nccl.env").read_bytes())
    os.unlink(host[2])
    like, _ = state(host, {host[2]: "like:" + str(tmp_path / "other.env")})
    assert like == value
    # A pending entry for a path that is not an input changes nothing.
    assert state(host, {"/etc/sglang/elsewhere.env": "absent"})[0] == sf.fingerprint(host, ["580.1"])


def test_pending_content_of_a_secret_file_is_keyed_as_the_file_would_be(tmp_path):
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "hunter2"\n')
    salt = sf.new_salt()
    paths = [str(options)]
    on_disk = sf.describe_all(paths, paths, salt)
    options.write_text('api-key: "tampered"\n')
    pending = sf.apply_pending(paths, sf.describe_all(paths, paths, salt), None,
                               {str(options): 'api-key: "hunter2"\n'}, paths, salt)
    assert pending == on_disk and pending[0][0].startswith("hmac-sha256:")


@pytest.mark.parametrize("value", ["sha1:abc", "link:", "like:relative", "present", 3, "SHA1:" + "0" * 40])
def test_pending_values_of_no_known_form_are_named(value):
    found = sf.pending_problems(["/x"], {"/x": value})
    assert len(found) == 1 and "pending[/x]" in found[0] and repr(value) in found[0]


def test_pending_forms_are_accepted_and_a_path_pending_twice_is_refused():
    good = {"/a": "sha1:" + "a" * 40, "/b": "link:/opt/v", "/c": "like:/opt/v/x", "/d": "absent", "/e": "changes"}
    assert sf.pending_problems(list(good), good) == []
    assert sf.pending_problems(["/a"], {"/a": "absent"}, {"/a": "text"}) == [
        "/a is in both pending and pending_content"]


def test_names_must_name_every_input_once():
    assert sf.name_problems(["a", "b"], ["/x"], ["1"]) == []
    assert "2 name(s)" not in " ".join(sf.name_problems(["a", "b"], ["/x"], ["1"]))
    assert "1 path(s) and 1 extra value(s), 1 name(s)" in sf.name_problems(["a"], ["/x"], ["1"])[0]
    assert sf.name_problems(["a", "a"], ["/x"], ["1"]) == ["names must differ; given more than once: a"]
    assert sf.default_names(["/x"], ["1"]) == ["/x", "extra[0]"]


def test_the_inputs_line_is_one_line_of_json_whatever_a_link_holds(tmp_path):
    link = os.path.join(os.fsencode(str(tmp_path)), b"current")
    os.symlink(b"venvs/\xff\nx", link)
    paths = [os.fsdecode(link)]
    described = sf.describe_all(paths)
    text = sf.render_record(sf.fingerprint_of(described, []), sf.input_digests(["venv target"], described, []))
    assert len(text.splitlines()) == 2
    assert json.loads(text.splitlines()[1])["inputs"]["venv target"] == "link:venvs/\\xff\nx"
