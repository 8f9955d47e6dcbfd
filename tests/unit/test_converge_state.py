"""The fast path's record and comparison (module_utils/converge_state.py): every difference a full run would act on
is named, and a host as its converge left it matches."""
import json
import os
import shutil

import pytest

from module_utils import converge_state as cs

XML = """<nvidia_smi_log><driver_version>{driver}</driver_version><cuda_version>13.0</cuda_version>
<attached_gpus>1</attached_gpus><gpu id="00000000:01:00.0"><product_name>NVIDIA RTX PRO 6000</product_name>
<uuid>GPU-1</uuid><pci><pci_bus_id>00000000:01:00.0</pci_bus_id></pci><fb_memory_usage><total>97887 MiB</total>
</fb_memory_usage><temperature><gpu_temp>{temp} C</gpu_temp></temperature></gpu></nvidia_smi_log>"""


class Host:
    """A host under tmp_path: files, a venv listing, a fusion record, one unit, the GPUs and a health URL."""

    def __init__(self, root):
        self.root = root
        self.driver, self.temp, self.health = "580.105.08", 40, 200
        self.unit = {"ActiveState": "active", "UnitFileState": "enabled", "MainPID": "100",
                     "ExecMainStartTimestampMonotonic": "5", "NeedDaemonReload": "no",
                     "FragmentPath": "/etc/systemd/system/sglang.service", "DropInPaths": ""}
        self.site = root / "venv" / "lib" / "python3.11" / "site-packages"
        self.site.mkdir(parents=True)
        for name in ("sglang-0.5.21.dist-info", "flashinfer_python-0.6.18.dist-info", "torch"):
            (self.site / name).mkdir()
        (root / "runtime.env").write_text("HOME=/var/lib/sglang\n")
        (self.site / "sglang_nccl_env.py").write_text("import os\n")
        (root / "venv" / ".sglang-fusion-patch").mkdir()
        (self.site / "patched.py").write_text("SM120 = True\n")
        (root / "venv" / ".sglang-fusion-patch" / "state.json").write_text(
            json.dumps({"files": {"patched.py": {}}, "version": 1}))  # relative to site-packages
        self.covers = {
            "install": {"files": [str(root / "runtime.env")],
                        "listings": [{"path": str(root / "venv/lib/python3*/site-packages"), "glob": "*.dist-info"}]},
            "nccl": {"files": [str(root / "venv/lib/python3*/site-packages/sglang_nccl_env*")]},
            "fusion_patch": {"fusion_states": [str(root / "venv/.sglang-fusion-patch/state.json")]},
            "server": {"units": ["sglang"], "http": [{"url": "http://127.0.0.1:30000/health_generate"}]},
            "preflight": {"gpu": True},
        }
        self.inputs = {name: {"var %s_x" % name: "d1", "role %s" % name: "c1"} for name in self.covers}

    def run(self, argv):
        if argv[0] == "systemctl":
            return 0, "".join("%s=%s\n" % item for item in self.unit.items()), ""
        return 0, XML.format(driver=self.driver, temp=self.temp), ""

    def fetch(self, url, key_file):
        return self.health

    def observe(self, covers=None):
        from module_utils import nvidia_smi
        return cs.observe(covers or self.covers, self.run, self.fetch, nvidia_smi.parse_query_xml)

    def record(self):
        return cs.parse(cs.render(self.inputs, self.covers, self.observe()))

    def differences(self, recorded, inputs=None):
        return cs.compare(recorded, inputs or self.inputs, self.observe(cs.covers_of(recorded)))


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


def changed(differences):
    return {name: lines for name, lines in differences.items() if lines}


def test_a_host_as_its_converge_left_it_matches_though_its_gpus_run_warmer(host):
    recorded = host.record()
    host.temp = 80
    assert changed(host.differences(recorded)) == {}
    assert cs.render(host.inputs, host.covers, host.observe()) == cs.render(host.inputs, host.covers, host.observe())


def test_no_record_sends_every_capability_down_the_full_path(host):
    assert changed(host.differences(None)) == {"record": ["no converge record on the host"]}


