"""module_utils/drift_report.py with drift_items.py and drift_categories.py (and the command line, scripts/drift_report.py) on synthetic ansible.posix.json output: statuses, categories, diffs, probes, outputs.

The results below have the shapes the callback records for these modules in check + diff mode (checked against
real runs of ansible-core 2.19: template/copy diffs name the controller's temporary source as after_header,
file links diff mappings, loops carry per-item results, a failed assert with failed_when: false keeps
evaluated_to, ignored and rescued failures still say failed: true).
"""
import datetime
import importlib.util
import io
import json
import os
import subprocess
import sys

import pytest

from ansible.module_utils import drift_categories as dc
from ansible.module_utils import drift_items as di
from ansible.module_utils import drift_report as dr

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "drift_report.py")
# The task file each synthetic task comes from, as the callback records it (role prefix -> roles/<role>/tasks/).
TASK_FILES = {
    "Write the unit": "unit.yml", "Write the API key environment file (root only)": "api_key.yml",
    "Write the runtime environment for the server": "environment.yml",
    "Check the installed venv still matches its lock (read-only)": "lock_check.yml",
    "Create the code directories, root-owned so the service cannot change its own code": "account.yml",
    "Create the service's state directories": "account.yml",
    "Create the service user": "account.yml", "Create the service group": "account.yml",
}


def task_path(name, index=0):
    """Where the callback says a task named NAME is (roles/<role>/tasks/<file>.yml:<line>)."""
    if " : " not in name:
        return "/work/project/roles/sglang_drift/tasks/probes.yml:%d" % index
    role, task = name.split(" : ", 1)
    task = task.split(" (")[0] if task not in TASK_FILES else task
    return "/work/project/roles/%s/tasks/%s:%d" % (role, TASK_FILES.get(task, "main.yml"), index)

NOW = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.timezone.utc)
VENV_A = "/opt/sglang/venvs/sglang-0.5.21-cp312-x86_64-aaaaaaaaaaaa"
VENV_B = "/opt/sglang/venvs/lab-b-bbbbbbbbbbbb"
SITE = VENV_A + "/lib/python3.12/site-packages"


# ---------------------------------------------------------------------------------------------------------------
# Building callback output


def ok(**extra):
    result = {"_ansible_no_log": False, "action": "ansible.builtin.debug", "changed": False}
    result.update(extra)
    return result


def stats_for(failures=0, unreachable=0, changed=0, rescued=0, ignored=0):
    return {"ok": 10, "changed": changed, "failures": failures, "unreachable": unreachable, "skipped": 2,
            "rescued": rescued, "ignored": ignored}


def run_of(tasks, stats, play="Drift of the prepared hosts"):
    """tasks: [(task name, {host: result})]."""
    return {
        "plays": [{
            "play": {"name": play, "id": "p1", "path": "playbooks/drift.yml:14",
                     "duration": {"start": "2026-11-30T11:59:00.000000Z", "end": "2026-11-30T11:59:50.000000Z"}},
            "tasks": [{"task": {"name": name, "id": "t%d" % index, "path": task_path(name, index),
                                "duration": {"start": "", "end": ""}}, "hosts": hosts}
                      for index, (name, hosts) in enumerate(tasks)],
        }],
        "stats": stats,
        "custom_stats": {},
        "global_custom_stats": {},
    }


def host_report(tasks, host="gpu1", **stats):
    run = run_of([(name, {host: result}) for name, result in tasks], {host: stats_for(**stats)})
    return dr.analyse(run)[host]


BASELINE = [
    ("gpu_preflight : Read nvidia-smi into facts", ok(action="nvidia_gpu_facts")),
    ("sglang_install : Check the installed venv still matches its lock (read-only)",
     ok(action="ansible.builtin.script", rc=0, stdout='{"mismatched": [], "missing": [], "ok": true}')),
    ("sglang_install : Point current at this lock's venv (atomic rename of the symlink)",
     ok(action="ansible.builtin.file", dest="/opt/sglang/current", src=VENV_A)),
    ("fusion_patch : Admit SM120 to FlashInfer allreduce fusion (present)",
     ok(action="sglang_fusion_patch", msg="every gate already admits SM120 (3 site(s)); nothing to do")),
    ("sglang_server : Write the unit", ok(action="ansible.builtin.template", checksum="abc")),
    ("Drift probe: the sglang service is active and enabled",
     ok(action="ansible.builtin.set_fact", ansible_facts={"drift": {
         "item": "sglang.service", "expected": "active/enabled", "actual": "active/enabled", "category": "service"}})),
]


def template_change(dest, before, after):
    return ok(action="ansible.builtin.template", changed=True,
              diff=[{"before": before, "after": after, "before_header": dest,
                     "after_header": "/root/.ansible/tmp/ansible-local-1/tmpx/" + os.path.basename(dest) + ".j2"}],
              invocation={"module_args": {"dest": dest, "src": "/root/.ansible/tmp/ansible-local-1/tmpx/t.j2"}})


