"""The fleet benchmark's logic (lab/fleet_bench.py) and the fleet lab's inventory (inventories/fleet/fleet.py):
recaps judged, per-play seconds read from profile_tasks output, the table's ratios, the names/ports/profiles."""
import json
import os
import subprocess
import sys

import pytest

from tests.helpers.ansible_run import REPO
from tests.helpers.script_module import load_file


bench = load_file("lab/fleet_bench.py", "fleet_bench")
fleet = load_file("inventories/fleet/fleet.py", "fleet_inventory")


def stamp(elapsed):
    """A profile_tasks timestamp line (trailing space included, as the callback writes it)."""
    minutes, seconds = divmod(elapsed, 60)
    return "Tuesday 01 December 2026  05:40:01 +0000 (0:00:01.234)       0:%02d:%06.3f ****** " % (minutes, seconds)


def log(plays, recap_lines=()):
    """A default-callback log: each (play, [task elapsed seconds]) in order, then the recap."""
    lines = []
    for play, times in plays:
        lines += ["", "PLAY [%s] ***" % play, ""]
        for elapsed in times:
            lines += ["TASK [x] ***", stamp(elapsed), "ok: [fleet-gpu1]"]
    lines += ["", "PLAY RECAP ***"] + list(recap_lines)
    lines += ["", "TASKS RECAP ***", stamp(999.0), "=" * 20, "x ------- 0.02s"]
    return "\n".join(lines)


OK = "fleet-gpu%d               : ok=80   changed=%d    unreachable=%d    failed=%d    skipped=9    rescued=0    ignored=0   "


def test_recap_passes_a_clean_no_op_of_every_host():
    text = log([("Prepare", [1.0])], [OK % (1, 0, 0, 0), OK % (2, 0, 0, 0)])
    assert bench.recap_problems(text, 2, no_change=True) == []


def test_recap_names_a_changed_failed_or_unreachable_host():
    text = log([("Prepare", [1.0])], [OK % (1, 3, 0, 0), OK % (2, 0, 1, 0), OK % (3, 0, 0, 2)])
    assert bench.recap_problems(text, 3, no_change=True) == [
        "fleet-gpu1: changed=3", "fleet-gpu2: unreachable=1", "fleet-gpu3: failed=2"]
    # A first converge may change things, never fail.
    assert bench.recap_problems(text, 3) == ["fleet-gpu2: unreachable=1", "fleet-gpu3: failed=2"]


def test_recap_counts_hosts_so_a_missing_host_is_not_a_pass():
    text = log([("Prepare", [1.0])], [OK % (1, 0, 0, 0)])
    assert bench.recap_problems(text, 2, no_change=True) == ["the recap lists 1 hosts, not 2"]
    assert bench.recap_problems("no recap at all", 2) == ["the recap lists 0 hosts, not 2"]


def test_phases_count_a_serial_play_from_its_first_batch_to_the_next_play():
    text = log([("Prepare", [0.5, 10.0]), ("Rolling", [12.0, 20.0]), ("Rolling", [21.0, 30.0]),
                ("Gate", [31.0, 100.0])])
    # Gate ends at the last timestamp (the TASKS RECAP line, 999 s).
    assert bench.phases(text) == [["Prepare", 11.5], ["Rolling", 19.0], ["Gate", 968.0]]


def test_phases_of_a_log_without_timestamps_is_empty():
    assert bench.phases("PLAY [x] ***\nTASK [y] ***\n") == []


def test_table_gives_ratios_to_the_smallest_fleet_and_marks_missing_figures():
    rows = bench.with_ratios([
        {"hosts": 4, "first_converge_s": 300.0, "noop_s": 60.0, "drift_s": 30.0, "loadavg_before": [1.5, 1, 1]},
        {"hosts": 2, "first_converge_s": 150.0, "noop_s": 40.0, "drift_s": 20.0, "loadavg_before": [0.5, 1, 1]},
        {"hosts": 16, "first_converge_s": None, "noop_s": 80.0, "drift_s": 50.0}])
    assert [row["hosts"] for row in rows] == [2, 4, 16]
    assert rows[1]["noop_ratio"] == 1.5 and rows[1]["first_converge_ratio"] == 2.0
    assert rows[2]["first_converge_ratio"] is None and rows[2]["drift_ratio"] == 2.5
    printed = bench.table(rows).splitlines()
    assert "300.0 (2.00x)" in printed[2] and "60.0 (1.50x)" in printed[2] and printed[2].endswith("1.5")
    assert printed[3].split()[:2] == ["16", "-"]
    assert printed[-1] == "(ratios to 2 hosts)"


