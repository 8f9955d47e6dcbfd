"""sglang_deploy_metrics through real Ansible: the textfile from real records, promtool-clean, idempotent, honest in
check and diff mode, counters kept over a truncated log, links and FIFOs refused."""
import os
import pwd

from ansible.module_utils import gate_verdict
from tests.helpers.ansible_run import refusal as refused, run_module
from tests.helpers.promtool import check_metrics

INFO = {"sglang_version": "0.5.17", "flashinfer_version": "0.6.18", "lock": "sm120-0.5.17", "model_revision": "6f1c2e0"}
LINE = "gpu1 start=2026-12-07T10:00:00+00:00 ready=2026-12-07T10:04:00+00:00 waited_s=240 pid=%d why=%s\n"


def records(tmp_path, passed=True):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "gate-verdict.json").write_text(gate_verdict.record(
        "abc123", "d" * 64, passed, "2026-12-07T10:30:00+00:00", "passed",
        {"verdict": {"median_tok_s": 140.5, "bar_tok_s": 86.1, "baseline_tok_s": 82.0, "margin_pct": 5.0,
                     "gate_concurrency": 1}, "accept_length": 3.1, "match_rate": 1.0, "min_match_rate": 0.75}))
    (home / "restarts.log").write_text(LINE % (1, "deploy") + LINE % (2, "rollback"))
    textfiles = tmp_path / "textfile"
    textfiles.mkdir(exist_ok=True)
    return {"path": str(textfiles / "sglang_deploy.prom"), "gate_verdict_file": str(home / "gate-verdict.json"),
            "restarts_log": str(home / "restarts.log")}


def test_deploy_writes_a_clean_textfile_once_and_a_second_run_changes_nothing(tmp_path):
    args = dict(records(tmp_path), info=INFO, allreduce_path="fusion-trtllm", fused=True,
                deployed_at="2026-12-07T10:45:00+00:00")
    first = run_module("sglang_deploy_metrics", args)
    assert first["changed"], first
    text = open(args["path"]).read()
    assert check_metrics(text) == (0, "")
    assert oct(os.stat(args["path"]).st_mode & 0o777) == "0o644"
    assert first["facts"]["restarts_total"] == 2 and first["facts"]["rollbacks_total"] == 1
    assert first["facts"]["gate_accept_length"] == 3.1 and first["facts"]["fused"] == 1

    again = run_module("sglang_deploy_metrics", dict(args, deployed_at="2026-12-07T11:45:00+00:00"))
    assert not again["changed"], again
    assert open(args["path"]).read() == text


def test_a_drift_check_keeps_the_deploys_facts_and_a_restart_counts(tmp_path):
    args = dict(records(tmp_path), info=INFO, allreduce_path="nccl", fused=False)
    run_module("sglang_deploy_metrics", args)
    with open(args["restarts_log"], "a") as log:
        log.write(LINE % (3, "deploy"))
    later = run_module("sglang_deploy_metrics", {"path": args["path"], "restarts_log": args["restarts_log"],
                                                 "drift_checked_at": 1796642400})
    assert later["changed"]
    assert later["facts"]["info"] == INFO and later["facts"]["allreduce_path"] == "nccl"
    assert later["facts"]["fused"] == 0 and later["facts"]["restarts_total"] == 3
    assert later["facts"]["last_drift_check_timestamp_seconds"] == 1796642400
    # The log truncated: the counter holds.
    open(args["restarts_log"], "w").close()
    held = run_module("sglang_deploy_metrics", {"path": args["path"], "restarts_log": args["restarts_log"]})
    assert not held["changed"] and held["facts"]["restarts_total"] == 3


def test_check_mode_writes_nothing_and_diff_shows_the_file(tmp_path):
    args = dict(records(tmp_path, passed=False), info=INFO)
    result = run_module("sglang_deploy_metrics", args, check=True, diff=True)
    assert result["changed"] and "sglang_deploy_gate_passed 0" in result["diff"]["after"]
    assert not os.path.exists(args["path"])


def test_bad_inputs_are_refused_with_a_message_and_nothing_written(tmp_path):
    args = records(tmp_path)
    assert "nothing written" in refused(run_module("sglang_deploy_metrics",
                                                   dict(args, info=dict(INFO, lock="a\nb"))))
    assert "must end in .prom" in refused(run_module("sglang_deploy_metrics", dict(args, path=args["path"] + ".txt")))
    assert "ISO 8601" in refused(run_module("sglang_deploy_metrics", dict(args, deployed_at="yesterday")))
    assert not os.path.exists(args["path"])