# ---------------------------------------------------------------------------------------------------------------
# Status and exit code


def test_clean_run():
    run = run_of([(name, {"gpu1": result, "gpu2": result}) for name, result in BASELINE],
                 {"gpu1": stats_for(), "gpu2": stats_for()})
    report = dr.build_report(run, NOW)
    assert report["status"] == "clean" and report["exit_code"] == 0
    assert {host: info["status"] for host, info in report["hosts"].items()} == {"gpu1": "clean", "gpu2": "clean"}
    assert report["items"] == []
    # clean probes are still kept, as checks
    assert report["hosts"]["gpu1"]["checks"][0]["item"] == "sglang.service"
    text = dr.render_text(report)
    assert text.splitlines()[0].split() == ["gpu1", "clean"]
    assert text.rstrip().endswith("clean: 2 hosts, 2 clean; exit code 0 (every host clean)")


@pytest.mark.parametrize("statuses, code, overall", [
    (["clean", "clean"], 0, "clean"),
    (["clean", "drift"], 1, "drift"),
    (["drift", "error"], 2, "error"),
    (["clean", "unreachable"], 2, "unreachable"),
    (["error", "unreachable"], 2, "unreachable"),
])
def test_exit_codes(statuses, code, overall):
    hosts = {"h%d" % index: {"status": status} for index, status in enumerate(statuses)}
    assert dr.exit_code(hosts) == code and dr.overall_status(hosts) == overall


@pytest.mark.parametrize("statuses, line", [
    (["clean"], "clean: 1 host, 1 clean; exit code 0 (every host clean)"),
    (["drift", "clean", "drift"], "drift: 3 hosts, 1 clean, 2 drift; exit code 1 (a host drifted, none failed or was "
                                  "unreachable)"),
    (["unreachable", "drift", "error"], "unreachable: 3 hosts, 1 drift, 1 error, 1 unreachable; exit code 2 (a host "
                                        "failed or was unreachable, or no host ran)"),
])
def test_the_verdict_counts_hosts_by_status_and_says_what_the_exit_code_means(statuses, line):
    hosts = {"h%d" % index: {"status": status} for index, status in enumerate(statuses)}
    report = {"hosts": hosts, "status": dr.overall_status(hosts), "exit_code": dr.exit_code(hosts)}
    assert dr.verdict_line(report) == line


def test_no_hosts_is_an_error():
    run = run_of([], {})
    assert dr.build_report(run, NOW)["exit_code"] == 2
    assert dr.render_text(dr.build_report(run, NOW)).rstrip().endswith(
        "error: no hosts; exit code 2 (a host failed or was unreachable, or no host ran)")


def test_error_counts_only_the_failure_the_recap_counts():
    tasks = BASELINE + [
        ("sglang_install : Require a usable Python",
         ok(action="ansible.builtin.assert", failed=True, msg="/usr/bin/python3 on gpu1 is missing or older than 3.10")),
    ]
    info = host_report(tasks, failures=1)
    assert info["status"] == "error"
    assert info["errors"] == ["/usr/bin/python3 on gpu1 is missing or older than 3.10"]
    assert [item["kind"] for item in info["items"]] == ["error"]
    assert info["items"][0]["task"] == "sglang_install : Require a usable Python"


def test_ignore_errors_does_not_count():
    tasks = [("Read something optional",
              ok(action="ansible.builtin.command", failed=True, rc=1, msg="non-zero return code", stderr="nope"))] + BASELINE
    info = host_report(tasks, ignored=1)
    assert info["status"] == "clean" and info["ignored_failures"] == 1 and info["items"] == []


def test_rescued_failure_does_not_count_and_the_later_real_one_does():
    tasks = [
        ("nccl_tuning : Check the venv's Python sees the intended settings",
         ok(action="ansible.builtin.assert", failed=True, evaluated_to=False, msg="sees {}, intended {...}")),
        ("Drift probe: NCCL settings effective in the server's venv (verification failed)",
         ok(action="ansible.builtin.set_fact", ansible_facts={"drift": {
             "item": "NCCL_*/GLOO_* seen by /opt/sglang/current/bin/python", "expected": {"NCCL_P2P_LEVEL": "PHB"},
             "actual": {}, "category": "nccl", "drifted": True}})),
    ] + BASELINE
    info = host_report(tasks, rescued=1)
    assert info["status"] == "drift" and info["counts"] == {"nccl": 1} and info["ignored_failures"] == 1

    tasks.append(("Stop this host, a deploy role failed (not drift)",
                  ok(action="ansible.builtin.fail", failed=True, msg="sglang_server : Check every flag failed: ...")))
    info = host_report(tasks, rescued=1, failures=1)
    assert info["status"] == "error"
    assert info["errors"] == ["sglang_server : Check every flag failed: ..."]
    assert info["counts"] == {"nccl": 1}  # the drift found before the error is still reported
    assert [item["kind"] for item in info["items"]] == ["error", "probe"]