def test_row_parses_json_values_and_keeps_other_text():
    assert bench.row(["hosts=8", "noop_s=41.5", "loadavg_before=[1.0, 2.0, 3.0]", "commit=abc123-dirty",
                      "deploy_args="]) == {
        "hosts": 8, "noop_s": 41.5, "loadavg_before": [1.0, 2.0, 3.0], "commit": "abc123-dirty", "deploy_args": ""}
    with pytest.raises(ValueError):
        bench.row(["noop_s=1"])
    with pytest.raises(ValueError):
        bench.row(["hosts=2", "garbage"])


def test_table_command_writes_the_issue_schema_and_a_rerun_of_a_size_replaces_it(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        {"hosts": 2, "first_converge_s": 100.0, "noop_s": 20.0, "drift_s": 10.0},
        {"hosts": 4, "first_converge_s": 999.0, "noop_s": 99.0, "drift_s": 99.0},
        {"hosts": 4, "first_converge_s": 200.0, "noop_s": 30.0, "drift_s": 12.0}]) + "\n")
    out = tmp_path / "fleet.json"
    run = subprocess.run([sys.executable, os.path.join(REPO, "lab/fleet_bench.py"), "table", str(rows), str(out)],
                         capture_output=True, text=True, check=True)
    written = json.loads(out.read_text())
    assert [(r["hosts"], r["first_converge_s"], r["noop_s"], r["drift_s"]) for r in written] == [
        (2, 100.0, 20.0, 10.0), (4, 200.0, 30.0, 12.0)]
    assert "30.0 (1.50x)" in run.stdout


def test_bad_arguments_get_a_message_not_a_traceback(tmp_path):
    run = subprocess.run([sys.executable, os.path.join(REPO, "lab/fleet_bench.py"), "recap",
                          str(tmp_path / "missing.log"), "2"], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "fleet_bench:" in run.stderr and "Traceback" not in run.stderr


def test_fleet_hosts_have_their_own_names_ports_and_mixed_profiles():
    assert fleet.hosts(3) == [("fleet-gpu1", 2301, "rtxpro6000-8x-pcie"), ("fleet-gpu2", 2302, "rtxpro6000-2x-pcie"),
                              ("fleet-gpu3", 2303, "rtxpro6000-8x-pcie")]
    assert fleet.lab_hosts(2) == "fleet-gpu1:2301:rtxpro6000-8x-pcie fleet-gpu2:2302:rtxpro6000-2x-pcie"
    for profile in fleet.PROFILES:
        assert os.path.isdir(os.path.join(REPO, "lab", "gpu-profiles", profile))


def test_fleet_inventory_matches_the_lab_hosts_it_starts():
    inventory = fleet.inventory(16)
    assert len(inventory["blackwell"]["hosts"]) == 16
    hostvars = inventory["_meta"]["hostvars"]
    assert sorted(v["ansible_port"] for v in hostvars.values()) == list(range(2301, 2317))
    assert "blackwell" in inventory["fleet"]["children"]


@pytest.mark.parametrize("raw", ["0", "20", "-1", "two", "2.5", ""])
def test_fleet_size_out_of_range_is_refused_with_a_message(raw):
    with pytest.raises(ValueError, match="FLEET_SIZE"):
        fleet.size({"FLEET_SIZE": raw})
    assert fleet.size({}) == 2 and fleet.size({"FLEET_SIZE": "19"}) == 19


def test_fleet_inventory_as_ansible_reads_it():
    env = dict(os.environ, FLEET_SIZE="4", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    run = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-inventory"), "-i",
                          os.path.join(REPO, "inventories", "fleet"), "--list"],
                         capture_output=True, text=True, check=True, env=env, cwd=REPO)
    listed = json.loads(run.stdout)
    assert listed["blackwell"]["hosts"] == ["fleet-gpu1", "fleet-gpu2", "fleet-gpu3", "fleet-gpu4"]
    # The lab's group variables reach the fleet's hosts (group_vars is inventories/lab's).
    assert listed["_meta"]["hostvars"]["fleet-gpu3"]["sglang_install_pip_no_index"] is True


