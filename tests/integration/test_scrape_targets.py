"""sglang_scrape_targets and playbooks/scrape_targets.yml: file_sd files for the deployed group, written once, loaded
by promtool as Prometheus reads them; a loopback-only server named, not targeted."""
import json
import os

import yaml

from tests.helpers.ansible_run import refusal, run_module, run_playbook, failure
from tests.helpers.promtool import run as promtool

HOSTS = [{"name": "gpu1", "address": "10.0.0.1", "listen": "0.0.0.0", "port": 30000},
         {"name": "gpu2", "address": "10.0.0.2", "listen": "127.0.0.1", "port": 30000}]


def test_the_module_writes_both_files_once_and_says_which_servers_are_loopback(tmp_path):
    args = {"dest": str(tmp_path), "group": "blackwell", "hosts": HOSTS}
    dry = run_module("sglang_scrape_targets", args, check=True, diff=True)
    assert dry["changed"] and len(dry["diff"]) == 2 and os.listdir(str(tmp_path)) == []
    first = run_module("sglang_scrape_targets", args)
    assert first["changed"] and first["loopback"] == ["gpu2"]
    assert json.loads((tmp_path / "blackwell-sglang.json").read_text()) == [
        {"labels": {"group": "blackwell", "host": "gpu1"}, "targets": ["10.0.0.1:30000"]}]
    assert len(json.loads((tmp_path / "blackwell-node.json").read_text())) == 2
    assert not run_module("sglang_scrape_targets", args)["changed"]

    config = {"scrape_configs": [{"job_name": job, "file_sd_configs": [{"files": [path]}]}
                                 for job, path in zip(("node", "sglang"), first["files"])]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_bad_hosts_and_a_missing_folder_are_refused(tmp_path):
    bad = [dict(HOSTS[0], address="a b")]
    assert "not a host name" in refusal(run_module("sglang_scrape_targets",
                                                   {"dest": str(tmp_path), "group": "blackwell", "hosts": bad}))
    assert "is not a folder" in refusal(run_module("sglang_scrape_targets", {
        "dest": str(tmp_path / "absent"), "group": "blackwell", "hosts": HOSTS}))
    assert os.listdir(str(tmp_path)) == []


def test_the_playbook_writes_the_inventorys_group_without_contacting_a_host(tmp_path):
    # Hosts no one can reach: the playbook reads the inventory and sglang_server's settings only.
    hosts = {"gpu-a": {"ansible_host": "192.0.2.10", "sglang_server_host": "0.0.0.0",
                       "sglang_server_allow_all_interfaces": True},
             "gpu-b": {"ansible_host": "192.0.2.11"}}
    (tmp_path / "inventory").mkdir()
    inventory = str(tmp_path / "inventory" / "hosts.yml")
    (tmp_path / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts}}))
    # Not where the next -i would read the files as inventory.
    rc, report = run_playbook("playbooks/scrape_targets.yml", {
        "sglang_hosts": "gpu_nodes", "scrape_targets_dir": str(tmp_path / "inventory" / "sd")}, inventory=inventory)
    assert rc != 0 and failure(report, "gpu-a")[0] == "Refuse a folder an inventory would read"
    assert not (tmp_path / "inventory" / "sd").exists()

    rc, report = run_playbook("playbooks/scrape_targets.yml",
                              {"sglang_hosts": "gpu_nodes", "scrape_targets_dir": str(tmp_path / "sd")},
                              inventory=inventory)
    assert rc == 0, failure(report, "gpu-a")
    assert json.loads((tmp_path / "sd" / "gpu_nodes-sglang.json").read_text()) == [
        {"labels": {"group": "gpu_nodes", "host": "gpu-a"}, "targets": ["192.0.2.10:30000"]}]
    assert [g["targets"] for g in json.loads((tmp_path / "sd" / "gpu_nodes-node.json").read_text())] == [
        ["192.0.2.10:9100"], ["192.0.2.11:9100"]]