def test_unreachable():
    run = run_of([("gpu_preflight : Read nvidia-smi into facts", {
        "gpu1": ok(),
        "gpu2": {"action": "nvidia_gpu_facts", "changed": False, "unreachable": True,
                 "msg": "Task failed: Failed to connect to the host via ssh: Connection refused"}})],
        {"gpu1": stats_for(), "gpu2": stats_for(unreachable=1)})
    report = dr.build_report(run, NOW)
    assert report["hosts"]["gpu2"]["status"] == "unreachable" and report["exit_code"] == 2
    assert "Connection refused" in report["hosts"]["gpu2"]["errors"][0]
    assert 'sglang_drift_status{host="gpu2"} 3' in dr.render_prom(report)
    assert "gpu2  unreachable  Task failed: Failed to connect" in dr.render_text(report)


def test_a_host_without_recap_is_an_error():
    run = run_of([(name, {"gpu1": result}) for name, result in BASELINE], {})
    info = dr.analyse(run)["gpu1"]
    assert info["status"] == "error" and "cut short" in info["errors"][0]


# ---------------------------------------------------------------------------------------------------------------
# Categories


@pytest.mark.parametrize("path, category", [
    ("/p/roles/fusion_patch/tasks/patch.yml:2", "patch"),
    ("/p/roles/fusion_patch/tasks/canary.yml:40", "patch"),
    ("/p/roles/sglang_install/tasks/lock_check.yml:3", "packages"),
    ("/p/roles/nccl_tuning/tasks/main.yml:20", "nccl"),
    ("/p/roles/sglang_install/tasks/environment.yml:2", "environment"),
    ("/p/roles/sglang_server/tasks/unit.yml:22", "unit"),
    ("/p/roles/sglang_server/tasks/models.yml:2", "service"),
    ("/p/roles/sglang_install/tasks/venv.yml:75", "venv"),
    ("/usr/share/ansible/collections/ansible_collections/gpufleet/sglang/roles/sglang_install/tasks/venv.yml:75",
     "venv"),
    ("/p/roles/sglang_install/tasks/account.yml:9", "other"),
    ("/p/roles/gpu_preflight/tasks/host.yml:70", "other"),
    ("/p/playbooks/drift.yml:30", "other"),
    ("", "other"),
])
def test_category_of_the_task_file_that_produced_a_change(path, category):
    assert dc.category_for_task(path) == category


def test_paths_refine_the_category():
    # nccl_tuning's environment file is NCCL drift, as its hook is (docs/drift.md), whichever of them changed.
    assert dc.category_for_paths(["/etc/sglang/nccl.env"]) == "nccl"
    assert dc.category_for_paths([SITE + "/sglang_nccl_env.py", SITE + "/sglang_nccl_env.pth"]) == "nccl"
    assert dc.category_for_paths(["/etc/sglang/nccl.env", SITE + "/sglang_nccl_env.py"]) == "nccl"
    assert dc.category_for_paths(["/etc/sglang/runtime.env", "/etc/sglang/allreduce.env"]) == "environment"
    assert dc.category_for_paths(["/etc/sglang/not-nccl.env"]) == "environment"
    assert dc.category_for_paths(["/etc/systemd/system/sglang.service"]) == "unit"
    assert dc.category_for_paths([SITE + "/sglang/srt/layers/communicator.py"]) is None
    assert dc.category_for_paths([]) is None
    assert dc.category_for_paths(["/opt/sglang/locks/lab-a-0123.txt"]) == "packages"


# ---------------------------------------------------------------------------------------------------------------
# Drift items, one per category, with their diffs


def only_item(info):
    assert info["status"] == "drift", info
    assert len(info["items"]) == 1, info["items"]
    return info["items"][0]


