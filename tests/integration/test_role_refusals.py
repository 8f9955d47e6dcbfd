"""Hostile values for the roles that render units, EnvironmentFiles and hooks: each refused by the role's first
check, with the variable and the rule named, before anything is written (the tree is compared before and after)."""
import os

import pytest

from tests.helpers.ansible_run import failure, run_playbook

PLAYBOOK = "tests/playbooks/role_local.yml"
SERVICE = "sglang-refusal-test"


def snapshot(*roots):
    found = {}
    for root in roots:
        if os.path.isfile(root):
            found[root] = open(root, "rb").read()
        for directory, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                found[path] = open(path, "rb").read()
    return found


def refused(tmp_path, role, variables):
    watched = [str(tmp_path), "/etc/systemd/system", "/usr/local/bin", "/usr/local/libexec"]
    before = snapshot(*watched)
    rc, report = run_playbook(PLAYBOOK, dict(variables, test_role=role))
    assert rc != 0
    task, msg = failure(report)
    assert snapshot(*watched) == before
    assert "Traceback" not in msg
    return task, msg


def server_vars(tmp_path, **overrides):
    base = {"sglang_server_service": SERVICE, "sglang_server_model_path": "/srv/models/m",
            "sglang_server_venv": str(tmp_path / "venv"), "sglang_server_home": str(tmp_path / "home"),
            "sglang_layout_env_dir": str(tmp_path / "etc")}
    base.update(overrides)
    return base


@pytest.mark.parametrize("name,value,rule", [
    ("sglang_server_served_model_name", "kimi\nExecStartPre=+/bin/sh -c id", "newline"),
    ("sglang_server_host", "127.0.0.1\nExecStartPre=+/bin/id", "newline"),
    ("sglang_server_host", "0.0.0.0 --api-key x", "host name or an IP"),
    ("sglang_server_model_path", "/srv/models/my model", "whitespace"),
    ("sglang_server_model_path", "/srv/models/../../etc", "normalized"),
    ("sglang_server_model_path", "srv/models/m", "absolute"),
    ("sglang_server_draft_model_path", "/srv/models/d\n[Service]", "newline"),
    ("sglang_server_extra_args", ["--chat-template=%h/x"], "specifier"),
    ("sglang_server_extra_args", ["--log-level=${LEVEL}"], "expansion"),
    ("sglang_server_extra_args", [";"], "command separator"),
    ("sglang_server_extra_args", ["--x", "a b"], "whitespace"),
    ("sglang_server_entrypoint", ["-m", "sglang.launch_server\nUser=root"], "newline"),
    ("sglang_server_environment_files", ["-/etc/sglang/nccl.env\nEnvironmentFile=/tmp/x"], "newline"),
    ("sglang_server_environment_files", ["etc/sglang/x.env"], "absolute"),
    ("sglang_server_service", "sglang/../x", "unit name"),
    ("sglang_server_user", "sglang\nUser=root", "newline"),
    ("sglang_server_port", 70000, "from 1 to 65535"),
    ("sglang_server_tp_size", 0, "from 1"),
    ("sglang_server_api_key_file", "/etc/sglang/key file", "whitespace"),
    ("sglang_server_device_allow", ["/dev/sda rw\nDevicePolicy=auto"], "newline"),
])
def test_sglang_server_refuses_unit_injection(tmp_path, name, value, rule):
    task, msg = refused(tmp_path, "sglang_server", server_vars(tmp_path, **{name: value}))
    assert task == "Refuse values systemd would read differently"
    assert name in msg and rule in msg, msg


@pytest.mark.parametrize("name,value,rule", [
    ("sglang_server_service", "sglang\n", "newline"),  # '$' matches before a final newline: checked whole
    ("sglang_server_port", "9" * 5000, "more than 18 digits"),  # Python's own int() would refuse it first
])
def test_sglang_server_refuses_what_a_pattern_end_or_int_would_let_through(tmp_path, name, value, rule):
    task, msg = refused(tmp_path, "sglang_server", server_vars(tmp_path, **{name: value}))
    assert name in msg and rule in msg, (task, msg)


@pytest.mark.parametrize("extra,flag,instead", [
    (["--host", "0.0.0.0"], "--host", "sglang_server_host"),
    (["--api-key=s3cr3t-value"], "--api-key", "sglang_server_api_key_file"),
    (["--admin-api-key", "s3cr3t-value"], "--admin-api-key", "in the arguments it would be readable in ps"),
    (["--config", "/tmp/evil.yaml"], "--config", "options file carries the API key"),
    (["--enable-flashinfer-allreduce-fusion"], "--enable-flashinfer-allreduce-fusion", "sglang_allreduce_path"),
    (["--tensor-parallel-size", "8"], "--tensor-parallel-size", "sglang_server_tp_size"),
    (["--enforce-disable-flashinfer-allreduce-fusion"], "--enforce-disable-flashinfer-allreduce-fusion",
     "sglang_server_no_fusion_args"),
])
def test_sglang_server_refuses_extra_arguments_it_sets_itself(tmp_path, extra, flag, instead):
    task, msg = refused(tmp_path, "sglang_server", server_vars(tmp_path, sglang_server_extra_args=["--enable-metrics"]
                                                                + extra))
    assert task == "Refuse extra arguments that set what the role sets"
    assert "%s: set " % flag in msg and instead in msg, msg
    assert "s3cr3t-value" not in msg


@pytest.mark.parametrize("value", [["--disable-custom-all-reduce"], ["--enforce-disable-flashinfer-allreduce-fusion=1"],
                                   ["--enable-flashinfer-allreduce-fusion"]])