def test_markdown_table_shows_ratios_the_restart_play_and_missing_rows():
    rows = bench.with_ratios([
        {"hosts": 2, "first_converge_s": 100.0, "noop_s": 20.0, "drift_s": 10.0, "loadavg_before": [0.5, 1, 1],
         "first_converge_plays": [["Prepare", 60.0], ["Restart the servers ...", 30.0]],
         "noop_full_s": 40.0, "drift_full_s": 30.0, "noop_module_runs_per_host": 2,
         "noop_full_module_runs_per_host": 27, "drift_module_runs_per_host": 3, "drift_full_module_runs_per_host": 40,
         "noop_cpu_s_per_host": 0.5, "noop_full_cpu_s_per_host": 4.25, "drift_cpu_s_per_host": 0.75,
         "drift_full_cpu_s_per_host": 6.0},
        {"hosts": 16, "first_converge_s": 400.0, "noop_s": None, "drift_s": 15.0, "first_converge_plays": [],
         "noop_full_s": 120.0, "noop_full_module_runs_per_host": 27}])
    lines = bench.markdown(rows).splitlines()
    assert lines[0].startswith("| hosts | first converge s | of which rolling restart s | no-op s | no-op full s |")
    assert lines[1].count("---") == lines[0].count("|") - 1
    assert lines[2] == ("| 2 | 100.0 (1.00x) | 30.0 | 20.0 (1.00x) | 40.0 (1.00x) | 10.0 (1.00x) | 30.0 (1.00x) "
                        "| 2/27 | 3/40 | 0.50/4.25 | 0.75/6.00 | 0.5 |")
    assert lines[3] == "| 16 | 400.0 (4.00x) | - | - | 120.0 (3.00x) | 15.0 (1.50x) | - | -/27 | - | - | - | ? |"
    # No Mitogen figures, no Mitogen columns.
    assert "Mitogen" not in lines[0]


def test_mitogen_columns_appear_when_a_row_has_them():
    rows = bench.with_ratios([
        {"hosts": 2, "noop_s": 10.0, "noop_mitogen_s": 5.0, "noop_full_mitogen_s": 12.0, "drift_mitogen_s": 6.0,
         "noop_mitogen_cpu_s_per_host": 0.25},
        {"hosts": 4, "noop_s": 12.0}])
    assert rows[0]["noop_mitogen_ratio"] == 1.0 and rows[1]["noop_mitogen_ratio"] is None
    header, _, first, second = bench.markdown(rows).splitlines()[:4]
    assert "| Mitogen no-op s | Mitogen drift s | Mitogen CPU s/host no-op | Mitogen CPU s/host drift |" in header
    assert first.endswith("| 5.0/12.0 | 6.0/- | 0.25/- | - | ? |")
    assert second.endswith("| - | - | - | - | ? |")
    printed = bench.table(rows).splitlines()
    assert "mitogen no-op s" in printed[0] and "5.0/12.0" in printed[1]


def test_the_default_kex_columns_appear_when_a_row_has_them_with_their_ratios():
    rows = bench.with_ratios([{"hosts": 2, "noop_s": 2.0, "noop_default_kex_s": 1.5, "drift_default_kex_s": 2.5},
                              {"hosts": 16, "noop_s": 4.4, "noop_default_kex_s": 2.7}])
    assert rows[1]["noop_default_kex_ratio"] == 1.8 and rows[1]["drift_default_kex_ratio"] is None
    header, _, first, second = bench.markdown(rows).splitlines()[:4]
    assert "| drift s | drift full s | no-op s, default kex | drift s, default kex | module runs/host no-op |" in header
    assert "| 1.5 (1.00x) | 2.5 (1.00x) |" in first and "| 2.7 (1.80x) | - |" in second
    assert "default kex" not in bench.markdown([{"hosts": 2, "noop_s": 2.0}]).splitlines()[0]