def test_patch_overwritten_by_a_reinstall():
    before = "def f():\n    if not (_is_sm90_supported or _is_sm100_supported):\n        return False\n"
    after = "def f():\n    if not (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported):\n        return False\n"
    rel = "sglang/srt/layers/flashinfer_comm_fusion.py"
    result = ok(action="sglang_fusion_patch", changed=True, msg="would patch 1 site(s) in 1 file(s)",
                sites=[{"gate": "G1", "file": rel, "function": "apply", "line": 2, "status": "would_patch"},
                       {"gate": "G2", "file": "sglang/srt/x.py", "line": 9, "status": "already_admitted"}],
                diff=[{"before_header": SITE + "/" + rel + " (before)", "after_header": SITE + "/" + rel + " (after)",
                       "before": before, "after": after}])
    item = only_item(host_report([("fusion_patch : Admit SM120 to FlashInfer allreduce fusion (present)", result)]
                                 + BASELINE[:3], changed=1))
    assert item["category"] == "patch" and item["kind"] == "change"
    assert item["summary"] == "would patch 1 site(s) in 1 file(s); sites: G1 %s:2" % rel
    assert item["diff"][0] == "--- %s/%s (before)" % (SITE, rel)
    assert item["diff"][1] == "+++ %s/%s (after)" % (SITE, rel)
    assert "-    if not (_is_sm90_supported or _is_sm100_supported):" in item["diff"]
    assert "+    if not (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported):" in item["diff"]


def test_flashinfer_downgraded_found_by_the_smoke_check():
    # The smoke check as the role would report it if it said "changed" in check mode (proposed), and as the
    # drift playbook records it when the role stops there (a drift probe from the rescue).
    stdout = json.dumps({"python": VENV_A + "/bin/python", "ok": False, "missing": [],
                         "mismatched": ["flashinfer-python: lock 0.6.18, installed 0.6.17"]})
    changed = ok(action="ansible.builtin.script", changed=True, rc=1, stdout=stdout)
    item = only_item(host_report([("sglang_install : Check the installed venv still matches its lock (read-only)",
                                   changed)], changed=1))
    assert item["category"] == "packages"
    assert item["summary"] == "flashinfer-python: lock 0.6.18, installed 0.6.17"

    rescued = [
        ("sglang_install : Check the installed venv still matches its lock (read-only)",
         ok(action="ansible.builtin.script", failed=True, rc=1, msg="non-zero return code", stdout=stdout)),
        ("Drift probe: a deploy role stopped at drift", ok(action="ansible.builtin.set_fact", ansible_facts={"drift": {
            "item": "sglang_install : Check the installed venv still matches its lock (read-only)",
            "expected": "every pin of the lock installed", "actual": "flashinfer-python: lock 0.6.18, installed 0.6.17",
            "category": "packages", "drifted": True}})),
    ]
    item = only_item(host_report(rescued, rescued=1))
    assert item["category"] == "packages" and item["kind"] == "probe"
    assert item["summary"].endswith("expected every pin of the lock installed, actual flashinfer-python: lock 0.6.18, "
                                    "installed 0.6.17")


def test_nccl_hook_edited():
    hook = SITE + "/sglang_nccl_env.py"
    result = ok(action="sglang_nccl_settings", changed=True, profile="pcie",
                diff=[{"before_header": hook, "after_header": hook,
                       "before": 'import os\nos.environ.setdefault("NCCL_P2P_LEVEL", "SYS")\n',
                       "after": 'import os\nos.environ.setdefault("NCCL_P2P_LEVEL", "PHB")\n'}])
    item = only_item(host_report([("nccl_tuning : Validate and deliver the NCCL settings (present)", result)],
                                 changed=1))
    assert item["category"] == "nccl" and item["paths"] == [hook]
    assert item["diff"][:2] == ["--- " + hook, "+++ " + hook]
    assert '-os.environ.setdefault("NCCL_P2P_LEVEL", "SYS")' in item["diff"]
    assert '+os.environ.setdefault("NCCL_P2P_LEVEL", "PHB")' in item["diff"]


def test_nccl_env_file_edited_is_nccl():
    """The issue-39 case: an edit of nccl.env alone was filed under environment while docs/drift.md says nccl."""
    result = ok(action="sglang_nccl_settings", changed=True,
                diff=[{"before_header": "/etc/sglang/nccl.env", "after_header": "/etc/sglang/nccl.env",
                       "before": "NCCL_P2P_LEVEL=SYS\n", "after": "NCCL_P2P_LEVEL=PHB\n"}])
    item = only_item(host_report([("nccl_tuning : Validate and deliver the NCCL settings (present)", result)],
                                 changed=1))
    assert item["category"] == "nccl"


def test_runtime_env_edited():
    result = template_change("/etc/sglang/runtime.env", "HF_HUB_OFFLINE=1\nHOME=/var/lib/sglang\n",
                             "HF_HUB_OFFLINE=1\nHOME=/var/lib/sglang\nFLASHINFER_WORKSPACE_BASE=/var/lib/sglang/flashinfer\n")
    result["diff"][0]["before"] = "HF_HUB_OFFLINE=0\nHOME=/var/lib/sglang\n"
    item = only_item(host_report([("sglang_install : Write the runtime environment for the server", result)],
                                 changed=1))
    assert item["category"] == "environment" and item["paths"] == ["/etc/sglang/runtime.env"]
    # the controller's temporary template source is not shown: both sides name the file on the host
    assert item["diff"][:2] == ["--- /etc/sglang/runtime.env (before)", "+++ /etc/sglang/runtime.env (after)"]
    assert "-HF_HUB_OFFLINE=0" in item["diff"] and "+HF_HUB_OFFLINE=1" in item["diff"]


