"""module_utils/scrape_targets.py: file_sd target groups from the inventory's hosts, as Prometheus reads them."""
import json
import subprocess

import pytest
import yaml

from ansible.module_utils import scrape_targets as st
from tests.helpers.promtool import promtool

HOSTS = [{"name": "gpu2", "address": "10.0.0.2", "listen": "0.0.0.0", "port": 30000},
         {"name": "gpu1", "address": "gpu1.example.org", "listen": "127.0.0.1", "port": 30000},
         {"name": "gpu3", "address": "fd00::3", "listen": "::", "port": 31000},
         {"name": "gpu4", "address": "gpu4.example.org", "listen": "192.168.7.4", "port": 30000}]


def test_every_host_is_a_node_target_and_reachable_servers_are_sglang_targets():
    groups = st.targets(HOSTS, "blackwell")
    assert groups["node"] == [
        {"targets": ["10.0.0.2:9100"], "labels": {"host": "gpu2", "group": "blackwell"}},
        {"targets": ["gpu1.example.org:9100"], "labels": {"host": "gpu1", "group": "blackwell"}},
        {"targets": ["[fd00::3]:9100"], "labels": {"host": "gpu3", "group": "blackwell"}},
        {"targets": ["gpu4.example.org:9100"], "labels": {"host": "gpu4", "group": "blackwell"}}]
    # Every interface: the host's address; one address: that one.
    assert [g["targets"] for g in groups["sglang"]] == [["10.0.0.2:30000"], ["[fd00::3]:31000"],
                                                        ["192.168.7.4:30000"]]
    assert groups["loopback"] == ["gpu1"]


def test_render_is_stable_json_sorted_by_host():
    text = st.render(st.targets(HOSTS, "blackwell")["node"])
    assert [g["labels"]["host"] for g in json.loads(text)] == ["gpu1", "gpu2", "gpu3", "gpu4"]
    assert st.render(st.targets(list(reversed(HOSTS)), "blackwell")["node"]) == text


def test_prometheus_loads_the_files(tmp_path):
    # promtool checks a configuration's file_sd files as Prometheus reads them.
    groups = st.targets(HOSTS, "blackwell")
    for job in ("node", "sglang"):
        (tmp_path / ("%s.json" % job)).write_text(st.render(groups[job]))
    config = {"scrape_configs": [{"job_name": job, "file_sd_configs": [{"files": [str(tmp_path / ("%s.json" % job))]}]}
                                 for job in ("node", "sglang")]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run([promtool(), "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "node.json"
    broken.write_text('[{"targets": ["gpu1:9100"], "labels": {"1host": "gpu1"}}]')  # not a label name
    result = subprocess.run([promtool(), "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, check=False)
    assert result.returncode != 0 and "is not a valid label name" in result.stdout + result.stderr


@pytest.mark.parametrize("change, message", [
    ({"address": "gpu 1"}, "not a host name or IP address"),
    ({"address": "a\nb"}, "not a host name or IP address"),
    ({"port": 0}, "port number"),
    ({"port": True}, "port number"),
    ({"port": "30000"}, "port number"),
    ({"name": 'x"y'}, "hosts\\[0\\].name"),
    ({"listen": None}, "listen address"),
    ({"listen": "bad host"}, "listen address"),
])
def test_bad_hosts_are_refused_by_name(change, message):
    with pytest.raises(st.TargetError, match=message):
        st.targets([dict(HOSTS[0], **change)], "blackwell")


def test_a_host_listed_twice_and_a_bad_group_are_refused():
    with pytest.raises(st.TargetError, match="listed twice"):
        st.targets([HOSTS[0], HOSTS[0]], "blackwell")
    with pytest.raises(st.TargetError, match="the group"):
        st.targets(HOSTS, "")


@pytest.mark.parametrize("listen, expected", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                              ("localhost", True), ("0.0.0.0", False), ("10.0.0.2", False),
                                              ("gpu1", False)])
def test_loopback(listen, expected):
    assert st.loopback(listen) is expected


@pytest.mark.parametrize("listen, expected", [("", True), ("0.0.0.0", True), ("::", True), ("[::]", True),
                                              ("::ffff:0.0.0.0", True), ("10.0.0.2", False), ("gpu1", False)])
def test_binds_all(listen, expected):
    assert st.binds_all(listen) is expected