def test_the_readme_lines_give_the_smallest_and_largest_fleet_with_counted_runs_and_key_exchanges():
    rows = [{"hosts": 16, "noop_s": 3.0, "noop_module_runs_per_host": 1, "drift_s": 6.0, "noop_default_kex_s": 4.0,
             "ssh_kex": "curve25519-sha256", "ssh_kex_default": "sntrup761x25519-sha512@openssh.com"},
            {"hosts": 2, "noop_s": 1.6, "drift_s": 2.5, "noop_default_kex_s": 2.0}]
    assert bench.readme_lines(rows).splitlines() == [
        "- no-op deploy 1.6 s at 2 hosts, 3.0 s at 16 (1.88x), ssh key exchange curve25519-sha256; module runs a "
        "host: 1, counted; with OpenSSH's default key exchange (sntrup761x25519-sha512@openssh.com) 2.0 s at 2 hosts, "
        "4.0 s at 16 (2.00x)",
        "- drift check 2.5 s at 2 hosts, 6.0 s at 16 (2.40x), ssh key exchange curve25519-sha256"]


def _generated(path, command):
    """The lines of PATH's block generated by COMMAND."""
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        text = handle.read()
    begin = "<!-- BEGIN GENERATED: %s -->\n" % command
    return text[text.index(begin) + len(begin):text.index("\n<!-- END GENERATED -->", text.index(begin))]


def test_the_readme_and_the_fleet_page_show_the_committed_figures():
    with open(os.path.join(REPO, "docs/measurements/fleet.json"), encoding="utf-8") as handle:
        rows = json.load(handle)
    assert _generated("README.md", "lab/fleet_bench.py summary docs/measurements/fleet.json") == \
        bench.readme_lines(rows)
    assert _generated("docs/fleet-scale.md", "lab/fleet_bench.py markdown docs/measurements/fleet.json") == \
        bench.markdown(rows)


# count-ssh.sh's log, as Ansible's ssh connection plugin makes it (see lab/count-ssh.sh): two hosts on one address.
SSH_LOG = """127.0.0.1:2301\tmodule\t1796500169.65
127.0.0.1:2302\tmodule\t1796500169.66
127.0.0.1:2301\tmodule\t1796500169.70
127.0.0.1:2301\tshell\t1796500169.71
127.0.0.1:2302\ttransfer\t1796500169.72

127.0.0.1:2301\tcontrol\t1796500169.80
"""


def test_ssh_log_counts_each_kind_per_host_and_port():
    counts = bench.ssh_log(SSH_LOG)
    assert counts == {"127.0.0.1:2301": {"module": 2, "shell": 1, "transfer": 0, "control": 1},
                      "127.0.0.1:2302": {"module": 1, "shell": 0, "transfer": 1, "control": 0}}
    summary = bench.runs(counts, 2)
    assert summary["hosts"] == 2
    assert summary["module"] == {"max": 2, "mean": 1.5, "min": 1}
    assert summary["all"] == {"max": 4, "mean": 3.0, "min": 2}
    assert summary["control"] == {"max": 1, "mean": 0.5, "min": 0}


@pytest.mark.parametrize("line", ["127.0.0.1:2301 module", "127.0.0.1:2301\tpython", "\tmodule", "garbage"])
def test_ssh_log_refuses_a_line_it_cannot_read(line):
    with pytest.raises(ValueError, match="line 2"):
        bench.ssh_log("127.0.0.1:2301\tmodule\n" + line + "\n")


def test_runs_refuse_a_log_of_another_fleet_size():
    counts = bench.ssh_log(SSH_LOG)
    with pytest.raises(ValueError, match="names 2 hosts .*127.0.0.1:2302.*, not 3"):
        bench.runs(counts, 3)
    with pytest.raises(ValueError, match="names 0 hosts \\(none\\), not 2"):
        bench.runs({}, 2)


def test_runs_command_prints_the_busiest_hosts_count_of_a_kind(tmp_path):
    log_file = tmp_path / "ssh.log"
    log_file.write_text(SSH_LOG)
    script = [sys.executable, os.path.join(REPO, "lab/fleet_bench.py"), "runs", str(log_file)]
    assert subprocess.run(script + ["2", "--max", "module"], capture_output=True, text=True,
                          check=True).stdout == "2\n"
    assert json.loads(subprocess.run(script + ["2"], capture_output=True, text=True, check=True).stdout)[
        "shell"]["max"] == 1
    wrong = subprocess.run(script + ["4", "--max", "module"], capture_output=True, text=True, check=False)
    assert wrong.returncode == 2 and "not 4" in wrong.stderr and wrong.stdout == ""
    bad_kind = subprocess.run(script + ["2", "--max", "hosts"], capture_output=True, text=True, check=False)
    assert bad_kind.returncode == 2 and "--max takes one of" in bad_kind.stderr