def test_unit_edited():
    before = "[Service]\nExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --tp-size 4\n"
    after = "[Service]\nExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --tp-size 8\n"
    item = only_item(host_report([("sglang_server : Write the unit",
                                   template_change("/etc/systemd/system/sglang.service", before, after))], changed=1))
    assert item["category"] == "unit"
    assert "+ExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --tp-size 8" in item["diff"]


def test_service_stopped():
    probe = ok(action="ansible.builtin.set_fact", ansible_facts={"drift": {
        "item": "sglang.service", "expected": "active/enabled", "actual": "inactive/enabled", "category": "service",
        "detail": "dead since Mon 2026-11-30 11:00:00 UTC, main PID 0"}})
    restart = ok(action="ansible.builtin.set_fact", ansible_facts={"drift": {
        "item": "/var/lib/sglang/.deployed-config", "expected": "no restart pending",
        "actual": "a deploy would restart sglang", "category": "service", "secondary": True}})
    info = host_report([("Drift probe: the sglang service is active and enabled", probe),
                        ("Drift probe: no restart pending (what the server runs was proven by the last deploy)",
                         restart)])
    assert info["status"] == "drift" and info["counts"] == {"service": 1}
    first, second = info["items"]
    assert first["summary"] == ("sglang.service: expected active/enabled, actual inactive/enabled "
                                "(dead since Mon 2026-11-30 11:00:00 UTC, main PID 0)")
    assert first["counted"] and not second["counted"]
    assert "[service, not counted]" in dr.render_text(dr.build_report(run_of(
        [("Drift probe: the sglang service is active and enabled", {"gpu1": probe}),
         ("Drift probe: no restart pending", {"gpu1": restart})], {"gpu1": stats_for()}), NOW))


def test_current_switched_to_another_venv():
    result = ok(action="ansible.builtin.file", changed=True, dest="/opt/sglang/current", src=VENV_A,
                diff={"before": {"path": "/opt/sglang/current", "src": VENV_B},
                      "after": {"path": "/opt/sglang/current", "src": VENV_A}})
    item = only_item(host_report([("sglang_install : Point current at this lock's venv (atomic rename of the symlink)",
                                   result)], changed=1))
    assert item["category"] == "venv"
    assert item["diff"] == ["--- /opt/sglang/current (before)", "+++ /opt/sglang/current (after)", "@@ -1,2 +1,2 @@",
                            " path: /opt/sglang/current", "-src: " + VENV_B, "+src: " + VENV_A]


def test_loop_items_are_reported_one_by_one():
    result = ok(action="ansible.builtin.file", changed=True, msg="All items completed", results=[
        {"changed": False, "item": "/opt/sglang", "_ansible_item_label": "/opt/sglang", "path": "/opt/sglang"},
        {"changed": True, "item": "/etc/sglang", "_ansible_item_label": "/etc/sglang", "path": "/etc/sglang",
         "diff": {"before": {"path": "/etc/sglang", "mode": "0700"}, "after": {"path": "/etc/sglang", "mode": "0755"}}},
        {"skipped": True, "changed": False, "item": "/x"},
    ])
    item = only_item(host_report([("sglang_install : Create the code directories, root-owned so the service "
                                   "cannot change its own code", result)], changed=1))
    assert item["task"].endswith("(/etc/sglang)") and item["category"] == "other"
    assert '-mode: 0700' in item["diff"] and '+mode: 0755' in item["diff"]


def test_changed_without_diff_uses_msg_or_names_the_target():
    info = host_report([
        ("sglang_install : Create the venv", ok(action="ansible.builtin.command", changed=True,
                                                msg="Command would have run if not in check mode")),
        ("sglang_install : Create the service user", ok(action="ansible.builtin.user", changed=True,
                                                       invocation={"module_args": {"name": "sglang"}})),
        ("sglang_server : Write the API key environment file (root only)",
         {"censored": "the output has been hidden due to the fact that 'no_log: true' was specified for this result",
          "changed": True}),
    ], changed=3)
    summaries = [item["summary"] for item in info["items"]]
    assert summaries[0] == "Command would have run if not in check mode"
    assert summaries[1] == "would change sglang"
    assert summaries[2].startswith("the output has been hidden") and info["items"][2]["diff"] == []
    assert info["counts"] == {"venv": 1, "other": 1, "environment": 1}


# ---------------------------------------------------------------------------------------------------------------
# Diff rendering