def test_sglang_server_takes_only_the_off_switch_as_its_no_fusion_flag(tmp_path, value):
    task, msg = refused(tmp_path, "sglang_server", server_vars(tmp_path, sglang_server_no_fusion_args=value))
    assert task == "Check the flag that keeps fusion off"
    assert "sglang_server_no_fusion_args" in msg and value[0] in msg
    assert "may hold only --enforce-disable-flashinfer-allreduce-fusion" in msg


@pytest.mark.parametrize("key,rule", [
    # SGLang's --config merge passes it as `--api-key VALUE`: argparse took a leading "-" for an option and the
    # real 0.5.17 server did not start ("argument --api-key: expected one argument").
    ("-Zq81xKdfe0s3cr3t", 'begins with "-"'),
    ("Zq81x Kdfe0s3cr3t", "not one word of printable ASCII"),
    ("Zq81x\u00e9Kdfe0s3cr3t", "not one word of printable ASCII"),
])
def test_sglang_server_refuses_an_api_key_sglang_cannot_read_without_showing_it(tmp_path, key, rule):
    key_file = tmp_path / "api-key"
    key_file.write_text(key + "\n", encoding="utf-8")
    os.chmod(str(key_file), 0o600)
    rc, report = run_playbook(PLAYBOOK, dict(server_vars(tmp_path, sglang_server_api_key_file=str(key_file)),
                                             test_role="sglang_server"))
    task, msg = failure(report)
    assert rc != 0 and task == "Require a usable API key", (task, msg)
    assert rule in msg and str(key_file) in msg, msg
    assert not (tmp_path / "etc" / "api-key.yaml").exists()
    assert "Zq81x" not in str(report) and "s3cr3t" not in str(report)


@pytest.mark.parametrize("name,value,rule", [
    ("nccl_tuning_hook_name", "../../../tmp/evil", "identifier"),
    ("nccl_tuning_env_file", "nccl.env", "absolute"),
    ("nccl_tuning_env_file", "/etc/sglang/../../tmp/nccl.env", "normalized"),
    ("nccl_tuning_venv", "/opt/sglang/current\n", "newline"),
    ("nccl_tuning_settings", {"NCCL_X\nLD_PRELOAD": "1"}, "newline"),
    ("nccl_tuning_settings", {"NCCL-X": "1"}, "environment variable name"),
])
def test_nccl_tuning_refuses_locations_and_names(tmp_path, name, value, rule):
    variables = {"nccl_tuning_venv": str(tmp_path / "venv"), "nccl_tuning_env_file": str(tmp_path / "nccl.env")}
    variables[name] = value
    task, msg = refused(tmp_path, "nccl_tuning", variables)
    assert task == "Refuse locations that would land elsewhere"
    assert rule in msg, msg


@pytest.mark.parametrize("name,value,rule", [
    ("drift_schedule_limit", "blackwell\nExecStartPre=+/bin/id", "newline"),
    ("drift_schedule_limit", "50%", "specifier"),
    ("drift_schedule_on_calendar", "hourly\n[Service]", "newline"),
    ("drift_schedule_state_dir", "/var/lib/x/../../etc", "normalized"),
    ("drift_schedule_user", "drift\nUser=root", "newline"),
])
def test_drift_schedule_refuses_unit_injection(tmp_path, name, value, rule):
    variables = {"drift_schedule_project_dir": str(tmp_path / "project"),
                 "drift_schedule_inventory": str(tmp_path / "hosts.yml"), name: value}
    task, msg = refused(tmp_path, "drift_schedule", variables)
    assert task == "Refuse values systemd would read differently"
    assert name in msg and rule in msg, msg


@pytest.mark.parametrize("name,value,rule", [
    ("sglang_install_environment", {"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"}, "newline"),
    ("sglang_install_environment", {"BAD NAME": "1"}, "sglang_install_environment"),
    ("sglang_layout_home", "/var/lib/sglang\nLD_PRELOAD=/tmp/x.so", "newline"),
])
def test_sglang_install_refuses_environment_injection(tmp_path, name, value, rule):
    task, msg = refused(tmp_path, "sglang_install", {name: value, "sglang_layout_root": str(tmp_path / "opt")})
    assert task == "Refuse values the runtime environment file would read differently"
    assert rule in msg, msg


@pytest.mark.parametrize("environment,taken", [
    ({"HF_HUB_OFFLINE": "0"}, "HF_HUB_OFFLINE"),
    ({"PATH": "/usr/bin", "HOME": "/root", "NCCL_NVLS_ENABLE": "0"}, "PATH, HOME"),
])
def test_sglang_install_refuses_variables_it_sets_itself(tmp_path, environment, taken):
    task, msg = refused(tmp_path, "sglang_install", {"sglang_install_environment": environment,
                                                      "sglang_layout_root": str(tmp_path / "opt")})
    assert task == "Refuse environment variables the role sets itself"
    assert "sets %s, which the role writes itself" % taken in msg, msg


@pytest.mark.parametrize("name,value", [
    ("sglang_install_pip_index_url", "https://ci:tok3n@pypi.example/simple/\ntrusted-host = evil.example"),
    ("sglang_install_pip_extra_index_urls", ["https://a.example/simple", "https://b.example/ simple"]),
])
def test_sglang_install_refuses_index_urls_that_would_add_pip_settings(tmp_path, name, value):
    task, msg = refused(tmp_path, "sglang_install", {name: value, "sglang_layout_root": str(tmp_path / "opt")})
    assert task == "Refuse index URLs that are not one word"
    assert "tok3n" not in msg, msg
