"""sglang_layout's entry point controller_dir, which sglang_benchmark and gpu_probes call for every folder they write
on the controller: a folder an inventory would read (inside an inventory source folder, or the folder of an
inventory file) is refused before anything is written, naming the variable; a hidden folder on the way down is not
read by an inventory and passes; a missing folder is made with one line saying where. Real ansible-playbook, a local
host of an inventory written here."""
import yaml

from tests.helpers.ansible_run import failure, run_playbook, task_results

PLAY = [{"name": "A controller folder", "hosts": "gpu_nodes", "gather_facts": False, "tasks": [{
    "name": "Check or make it", "ansible.builtin.include_role": {"name": "sglang_layout", "tasks_from": "controller_dir"},
    "vars": {"sglang_layout_controller_path": "{{ folder }}", "sglang_layout_controller_setting": "sglang_benchmark_results_dir",
             "sglang_layout_controller_purpose": "benchmark results and baselines",
             "sglang_layout_controller_create": "{{ create }}"}}]}]


def run(tmp_path, folder, create=True, inventory_file=False):
    fleet = tmp_path / "fleet"
    fleet.mkdir(exist_ok=True)
    (fleet / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {"gpu-a": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY, sort_keys=False))
    rc, report = run_playbook(str(tmp_path / "play.yml"), {"folder": str(folder), "create": create},
                              inventory=str(fleet / "hosts.yml") if inventory_file else str(fleet))
    return rc, report


def said(report):
    return [result.get("msg") for name, result in task_results(report, "gpu-a") if name == "Say where it is"
            and not result.get("skipped")]


def test_a_folder_inside_the_inventory_folder_is_refused_naming_the_variable(tmp_path):
    rc, report = run(tmp_path, tmp_path / "fleet" / "reports" / "benchmark")
    assert rc != 0
    name, msg = failure(report, "gpu-a")
    assert name == "Refuse a folder an inventory would read"
    assert "sglang_benchmark_results_dir (%s/fleet/reports/benchmark) is inside the inventory folder %s/fleet" % (
        tmp_path, tmp_path) in msg
    assert not (tmp_path / "fleet" / "reports").exists()


def test_the_folder_of_an_inventory_file_counts_too_and_so_does_a_path_through_dots(tmp_path):
    """-i fleet/hosts.yml today, -i fleet/ tomorrow: its folder would read the reports then."""
    rc, report = run(tmp_path, "%s/elsewhere/../fleet/reports" % tmp_path, inventory_file=True, create=False)
    assert rc != 0 and "is inside the inventory folder %s/fleet:" % tmp_path in failure(report, "gpu-a")[1]


def test_a_hidden_folder_inside_the_inventory_folder_is_never_read_and_passes(tmp_path):
    rc, report = run(tmp_path, tmp_path / "fleet" / ".reports" / "benchmark")
    assert rc == 0, failure(report, "gpu-a")
    assert (tmp_path / "fleet" / ".reports" / "benchmark").is_dir()


def test_a_folder_outside_is_made_once_with_a_line_saying_where(tmp_path):
    folder = tmp_path / "results" / "benchmark"
    rc, report = run(tmp_path, folder)
    assert rc == 0, failure(report, "gpu-a")
    assert folder.is_dir()
    assert said(report) == ["benchmark results and baselines: made %s on the controller (set "
                            "sglang_benchmark_results_dir to put it elsewhere)." % folder]
    rc, report = run(tmp_path, folder)
    assert rc == 0 and said(report) == []  # there already: nothing to say


def test_the_check_alone_makes_nothing(tmp_path):
    folder = tmp_path / "results"
    rc, report = run(tmp_path, folder, create=False)
    assert rc == 0 and not folder.exists() and said(report) == []