def test_render_diff_truncates():
    before = "".join("line %d\n" % n for n in range(40))
    after = "".join("LINE %d\n" % n for n in range(40))
    lines, omitted = di.render_diff({"before": before, "after": after}, max_lines=10)
    assert len(lines) == 10 and omitted == 3 + 80 - 10 and lines[:2] == ["--- before", "+++ after"]
    lines, omitted = di.render_diff({"before": before, "after": after}, max_lines=0)
    assert omitted == 0 and len(lines) == 83


def test_render_diff_forms():
    assert di.render_diff([{"prepared": "--- a\n+++ b\n-x\n+y"}]) == (["--- a", "+++ b", "-x", "+y"], 0)
    assert di.render_diff([{"before": "same\n", "after": "same\n"}]) == ([], 0)
    assert di.render_diff(None) == ([], 0) and di.render_diff([]) == ([], 0)
    lines, _ = di.render_diff({"before": "", "after": "new\n", "after_header": "/etc/x"})
    assert lines[:2] == ["--- /etc/x", "+++ /etc/x"]
    lines, _ = di.render_diff({"before": {"state": "absent"}, "after": {"state": "directory", "mode": "0755"}})
    assert "-state: absent" in lines and "+state: directory" in lines and "+mode: 0755" in lines


# ---------------------------------------------------------------------------------------------------------------
# The probe convention


def probe_info(name, result, **stats):
    return host_report([(name, result)], **stats)


def test_probe_expected_equals_actual_is_clean_and_kept_as_a_check():
    info = probe_info("Drift probe: GPU driver is the one the last deploy ran on", ok(ansible_facts={"drift": {
        "item": "NVIDIA driver", "expected": "580.65.06", "actual": "580.65.06", "category": "driver"}}))
    assert info["status"] == "clean" and info["items"] == []
    assert info["checks"] == [{"item": "NVIDIA driver", "expected": "580.65.06", "actual": "580.65.06",
                               "drifted": False, "category": "driver", "secondary": False,
                               "task": "Drift probe: GPU driver is the one the last deploy ran on"}]


def test_probe_difference_is_drift_with_its_category():
    info = probe_info("Drift probe: GPU driver is the one the last deploy ran on", ok(ansible_facts={"drift": {
        "item": "NVIDIA driver", "expected": "570.86.10", "actual": "580.65.06", "category": "driver"}}))
    item = only_item(info)
    assert item["category"] == "driver" and item["expected"] == "570.86.10" and item["actual"] == "580.65.06"
    assert item["summary"] == "NVIDIA driver: expected 570.86.10, actual 580.65.06"


def test_probe_compares_json_values_and_honours_drifted():
    same = {"tp_size": 8, "model_path": "/srv/models/k"}
    assert not di.probe_findings("Drift probe: x", ok(ansible_facts={"drift": {
        "expected": same, "actual": dict(reversed(list(same.items())))}}))[0]["drifted"]
    assert di.probe_findings("Drift probe: x", ok(ansible_facts={"drift": {
        "expected": same, "actual": dict(same, tp_size=4)}}))[0]["drifted"]
    assert di.probe_findings("Drift probe: x", ok(ansible_facts={"drift": {
        "expected": 1, "actual": 1, "drifted": True}}))[0]["drifted"]
    assert not di.probe_findings("Drift probe: x", ok(ansible_facts={"drift": {
        "expected": None, "actual": "580", "drifted": "false", "note": "no record"}}))[0]["drifted"]


def test_probe_item_defaults_to_its_label_and_a_missing_or_unknown_category_is_other():
    info = probe_info("sglang_server : Drift probe: NCCL in the venv", ok(ansible_facts={"drift": {
        "expected": {"NCCL_P2P_LEVEL": "PHB"}, "actual": {}}}))
    item = only_item(info)
    assert item["item"] == "NCCL in the venv" and item["category"] == "other"
    info = probe_info("Drift probe: x", ok(ansible_facts={"drift": {"expected": 1, "actual": 2, "category": "nccl!"}}))
    assert only_item(info)["category"] == "other"


def test_a_probe_is_known_by_its_result_not_its_name():
    """Any set_fact of `drift` is a probe, whatever the task is called; nothing else is."""
    info = probe_info("Compare the driver", ok(ansible_facts={"drift": {
        "item": "NVIDIA driver", "expected": "570.86.10", "actual": "580.65.06", "category": "driver"}}))
    assert only_item(info)["kind"] == "probe" and only_item(info)["category"] == "driver"
    assert probe_info("Drift probe: not a probe", ok(ansible_facts={"other": 1}))["items"] == []


def test_probe_empty_value_is_nothing_to_compare():
    for value in (None, {}, []):
        info = probe_info("Drift probe: x", ok(ansible_facts={"drift": value}))
        assert info["status"] == "clean" and info["checks"] == []