# Argument lists as ansible-core 2.19's ssh plugin builds them (taken from a -vvv run against the lab).
SSH_OPTS = ["-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "StrictHostKeyChecking=no", "-o",
            "Port=2221", "-o", 'IdentityFile="/k/id_ed25519"', "-o", 'User="root"', "-o", "ConnectTimeout=10",
            "-o", 'ControlPath="/tmp/cp/d8c421cc83"']
INVOCATIONS = [
    ("count-ssh.sh", SSH_OPTS + ["127.0.0.1", "/bin/sh -c '/usr/bin/python3 && sleep 0'"], "module"),
    ("count-ssh.sh", SSH_OPTS + ["-tt", "127.0.0.1", "/bin/sh -c '/usr/bin/python3 /root/.ansible/tmp/a-1/"
                                 "AnsiballZ_stat.py && sleep 0'"], "module"),
    ("count-ssh.sh", SSH_OPTS + ["127.0.0.1", "/bin/sh -c 'sudo -H -S -n  -u svc /bin/sh -c '\"'\"'echo "
                                 "BECOME-SUCCESS-x ; /usr/bin/python3.11'\"'\"' && sleep 0'"], "module"),
    ("count-ssh.sh", SSH_OPTS + ["-tt", "127.0.0.1", "true"], "shell"),
    ("count-ssh.sh", SSH_OPTS + ["127.0.0.1", "/bin/sh -c 'rm -f -r /root/.ansible/tmp/python-x/ > /dev/null "
                                 "2>&1 && sleep 0'"], "shell"),
    ("count-ssh.sh", SSH_OPTS + ["-O", "check", "127.0.0.1"], "control"),
    ("count-sftp.sh", ["-b", "-"] + SSH_OPTS + ["[127.0.0.1]"], "transfer"),
    ("count-scp.sh", SSH_OPTS + ["/tmp/src", "[127.0.0.1]:/root/dest"], "transfer"),
]


@pytest.mark.parametrize("script, args, kind", INVOCATIONS)
def test_count_ssh_logs_host_port_and_kind_then_runs_the_real_program_with_the_same_arguments(
        tmp_path, script, args, kind):
    log_file = tmp_path / "ssh.log"
    real = tmp_path / "real"
    real.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\nexit 7\n')
    real.chmod(0o755)
    env = dict(os.environ, COUNT_SSH_LOG=str(log_file), COUNT_SSH_REAL=str(real))
    run = subprocess.run([os.path.join(REPO, "lab", script)] + args, capture_output=True, text=True, env=env,
                         check=False)
    assert run.returncode == 7 and run.stdout.splitlines() == args
    assert bench.ssh_log(log_file.read_text()) == {"127.0.0.1:2221": dict(dict.fromkeys(bench.KINDS, 0), **{kind: 1})}


def test_count_ssh_without_a_log_refuses_to_run(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "COUNT_SSH_LOG"}
    run = subprocess.run([os.path.join(REPO, "lab", "count-ssh.sh"), "127.0.0.1", "true"], capture_output=True,
                         text=True, env=env, check=False)
    assert run.returncode != 0 and "COUNT_SSH_LOG" in run.stderr


def test_timed_writes_the_commands_status_and_the_cpu_of_its_children(tmp_path):
    out = tmp_path / "t.json"
    burn = [sys.executable, "-c", "import sys; sum(range(3 * 10 ** 7)); sys.exit(3)"]
    assert bench.timed(str(out), burn) == 3
    result = json.loads(out.read_text())
    assert result["rc"] == 3 and result["cpu_s"] >= 0.1
    assert result["cpu_s"] == pytest.approx(result["user_s"] + result["sys_s"], abs=0.011)
    assert bench.cpu_per_host(result, 2) == round(result["cpu_s"] / 2, 3)


