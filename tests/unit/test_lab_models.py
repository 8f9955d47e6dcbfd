"""The lab gets its models through the sglang_model role: the inventory pins what the lab's mirror and hub stand-in
serve, and the server loads each model through its current link in sglang_model's default models directory."""
import os
import re
import shutil
import subprocess

import yaml

from ansible.module_utils import model_manifest as mm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as handle:
        return handle.read()


def test_the_inventory_pins_what_the_mirror_and_the_hub_serve_and_serves_them_through_the_current_links():
    env = read("lab", "env.sh")
    served = re.search(r"^export LAB_MODEL_REVISION=(\S+)$", env, re.M).group(1)
    commit = re.search(r"^export LAB_DRAFT_COMMIT=([0-9a-f]{40})$", env, re.M).group(1)
    lab = yaml.safe_load(read("inventories", "lab", "group_vars", "blackwell.yml"))
    models = {model["name"]: model for model in lab["sglang_model_models"]}
    assert set(models) == set(re.search(r"for model in ([^;]+);", read("lab", "install-standins.sh")).group(1).split())
    layout = yaml.safe_load(read("roles", "sglang_layout", "defaults", "main.yml"))
    store = yaml.safe_load(read("roles", "sglang_model", "defaults", "main.yml"))["sglang_model_dir"].replace(
        "{{ sglang_layout_models_dir }}", layout["sglang_layout_models_dir"])
    target, draft = models["kimi-k2.5-standin"], models["kimi-k2.5-eagle3-standin"]
    assert target["revision"] == served
    assert target["source"] == {"type": "http", "url": "http://127.0.0.1:8090/kimi-k2.5-standin/%s" % served}
    assert draft["revision"] == commit
    unit = read("lab", "standins", "lab-hf-hub.service")
    assert "--repo %s " % draft["source"]["repo"] in unit and "--token-file %s " % draft["source"]["token_file"] in unit
    assert draft["source"]["endpoint"] == "http://127.0.0.1:%s" % re.search(r"--ports (\d+) ", unit).group(1)
    assert lab["sglang_server_model_path"] == "%s/kimi-k2.5-standin/current" % store
    assert lab["sglang_server_draft_model_path"] == "%s/kimi-k2.5-eagle3-standin/current" % store


def test_lab_gpu2_copies_the_same_revisions_from_lab_gpu1_over_ssh():
    group = yaml.safe_load(read("inventories", "lab", "group_vars", "blackwell.yml"))["sglang_model_models"]
    peer = yaml.safe_load(read("inventories", "lab", "host_vars", "lab-gpu2.yml"))["sglang_model_models"]
    assert [(m["name"], m["revision"]) for m in peer] == [(m["name"], m["revision"]) for m in group]
    assert all(m["source"] == {"type": "peer", "host": "lab-gpu1"} for m in peer)
    hosts = yaml.safe_load(read("inventories", "lab", "hosts.yml"))["lab"]
    assert "lab-gpu1" in hosts["children"]["blackwell"]["hosts"]
    assert hosts["vars"]["sglang_model_peer_address"] == "{{ inventory_hostname }}"


def test_the_lab_writes_its_manifests_with_the_modules_code_and_the_fetch_reads_them(tmp_path):
    function = re.search(r"^write_manifest\(\) \{.*?^\}$", read("lab", "install-standins.sh"), re.M | re.S).group(0)
    assert "model_manifest_writer.make(" in function
    source = os.path.join(REPO, "lab", "models", "kimi-k2.5-standin")
    served, staged = str(tmp_path / "served"), str(tmp_path / "staged")
    shutil.copytree(source, served)
    shutil.copytree(source, staged)
    subprocess.run(["bash", "-c", function + '\nwrite_manifest "$1" "$1/manifest.json"\nwrite_manifest "$2" "$2.json"',
                    "write_manifest", served, staged], env=dict(os.environ, LAB_ROOT=REPO), check=True)
    for folder, manifest in ((served, os.path.join(served, "manifest.json")), (staged, staged + ".json")):
        with open(manifest, "rb") as handle:
            files = mm.parse_manifest(handle.read(), manifest)
        assert [entry["name"] for entry in files] == sorted(os.listdir(source))
        assert mm.verify_dir(folder, files, "full") == []