def test_an_input_of_another_value_is_named_in_its_capability_only(host):
    recorded = host.record()
    inputs = dict(host.inputs, nccl=dict(host.inputs["nccl"], **{"var nccl_x": "d2"}))
    assert changed(host.differences(recorded, inputs)) == {"nccl": ["input var nccl_x changed"]}


def test_an_input_added_or_gone_and_new_code_are_named(host):
    recorded = host.record()
    inputs = {name: dict(entry) for name, entry in host.inputs.items()}
    inputs["server"]["var server_y"] = "d"
    del inputs["install"]["var install_x"]
    inputs["preflight"]["role preflight"] = "c2"
    assert changed(host.differences(recorded, inputs)) == {
        "server": ["input var server_y is new since the converge"],
        "install": ["input var install_x is gone since the converge"],
        "preflight": ["input role preflight changed"]}


def test_a_capability_no_longer_deployed_or_not_recorded_differs(host):
    recorded = host.record()
    inputs = {name: entry for name, entry in host.inputs.items() if name != "nccl"}
    inputs["model"] = {}
    assert changed(host.differences(recorded, inputs)) == {
        "nccl": ["recorded, but no longer deployed"], "model": ["not in the converge record"]}


def test_an_edited_file_and_a_changed_mode_are_named(host):
    recorded = host.record()
    with open(host.root / "runtime.env", "a") as handle:
        handle.write("HF_HUB_OFFLINE=0\n")
    hook = host.site / "sglang_nccl_env.py"
    os.chmod(str(hook), 0o600)
    found = changed(host.differences(recorded))
    assert found == {"install": ["file %s: content differs from its converge" % (host.root / "runtime.env")],
                     "nccl": ["file %s: mode or owner differs from its converge" % hook]}


def test_a_downgraded_package_names_the_dist_info_added_and_gone(host):
    recorded = host.record()
    os.rename(str(host.site / "flashinfer_python-0.6.18.dist-info"), str(host.site / "flashinfer_python-0.6.17.dist-info"))
    (found,) = changed(host.differences(recorded))["install"]
    assert "+flashinfer_python-0.6.17.dist-info" in found and "-flashinfer_python-0.6.18.dist-info" in found


def test_a_file_a_glob_newly_matches_is_named(host):
    recorded = host.record()
    (host.site / "sglang_nccl_env.pth").write_text("import sglang_nccl_env\n")
    found = changed(host.differences(recorded))["nccl"]
    assert any(line.startswith("file %s is new since the converge" % (host.site / "sglang_nccl_env.pth")) for line in found)


def test_a_patched_file_the_fusion_record_lists_is_watched(host):
    recorded = host.record()
    (host.site / "patched.py").write_text("SM120 = False\n")  # a reinstall over the patch
    assert changed(host.differences(recorded)) == {
        "fusion_patch": ["file %s: content differs from its converge" % (host.site / "patched.py")]}


def test_a_stopped_or_restarted_server_and_a_failing_health_check_are_named(host):
    recorded = host.record()
    host.unit["MainPID"] = "200"
    host.health = 503
    found = changed(host.differences(recorded))["server"]
    assert len(found) == 2 and "MainPID=100" in found[1 if found[0].startswith("http") else 0]
    assert any(line.startswith("http http://127.0.0.1:30000/health_generate: 200 at the converge, 503 now")
               for line in found)


def test_a_driver_upgrade_names_both_versions(host):
    recorded = host.record()
    host.driver = "580.126.09"
    assert changed(host.differences(recorded)) == {"preflight": ["gpu: driver_version 580.105.08 -> 580.126.09"]}


def test_a_current_link_switched_is_named(host, tmp_path):
    os.symlink(str(tmp_path / "venv"), str(tmp_path / "current"))
    host.covers["install"]["files"].append(str(tmp_path / "current"))
    recorded = host.record()
    os.unlink(str(tmp_path / "current"))
    os.symlink(str(tmp_path / "other"), str(tmp_path / "current"))
    assert changed(host.differences(recorded)) == {"install": [
        "file %s: link to %s at the converge, link to %s now" % (tmp_path / "current", tmp_path / "venv",
                                                                 tmp_path / "other")]}