def test_timed_with_a_control_dir_waits_for_what_detached_from_the_run(tmp_path):
    """A control master (ControlPersist) leaves the run's process tree; with --control-dir the run's own masters
    are stopped and waited for, so what they did is in the figure. Here a detached child stands in for one."""
    done = tmp_path / "done"
    late = "import time; time.sleep(0.5); open(%r, 'w').close()" % str(done)
    detach = [sys.executable, "-c", "import subprocess, sys; subprocess.Popen([sys.executable, '-c', %r])" % late]
    run = subprocess.run([sys.executable, os.path.join(REPO, "lab/fleet_bench.py"), "timed", str(tmp_path / "t.json"),
                          "--control-dir", str(tmp_path), "--"] + detach, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert done.exists()
    assert json.loads((tmp_path / "t.json").read_text())["control_masters_counted"] is True


def check(task, item, drifted=False):
    return {"task": task, "item": item, "drifted": drifted, "category": "other", "expected": 1, "actual": 1}


def test_same_report_names_hosts_whose_checks_differ_between_two_runs():
    probe = "sglang_drift : Drift probe: the host against its last converge (fast path)"
    linear = {"hosts": {"lab-gpu1": {"checks": [check(probe, "layout"), check(probe, "nccl")]},
                        "lab-gpu2": {"checks": [check(probe, "layout"), check(probe, "nccl")]}}}
    # The same checks in another order (a strategy that reports hosts in another order) are the same report.
    reordered = {"hosts": {"lab-gpu2": {"checks": [check(probe, "nccl"), check(probe, "layout")]},
                           "lab-gpu1": {"checks": [check(probe, "nccl"), check(probe, "layout")]}}}
    assert bench.report_differences(linear, reordered) == []
    # What was seen under Mitogen: one host's probe results missing, and a check that drifted in one run only.
    lost = {"hosts": {"lab-gpu1": {"checks": [check(probe, "layout"), check(probe, "nccl", drifted=True)]},
                      "lab-gpu2": {"checks": []}}}
    assert bench.report_differences(linear, lost) == [
        "lab-gpu1: 2 checks against 2",
        "lab-gpu1: only in the first: %s / nccl (drifted False)" % probe,
        "lab-gpu1: only in the second: %s / nccl (drifted True)" % probe,
        "lab-gpu2: 2 checks against 0",
        "lab-gpu2: only in the first: %s / layout (drifted False)" % probe,
        "lab-gpu2: only in the first: %s / nccl (drifted False)" % probe]
    assert bench.report_differences(linear, {"hosts": {"lab-gpu1": linear["hosts"]["lab-gpu1"]}}) == [
        "lab-gpu2: only in the first report"]
    # A check reported twice for a host is a difference too.
    doubled = {"hosts": {"lab-gpu1": {"checks": linear["hosts"]["lab-gpu1"]["checks"] * 2},
                         "lab-gpu2": linear["hosts"]["lab-gpu2"]}}
    assert bench.report_differences(linear, doubled) == ["lab-gpu1: 2 checks against 4"]


def test_same_report_command_and_the_tables_note_on_a_differing_mitogen_report(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"hosts": {"h": {"checks": [check("t", "i")]}}}))
    second.write_text(json.dumps({"hosts": {"h": {"checks": []}}}))
    script = [sys.executable, os.path.join(REPO, "lab/fleet_bench.py"), "same-report"]
    assert subprocess.run(script + [str(first), str(first)], check=False).returncode == 0
    run = subprocess.run(script + [str(first), str(second)], capture_output=True, text=True, check=False)
    assert run.returncode == 1 and "h: 1 checks against 0" in run.stderr
    rows = bench.with_ratios([{"hosts": 2, "drift_mitogen_s": 3.0, "drift_mitogen_report_as_linear": False,
                               "drift_full_mitogen_s": 4.0, "drift_full_mitogen_report_as_linear": True}])
    note = "drift_mitogen at 2 hosts: its drift report differs from the linear strategy's"
    assert [line for line in bench.table(rows).splitlines() if "differs" in line] == [
        "(%s (see drift_mitogen-report-diff.txt))" % note]
    assert bench.markdown(rows).splitlines()[-1].startswith(note)