def test_a_link_or_fifo_in_place_of_a_record_is_not_read(tmp_path):
    args = records(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("not a log\n")
    os.unlink(args["restarts_log"])
    os.symlink(str(secret), args["restarts_log"])
    assert "symlink" in refused(run_module("sglang_deploy_metrics", args))
    os.unlink(args["restarts_log"])
    os.mkfifo(args["restarts_log"])
    assert "not a regular file" in refused(run_module("sglang_deploy_metrics", args))
    assert not os.path.exists(args["path"])


def host_files(tmp_path, fusion="--flashinfer-allreduce-fusion-backend trtllm"):
    """A venv as pip leaves its metadata, a model revision behind a current link, the server's unit."""
    venv = tmp_path / "opt" / "venvs" / "sm120-0.5.17"
    site = venv / "lib" / "python3.11" / "site-packages"
    for name, version in (("sglang", "0.5.17"), ("flashinfer_python", "0.6.18")):
        meta = site / ("%s-%s.dist-info" % (name, version))
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n\n" % (
            name.replace("_", "-"), version))
    (tmp_path / "opt" / "current").symlink_to(venv)
    model = tmp_path / "models" / "kimi"
    (model / "6f1c2e0").mkdir(parents=True)
    (model / "current").symlink_to("6f1c2e0")
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --model-path %s "
                    "--tp-size 2 %s\n" % (model / "current", fusion))
    return {"venv": str(tmp_path / "opt" / "current"), "model_path": str(model / "current"), "unit_file": str(unit)}


def test_releases_lock_revision_and_fused_are_read_from_what_the_host_runs(tmp_path):
    args = dict(records(tmp_path), **host_files(tmp_path))
    result = run_module("sglang_deploy_metrics", args)
    assert not result.get("failed"), result
    assert result["facts"]["info"] == INFO and result["facts"]["fused"] == 1
    assert check_metrics(open(args["path"]).read()) == (0, "")
    # The unit without fusion (a canary failed, the patch rolled back): fused 0, the file rewritten.
    with open(args["unit_file"], "w") as unit:
        unit.write("[Service]\nExecStart=/x --tp-size 2 --enforce-disable-flashinfer-allreduce-fusion\n")
    after = run_module("sglang_deploy_metrics", args)
    assert after["changed"] and after["facts"]["fused"] == 0


def test_a_missing_unit_is_refused_and_a_venv_without_packages_says_none(tmp_path):
    files = host_files(tmp_path)
    args = dict(records(tmp_path), **files)
    os.unlink(args["unit_file"])
    assert "does not exist" in refused(run_module("sglang_deploy_metrics", args))
    empty = tmp_path / "empty-venv" / "lib" / "python3.11" / "site-packages"
    empty.mkdir(parents=True)
    assert not os.path.exists(args["path"])
    result = run_module("sglang_deploy_metrics", dict(records(tmp_path), venv=str(tmp_path / "empty-venv"),
                                                      model_path=files["model_path"]))
    assert not result.get("failed"), result
    assert result["facts"]["info"]["sglang_version"] == "none"
    assert result["facts"]["info"]["flashinfer_version"] == "none"


def test_a_textfile_folder_another_user_can_write_is_refused(tmp_path):
    # Debian's node-exporter package leaves /var/lib/prometheus to its prometheus user; an earlier drift_schedule let
    # its check's group write the textfile folder. Root neither reads nor writes there: refused, the rule named.
    args = dict(records(tmp_path), info=INFO)
    folder = os.path.dirname(args["path"])
    nobody = pwd.getpwnam("nobody")
    os.chown(folder, nobody.pw_uid, 0)
    message = refused(run_module("sglang_deploy_metrics", args))
    assert "%s is owned by uid %d" % (folder, nobody.pw_uid) in message and "only root can write" in message
    os.chown(folder, 0, 0)
    os.chmod(folder, 0o775)
    assert "%s is writable by group or others (mode 0775)" % folder in refused(run_module("sglang_deploy_metrics", args))
    assert not os.path.exists(args["path"])
    os.chmod(folder, 0o755)
    assert run_module("sglang_deploy_metrics", args)["changed"]