def test_a_model_file_truncated_removed_or_added_is_named_without_reading_it(host, tmp_path):
    revision = tmp_path / "models" / "m" / "r1"
    (revision / "sub").mkdir(parents=True)
    for name, size in (("config.json", 2), ("model-1.safetensors", 5000), ("sub/model-2.safetensors", 7000)):
        (revision / name).write_bytes(b"x" * size)
    host.covers["model"] = {"sizes": [str(revision)]}
    host.inputs["model"] = {"var sglang_model_models": "d1"}
    recorded = host.record()
    assert recorded["model"]["observed"]["sizes %s" % revision]["sub/model-2.safetensors"] == 7000
    (revision / "model-1.safetensors").write_bytes(b"y" * 5000)  # same size: left to the scheduled hash
    assert changed(host.differences(recorded)) == {}
    os.truncate(str(revision / "sub" / "model-2.safetensors"), 100)
    (revision / "config.json").unlink()
    (revision / "extra.bin").write_bytes(b"")
    assert changed(host.differences(recorded)) == {"model": [
        "sizes %s: config.json gone; extra.bin is new; sub/model-2.safetensors 7000 -> 100 bytes" % revision]}
    shutil.rmtree(str(revision))
    assert changed(host.differences(recorded)) == {"model": [
        "sizes %s: 3 files at the converge, missing now" % revision]}


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON"), ('{"version": 9, "capabilities": {}}', "not version 1"), ("[]", "not version 1")])
def test_a_record_it_cannot_read_says_so(text, message):
    with pytest.raises(cs.StateError, match=message):
        cs.parse(text)


@pytest.mark.parametrize("covers, problem", [
    ([], "must be a mapping of capability"),
    ({"x": {"sockets": []}}, "covers.x.sockets: unknown"),
    ({"x": {"files": ["relative"]}}, "absolute paths"),
    ({"x": {"files": "/etc/x"}}, "list of non-empty strings"),
    ({"x": {"http": [{"url": "ftp://x"}]}}, "http(s) url"),
    ({"x": {"gpu": "yes"}}, "true or false"),
    ({"x": {"listings": [{"glob": "*"}]}}, "absolute path"),
])
def test_covers_it_cannot_observe_are_refused(covers, problem):
    assert any(problem in line for line in cs.cover_problems(covers))


def test_a_secret_is_never_hashed_but_a_rotation_is_seen(host, tmp_path):
    key = tmp_path / "api-key"
    key.write_text("s3cret-key-value\n")
    host.covers["server"]["secrets"] = [str(key)]
    text = cs.render(host.inputs, host.covers, host.observe())
    import hashlib
    assert hashlib.sha256(key.read_bytes()).hexdigest() not in text and "s3cret" not in text
    recorded = cs.parse(text)
    key.unlink()
    key.write_text("rotated-key-value\n")
    assert changed(host.differences(recorded)) == {"server": [
        line for line in host.differences(recorded)["server"] if line.startswith("secret %s:" % key)]}
    assert host.differences(recorded)["server"]


def test_ignored_inputs_are_left_out_on_both_sides(host):
    recorded = host.record()
    inputs = {name: dict(entry) for name, entry in host.inputs.items()}
    inputs["install"]["var install_x"] = "d9"
    del inputs["nccl"]["role nccl"]
    assert changed(cs.compare(recorded, inputs, host.observe(cs.covers_of(recorded)),
                              ignore=("var install_x", "role nccl"))) == {}


def test_a_kind_left_out_is_neither_asked_again_nor_compared_and_the_rest_still_is(host):
    recorded = host.record()
    host.health = 503
    asked = []
    host.fetch = lambda url, key_file: asked.append(url) or 503
    covers = cs.covers_of(recorded, ("http",))
    assert "http" not in covers["server"] and covers["server"]["units"] == ["sglang"]
    assert changed(cs.compare(recorded, host.inputs, host.observe(covers), ignore_covers=("http",))) == {}
    assert asked == []
    host.unit["MainPID"] = "200"  # the unit is still compared
    found = changed(cs.compare(recorded, host.inputs, host.observe(covers), ignore_covers=("http",)))
    assert list(found) == ["server"] and all(not line.startswith("http") for line in found["server"])