def test_probe_list_and_loop():
    findings = [{"item": "a", "expected": 1, "actual": 1}, {"item": "b", "expected": 1, "actual": 2}]
    info = probe_info("Drift probe: several", ok(ansible_facts={"drift": findings}))
    assert [item["item"] for item in info["items"]] == ["b"] and len(info["checks"]) == 2
    loop = ok(results=[{"ansible_facts": {"drift": finding}, "changed": False} for finding in findings])
    assert [item["item"] for item in probe_info("Drift probe: several", loop)["items"]] == ["b"]


def test_probe_labels_drop_the_role_prefix_and_the_conventional_drift_probe_prefix():
    assert di.probe_label("drift probe: x") == "x"
    assert di.probe_label("Drift probe:   y z") == "y z"
    assert di.probe_label("sglang_server : Drift probe: w") == "w"
    assert di.probe_label("sglang_drift : Compare the driver") == "Compare the driver"


def test_probe_results_never_count_as_changes_and_skipped_probes_say_nothing():
    info = probe_info("Drift probe: x", ok(changed=True, ansible_facts={"drift": {"expected": 1, "actual": 1}}))
    assert info["status"] == "clean"
    assert probe_info("Drift probe: x", {"skipped": True, "changed": False})["checks"] == []


def test_secondary_counts_only_alone():
    secondary = ok(ansible_facts={"drift": {"item": "restart", "expected": "no", "actual": "yes", "secondary": True,
                                            "category": "service"}})
    alone = host_report([("Drift probe: no restart pending", secondary)])
    assert alone["status"] == "drift" and alone["counts"] == {"service": 1}
    with_unit = host_report([("sglang_server : Write the unit", template_change(
        "/etc/systemd/system/sglang.service", "a\n", "b\n")), ("Drift probe: no restart pending", secondary)],
        changed=1)
    assert with_unit["counts"] == {"unit": 1}
    assert [item["counted"] for item in with_unit["items"]] == [True, False]


# ---------------------------------------------------------------------------------------------------------------
# Outputs


def mixed_run():
    unit = template_change("/etc/systemd/system/sglang.service", "a\n", "b\n")
    return run_of([
        ("sglang_server : Write the unit", {"gpu1": unit, "gpu2": ok(), 'we"ird\\host': ok()}),
    ], {"gpu1": stats_for(changed=1), "gpu2": stats_for(), 'we"ird\\host': stats_for(failures=1)})


def test_prom_text_format():
    report = dr.build_report(mixed_run(), NOW)
    text = dr.render_prom(report)
    lines = text.splitlines()
    assert text.endswith("\n")
    assert lines[:2] == [
        "# HELP sglang_drift_status Last drift check per host: 0 clean, 1 drift, 2 error, 3 unreachable.",
        "# TYPE sglang_drift_status gauge"]
    assert 'sglang_drift_status{host="gpu1"} 1' in lines
    assert 'sglang_drift_status{host="gpu2"} 0' in lines
    assert 'sglang_drift_status{host="we\\"ird\\\\host"} 2' in lines
    assert "# TYPE sglang_drift_items gauge" in lines
    assert 'sglang_drift_items{host="gpu1",category="unit"} 1' in lines
    assert 'sglang_drift_items{host="gpu2",category="unit"} 0' in lines
    item_lines = [line for line in lines if line.startswith("sglang_drift_items{")]
    assert len(item_lines) == 3 * len(dc.CATEGORIES)
    assert lines[-2:] == ["# TYPE sglang_drift_last_run_timestamp_seconds gauge",
                          "sglang_drift_last_run_timestamp_seconds %.3f" % NOW.timestamp()]
    # every sample line: name{labels} value
    for line in lines:
        if not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            float(value)
            assert name_labels.startswith("sglang_drift_")


def test_json_report_shape():
    report = json.loads(dr.render_json(dr.build_report(mixed_run(), NOW, source="/tmp/out.json")))
    assert report["generated_at"] == "2026-11-30T12:00:00Z" and report["timestamp"] == NOW.timestamp()
    assert report["status"] == "error" and report["exit_code"] == 2
    assert report["run"] == {"start": "2026-11-30T11:59:00.000000Z", "end": "2026-11-30T11:59:50.000000Z",
                             "plays": ["Drift of the prepared hosts"]}
    assert set(report["hosts"]) == {"gpu1", "gpu2", 'we"ird\\host'}
    assert report["hosts"]["gpu1"]["counts"] == {"unit": 1}
    assert [(item["host"], item["category"]) for item in report["items"]] == [("gpu1", "unit"),
                                                                              ('we"ird\\host', "other")]


