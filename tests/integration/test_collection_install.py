"""The built collection as its users get it: the tarball installed into an empty collections path.

Built from this checkout (scripts/build_collection.py, what `make collection` runs), installed with
`ansible-galaxy collection install <tarball> -p <empty dir>`, then used from a directory that holds neither the
checkout's ansible.cfg nor its library/ or roles/: ansible-doc renders every module by FQCN, every playbook passes
a syntax check by FQCN, and the host group is the inventory's, whatever it is called.
"""
import os
import subprocess
import sys
import textwrap

import pytest
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
bc = load_file("scripts/build_collection.py", "build_collection")

MODULES = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "library")) if f.endswith(".py"))
PLAYBOOKS = sorted(f[:-4] for f in os.listdir(os.path.join(REPO, "playbooks")) if f.endswith(".yml"))


@pytest.fixture(name="installed", scope="module")
def _installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("collection")
    root = bc.build_tree(str(tmp / "build"))
    tarball = bc.build_tarball(root, str(tmp / "dist"))
    assert os.path.isfile(tarball)
    collections = tmp / "collections"
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--force", tarball,
                    "-p", str(collections)], check=True, capture_output=True)
    workdir = tmp / "elsewhere"  # no ansible.cfg, no library/, no roles/ here
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + env["PATH"])
    return {"dir": workdir, "env": env, "collections": collections}


def run(installed, *argv):
    return subprocess.run([os.path.join(BIN, argv[0])] + list(argv[1:]), cwd=installed["dir"], env=installed["env"],
                          capture_output=True, text=True, check=False)


def test_the_install_holds_the_collection_and_nothing_of_the_checkout(installed):
    root = installed["collections"] / "ansible_collections" / "gpufleet" / "sglang"
    assert (root / "MANIFEST.json").is_file()
    assert sorted(os.listdir(root / "plugins" / "modules")) == [m + ".py" for m in MODULES]
    for left_out in ("lab", "molecule", "inventories", "library", "module_utils", "scripts", ".cache"):
        assert not (root / left_out).exists(), left_out


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_renders_every_module_by_fqcn(installed, module):
    result = run(installed, "ansible-doc", "gpufleet.sglang." + module)
    assert result.returncode == 0, result.stderr
    assert "gpufleet.sglang.%s" % module in result.stdout
    assert "OPTIONS" in result.stdout or "RETURN VALUES" in result.stdout


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_playbook_passes_a_syntax_check_by_fqcn(installed, playbook):
    result = run(installed, "ansible-playbook", "gpufleet.sglang." + playbook, "--syntax-check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_modules_run_from_the_collection(installed):
    """A module and its module_utils import from the installed collection (no checkout on the module path)."""
    result = run(installed, "ansible", "localhost", "-m", "gpufleet.sglang.nvidia_gpu_facts",
                 "-a", "nvidia_smi=/nonexistent/nvidia-smi")
    # Imports worked and the module answered with its own message about the missing binary, not a traceback.
    assert "/nonexistent/nvidia-smi" in result.stdout, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_the_host_group_is_the_inventorys_whatever_its_name(installed):
    inventory = installed["dir"] / "hosts.yml"
    inventory.write_text(textwrap.dedent("""\
        gpu_servers:
          hosts:
            gpu-a: {ansible_connection: local}
            gpu-b: {ansible_connection: local}
        blackwell:
          hosts:
            other-host: {ansible_connection: local}
    """), encoding="utf-8")

    def hosts(*extra):
        result = run(installed, "ansible-playbook", "-i", str(inventory), "gpufleet.sglang.deploy", "--list-hosts",
                     *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout
    assert "gpu-a" in hosts("-e", "sglang_hosts=gpu_servers") and "other-host" not in hosts(
        "-e", "sglang_hosts=gpu_servers")
    assert "other-host" in hosts() and "gpu-a" not in hosts()  # default: blackwell


def test_controller_result_dirs_default_beside_the_inventory(installed, tmp_path):
    """Reports and baselines land in the fleet's inventory folder, not in the installed collection or a checkout."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "hosts.yml").write_text("gpu_servers:\n  hosts:\n    gpu-a: {ansible_connection: local}\n",
                                     encoding="utf-8")
    roles = installed["collections"] / "ansible_collections" / "gpufleet" / "sglang" / "roles"
    playbook = tmp_path / "show.yml"
    playbook.write_text(textwrap.dedent("""\
        - name: Show the defaults
          hosts: gpu_servers
          gather_facts: false
          tasks:
            - name: Read the roles' defaults
              ansible.builtin.include_vars: "{{ item }}"
              loop: %s
            - name: Show them
              ansible.builtin.debug:
                msg: "DIRS {{ sglang_benchmark_results_dir }} {{ gpu_probes_report_dir }}"
    """ % [str(roles / role / "defaults" / "main.yml") for role in ("sglang_benchmark", "gpu_probes")]),
        encoding="utf-8")
    result = run(installed, "ansible-playbook", "-i", str(fleet / "hosts.yml"), str(playbook))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "DIRS %s/reports/benchmark %s/reports/allreduce" % (fleet, fleet) in result.stdout