def test_main_writes_json_and_prom_atomically(tmp_path):
    source = tmp_path / "out.json"
    source.write_text(json.dumps(mixed_run()))
    out, err = io.StringIO(), io.StringIO()
    json_path, prom_path = tmp_path / "r" / "report.json", tmp_path / "prom" / "sglang_drift.prom"
    prom_path.parent.mkdir()
    prom_path.write_text("old\n")
    code = dr.main([str(source), "--json", str(json_path), "--prom", str(prom_path)], now=NOW, stdout=out, stderr=err)
    assert code == 2
    assert json.loads(json_path.read_text())["hosts"]["gpu1"]["status"] == "drift"
    assert prom_path.read_text().startswith("# HELP sglang_drift_status")
    assert oct(prom_path.stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(prom_path.parent)) == ["sglang_drift.prom"]  # no temporary file left
    assert out.getvalue().splitlines()[0].split()[:2] == ["gpu1", "drift"]


def test_main_exit_codes_and_bad_input(tmp_path):
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(run_of([(n, {"gpu1": r}) for n, r in BASELINE], {"gpu1": stats_for()})))
    assert dr.main([str(clean), "-q"], now=NOW, stdout=io.StringIO()) == 0
    drift = tmp_path / "drift.json"
    drift.write_text(json.dumps(run_of([("sglang_server : Write the unit", {"gpu1": template_change(
        "/etc/systemd/system/sglang.service", "a\n", "b\n")})], {"gpu1": stats_for(changed=1)})))
    assert dr.main([str(drift), "-q"], now=NOW) == 1
    garbage = tmp_path / "garbage.json"
    garbage.write_text("ERROR! the playbook: playbooks/drift.yml could not be found\n")
    err = io.StringIO()
    assert dr.main([str(garbage)], now=NOW, stderr=err) == 2 and "cannot read" in err.getvalue()
    assert dr.main([str(tmp_path / "missing.json")], now=NOW, stderr=io.StringIO()) == 2


def test_load_run_skips_text_before_the_json():
    run = run_of([], {"gpu1": stats_for()})
    assert dr.load_run("[WARNING]: something\n" + json.dumps(run, indent=4)) == run
    with pytest.raises(ValueError):
        dr.load_run('{"not": "a run"}')


def test_report_dir_keeps_the_newest(tmp_path):
    directory = tmp_path / "reports"
    directory.mkdir()
    for day in range(1, 6):
        (directory / ("drift-202611%02dT010000Z.json" % day)).write_text("{}")
    (directory / "notes.txt").write_text("mine")
    (directory / "drift-latest.json").write_text("not a timestamped report")
    source = tmp_path / "out.json"
    source.write_text(json.dumps(run_of([(n, {"gpu1": r}) for n, r in BASELINE], {"gpu1": stats_for()})))
    err = io.StringIO()
    code = dr.main([str(source), "--report-dir", str(directory), "--keep", "3", "-q"], now=NOW, stderr=err)
    assert code == 0
    assert sorted(os.listdir(directory)) == ["drift-20261104T010000Z.json", "drift-20261105T010000Z.json",
                                             "drift-20261130T120000Z.json", "drift-latest.json", "notes.txt"]
    assert json.loads((directory / "drift-20261130T120000Z.json").read_text())["status"] == "clean"
    # a second report in the same second gets its own name and is the newest
    path, removed = dr.save_to_dir({"status": "clean"}, str(directory), 3, NOW)
    assert os.path.basename(path) == "drift-20261130T120000Z-1.json"
    assert [os.path.basename(p) for p in removed] == ["drift-20261104T010000Z.json"]


def test_keep_must_be_positive():
    with pytest.raises(SystemExit):
        dr.parse_args(["x.json", "--keep", "0"])


def test_cli_reads_stdin():
    run = run_of([("sglang_server : Write the unit", {"gpu1": template_change(
        "/etc/systemd/system/sglang.service", "a\n", "b\n")})], {"gpu1": stats_for(changed=1)})
    proc = subprocess.run([sys.executable, SCRIPT, "-", "--diff-lines", "3"], input=json.dumps(run),
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["gpu1", "drift", "unit", "1"]
    assert "gpu1 [unit] sglang_server : Write the unit" in lines
    assert "    ... 2 more diff line(s)" in lines


def test_probe_mappings_get_a_diff():
    info = probe_info("Drift probe: NCCL settings effective in the server's venv", ok(ansible_facts={"drift": {
        "expected": {"NCCL_P2P_LEVEL": "PHB", "NCCL_DEBUG": "WARN"}, "actual": {"NCCL_P2P_LEVEL": "SYS",
                                                                               "NCCL_DEBUG": "WARN"}}}))
    assert only_item(info)["diff"] == ["--- expected", "+++ actual", "@@ -1,2 +1,2 @@", " NCCL_DEBUG: WARN",
                                       "-NCCL_P2P_LEVEL: PHB", "+NCCL_P2P_LEVEL: SYS"]
