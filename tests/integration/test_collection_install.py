"""The built collection as its users get it: the tarball installed into an empty collections path.

Built from this checkout (scripts/build_collection.py, what `make collection` runs), installed by the commands of
the operators' guide (collection/README.md's install block, run verbatim into an empty folder), then used from a directory that holds neither the
checkout's ansible.cfg nor its library/ or roles/: ansible-doc renders every module by FQCN, every playbook passes
a syntax check by FQCN, and the host group is the inventory's, whatever it is called.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import ansible
import pytest
import yaml
from ansible.galaxy.dependency_resolution.versioning import meets_requirements
from tests.helpers import operator_guide
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
bc = load_file("scripts/build_collection.py", "build_collection")

MODULES = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "library")) if f.endswith(".py"))
PLAYBOOKS = sorted(f[:-4] for f in os.listdir(os.path.join(REPO, "playbooks")) if f.endswith(".yml"))


# The collections a role could name by FQCN: those the pinned `ansible` package bundles.
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(ansible.__file__)), "ansible_collections")


def declared_dependencies():
    with open(os.path.join(REPO, "collection", "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["dependencies"] or {}


@pytest.fixture(name="installed", scope="module")
def _installed(tmp_path_factory):
    """The tarball installed as with bare ansible-core, by the operators' guide's install block run verbatim
    (tests/helpers/operator_guide.py: an ansible.cfg, both tarballs in one offline install, the checks it writes);
    the `ansible` package's collections are not on the path (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=False), and the
    tests run from a folder without that ansible.cfg, with the collections path in the environment."""
    tmp = tmp_path_factory.mktemp("collection")
    root = bc.build_tree(str(tmp / "build"))
    tarball = bc.build_tarball(root, str(tmp / "dist"))
    assert os.path.isfile(tarball)
    folder = operator_guide.fleet_folder(str(tmp / "fleet"), tarball)
    collections = tmp / "fleet" / "collections"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="False",
               ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + env["PATH"])
    result = operator_guide.install(folder, env)
    assert result.returncode == 0, result.stdout + result.stderr
    workdir = tmp / "elsewhere"  # no ansible.cfg, no library/, no roles/ here
    workdir.mkdir()
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


# One ansible-doc for every module (it takes several names, as a user may give it), each module's test reading its
# part: an ansible-doc start costs more CPU than rendering one module.
@pytest.fixture(name="rendered", scope="module")
def _rendered(installed):
    """(ansible-doc's result for every module by FQCN, {module: the text it rendered for that module})."""
    result = run(installed, "ansible-doc", *["gpufleet.sglang." + module for module in MODULES])
    parts, module = {}, None
    for line in result.stdout.splitlines(keepends=True):
        match = re.match(r"> MODULE gpufleet\.sglang\.(\w+) ", line)
        if match:
            module = match.group(1)
            assert module not in parts, "ansible-doc rendered %s twice" % module
            parts[module] = ""
        if module:
            parts[module] += line
    return result, parts


@pytest.fixture(name="documented", scope="module")
def _documented(installed):
    """ansible-doc --json's result for every module by FQCN, in one run."""
    return run(installed, "ansible-doc", "--json", *["gpufleet.sglang." + module for module in MODULES])


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_renders_every_module_by_fqcn(rendered, module):
    result, parts = rendered
    assert result.returncode == 0, result.stderr
    text = parts.get(module, "")
    assert "gpufleet.sglang.%s" % module in text, result.stdout[:3000]
    assert "OPTIONS" in text or "RETURN VALUES" in text


@pytest.mark.parametrize("module", MODULES)
def test_every_modules_examples_name_the_projects_modules_by_fqcn(documented, module):
    result = documented
    assert result.returncode == 0, result.stderr
    examples = yaml.safe_load(json.loads(result.stdout)["gpufleet.sglang." + module]["examples"])
    named = [key for task in tasks_of(examples) for key in task if key.rsplit(".", 1)[-1] in MODULES]
    assert named and all(key.startswith("gpufleet.sglang.") for key in named), named


def tasks_of(entries):
    """The tasks of a list of tasks or plays, blocks followed."""
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        if "hosts" in entry:
            for key in ("pre_tasks", "tasks", "post_tasks"):
                yield from tasks_of(entry.get(key))
            continue
        yield entry
        for key in ("block", "rescue", "always"):
            yield from tasks_of(entry.get(key))


@pytest.fixture(name="syntax_checked", scope="module")
def _syntax_checked(installed):
    """One syntax check of every playbook by FQCN (ansible-playbook takes several, checking each in turn)."""
    return run(installed, "ansible-playbook", *["gpufleet.sglang." + playbook for playbook in PLAYBOOKS],
               "--syntax-check")


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_playbook_passes_a_syntax_check_by_fqcn(installed, syntax_checked, playbook):
    result = syntax_checked
    assert result.returncode == 0, result.stdout + result.stderr
    # checked from the installed collection (ansible-playbook names each by the file the FQCN resolved to)
    path = installed["collections"] / "ansible_collections" / "gpufleet" / "sglang" / "playbooks" / (playbook + ".yml")
    assert "playbook: %s\n" % path in result.stdout, result.stdout


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
        """{play name: its hosts} of --list-hosts."""
        result = run(installed, "ansible-playbook", "-i", str(inventory), "gpufleet.sglang.deploy", "--list-hosts",
                     *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        plays, name = {}, None
        for line in result.stdout.splitlines():
            match = re.match(r"\s+play #\d+ \(.*?\): (.*?)\tTAGS", line)
            if match:
                name = match.group(1)
                plays[name] = []
            elif name and line.startswith(" " * 6) and line.strip():
                plays[name].append(line.strip())
        return plays
    prepare = "Prepare SM120 hosts (preflight, locked install, fusion patch, NCCL settings)"
    assert sorted(hosts("-e", "sglang_hosts=gpu_servers")[prepare]) == ["gpu-a", "gpu-b"]
    assert hosts()[prepare] == ["other-host"]  # default: blackwell


def test_a_group_the_inventory_lacks_fails_with_how_to_name_it(installed, tmp_path):
    """The first play (playbooks/plays/sglang_hosts.yml, imported by a relative path) runs from the installed
    collection too: no `blackwell` in the inventory and no -e sglang_hosts fails, and says how to name the group."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpu_servers:\n  hosts:\n    gpu-a: {ansible_connection: local}\n", encoding="utf-8")
    result = run(installed, "ansible-playbook", "-i", str(inventory), "gpufleet.sglang.deploy")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no host matched 'blackwell'" in result.stdout and "-e sglang_hosts=<group>" in result.stdout
    assert "PLAY [Prepare SM120 hosts" not in result.stdout


def test_the_deploys_preflight_runs_from_the_collection(installed, tmp_path):
    """The one preflight (an action plugin, its module_utils, the roles it reads, the module it runs on the host) works
    from the installed collection: a misspelled variable is named with the closest input before any role runs. A
    listen address sglang_server's next check refuses keeps the run off this machine should the preflight pass."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(textwrap.dedent("""\
        blackwell:
          hosts:
            gpu-a:
              ansible_connection: local
              ansible_python_interpreter: "{{ ansible_playbook_python }}"
              sglang_server_model_path: /srv/models/m
              sglang_server_host: 0.0.0.0
              nccl_tuning_setings: {NCCL_P2P_LEVEL: PHB}
    """), encoding="utf-8")
    result = run(installed, "ansible-playbook", "-i", str(inventory), "gpufleet.sglang.deploy")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Preflight refused gpu-a before any change (1 problem): 1. nccl_tuning_setings is not a variable any " \
           "role reads" in result.stdout, result.stdout
    assert "did you mean nccl_tuning_settings?" in result.stdout and "changed=0" in result.stdout
    assert "sglang_server_allow_all_interfaces" not in result.stdout  # stopped at the preflight


def test_controller_result_dirs_default_outside_the_inventory(installed, tmp_path):
    """Reports, baselines and the benchmark client's venv default to the controller user's XDG folders
    (~/.local/share/gpufleet-sglang, ~/.cache/gpufleet-sglang), never the inventory's folder (the next `-i <folder>`
    would read them as inventory), the installed collection or a checkout; the roles' entry point makes one with a
    line saying where, and nothing is written under the inventory folder."""
    fleet, home = tmp_path / "fleet", tmp_path / "home"
    fleet.mkdir()
    home.mkdir()
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
                msg: "DIRS {{ sglang_benchmark_results_dir }} {{ gpu_probes_report_dir }} {{ sglang_benchmark_client_venv }}"
            - name: Make the results folder as sglang_benchmark does
              ansible.builtin.include_role:
                name: gpufleet.sglang.sglang_layout
                tasks_from: controller_dir
              vars:
                sglang_layout_controller_path: "{{ sglang_benchmark_results_dir }}"
                sglang_layout_controller_setting: sglang_benchmark_results_dir
                sglang_layout_controller_purpose: benchmark results and baselines
                sglang_layout_controller_create: true
    """ % [str(roles / role / "defaults" / "main.yml") for role in ("sglang_layout", "sglang_benchmark", "gpu_probes")]),
        encoding="utf-8")

    def show(**environment):
        env = {k: v for k, v in installed["env"].items() if not k.startswith("XDG_")}
        env.update(HOME=str(home), **environment)
        result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(fleet), str(playbook)],
                                cwd=installed["dir"], env=env, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout
    out = show()
    data, cache = home / ".local" / "share" / "gpufleet-sglang", home / ".cache" / "gpufleet-sglang"
    assert "DIRS %s/benchmark %s/allreduce %s/bench-client" % (data, data, cache) in out
    assert "benchmark results and baselines: made %s/benchmark on the controller" % data in out
    assert (data / "benchmark").is_dir()
    assert sorted(os.listdir(fleet)) == ["hosts.yml"]
    assert "Unable to parse" not in out
    # The XDG base directories move them.
    out = show(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert "DIRS {0}/data/gpufleet-sglang/benchmark {0}/data/gpufleet-sglang/allreduce {0}/cache/gpufleet-sglang/" \
        "bench-client".format(tmp_path) in out


# --- dependencies: every collection the roles and playbooks name, declared and installed with ours ---------------

OWN_OR_CORE = {("ansible", "builtin"), ("ansible", "legacy"), ("gpufleet", "sglang")}
FQCN = re.compile(r"(?<![\w.])([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)\.[a-z_][a-z0-9_]*")


def known_collections():
    """(namespace, name) of every collection the `ansible` package holds: what a role could name by FQCN."""
    return {(ns, name) for ns in os.listdir(BUNDLED) if os.path.isdir(os.path.join(BUNDLED, ns))
            for name in os.listdir(os.path.join(BUNDLED, ns))
            if os.path.isfile(os.path.join(BUNDLED, ns, name, "MANIFEST.json"))}


def used_collections():
    """{'ns.name': [files]} of the collections other than ansible.builtin and ours that the shipped roles and
    playbooks name by FQCN (modules, callbacks, lookups, filters: any text), read from the tree."""
    known, used = known_collections() - OWN_OR_CORE, {}
    for folder in ("roles", "playbooks"):
        for dirpath, _dirs, files in os.walk(os.path.join(REPO, folder)):
            for name in files:
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    for match in FQCN.finditer(handle.read()):
                        if match.groups() in known:
                            used.setdefault("%s.%s" % match.groups(), set()).add(os.path.relpath(path, REPO))
    return used


def test_the_collections_the_tree_uses_are_found():
    """The scan finds what it must: ansible.posix's json callback, which drift runs use."""
    assert "roles/drift_schedule/templates/drift-check.sh.j2" in used_collections()["ansible.posix"]


def test_the_manifest_declares_every_collection_the_roles_and_playbooks_name(installed):
    root = installed["collections"] / "ansible_collections" / "gpufleet" / "sglang"
    manifest = json.loads((root / "MANIFEST.json").read_text(encoding="utf-8"))["collection_info"]
    used = used_collections()
    assert sorted(manifest["dependencies"]) == sorted(used), used
    with open(os.path.join(REPO, "requirements.yml"), encoding="utf-8") as handle:
        requirements = {c["name"]: c.get("version", "*") for c in yaml.safe_load(handle)["collections"]}
    for name, version_range in manifest["dependencies"].items():
        # the checkout's requirements.yml installs the same range (bare ansible-core: -r requirements.yml)
        assert requirements.get(name) == version_range, (name, requirements.get(name), version_range)
        # and the install brought it, at a version of that range
        installed_manifest = installed["collections"] / "ansible_collections" / name.replace(".", "/") / "MANIFEST.json"
        version = json.loads(installed_manifest.read_text(encoding="utf-8"))["collection_info"]["version"]
        assert meets_requirements(version, version_range), (name, version, version_range)


def test_without_its_dependencies_the_install_is_refused_offline(installed, tmp_path):
    """A dependency the install cannot find is an error, not a collection that fails later at run time."""
    tarball = next((installed["dir"].parent / "dist").glob("*.tar.gz"))
    empty = str(tmp_path / "empty")  # the only collections path: nothing installed anywhere
    result = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "-p", empty,
                             str(tarball)], cwd=installed["dir"], capture_output=True, text=True, check=False,
                            env=dict(installed["env"], ANSIBLE_COLLECTIONS_PATH=empty))
    assert result.returncode != 0
    for name in declared_dependencies():
        assert name in result.stdout + result.stderr, result.stdout + result.stderr


# --- plugin documentation: ansible-doc shows every filter (and lookup) -------------------------------------------

def plugin_names():
    """[(ansible-doc type, name)] of the plugins users call by name, read from the tree."""
    names = []
    for kind, folder in bc.plugin_folders(REPO).items():
        if kind == "filter":
            names += [(kind, name) for name in sorted(bc.filter_names(folder))]
        elif kind in ("lookup", "test"):
            names += [(kind, name) for name in bc.py_names(folder)]
    return names


def test_ansible_doc_lists_every_plugin_documented(installed):
    for kind in sorted({kind for kind, _name in plugin_names()}):
        result = run(installed, "ansible-doc", "-t", kind, "-l", "gpufleet.sglang")
        assert result.returncode == 0, result.stderr
        listed = dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())
        assert sorted(listed) == sorted("gpufleet.sglang." + n for k, n in plugin_names() if k == kind), listed
        assert not [name for name, text in listed.items() if "UNDOCUMENTED" in text], result.stdout


@pytest.mark.parametrize("kind,name", plugin_names())
def test_ansible_doc_renders_every_plugin_by_fqcn(installed, kind, name):
    result = run(installed, "ansible-doc", "-t", kind, "gpufleet.sglang." + name)
    assert result.returncode == 0, result.stderr
    assert "NAME: %s" % name in result.stdout and "EXAMPLES" in result.stdout, result.stdout
    assert "gpufleet.sglang.%s" % name in result.stdout  # the examples call it by FQCN


# --- drift in one command, by FQCN ------------------------------------------------------------------------------

STAND_IN_DRIFT = textwrap.dedent("""\
    - name: A stand-in for the drift playbook (the real one needs deployed hosts)
      hosts: "{{ sglang_hosts | default('blackwell') }}"
      gather_facts: false
      tasks:
        - name: Insist on a dry run with diffs, as the drift playbook does
          ansible.builtin.assert:
            that: [ansible_check_mode, ansible_diff_mode]
        - name: A file a deploy would write
          ansible.builtin.copy:
            dest: "{{ fake_file }}"
            content: "wanted\\n"
            mode: "0644"
""")


@pytest.fixture(name="fleet")
def _fleet(installed, tmp_path):
    """An inventory of the user's (group gpu_nodes, two hosts over a local connection), each with a file a deploy
    would write: node-a's as wanted, node-b's edited."""
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    hosts = {}
    for host, content in (("node-a", "wanted\n"), ("node-b", "edited\n")):
        path = tmp_path / (host + ".txt")
        path.write_text(content, encoding="utf-8")
        path.chmod(0o644)
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "fake_file": str(path)}
    (inventory / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts}}), encoding="utf-8")
    playbook = tmp_path / "stand_in_drift.yml"
    playbook.write_text(STAND_IN_DRIFT, encoding="utf-8")
    return {"inventory": inventory, "playbook": playbook, "reports": tmp_path / "reports"}


def drift_check(installed, fleet, *extra):
    return run(installed, "ansible-playbook", "-i", str(fleet["inventory"] / "hosts.yml"),
               "gpufleet.sglang.drift_check", "-e", "sglang_hosts=gpu_nodes",
               "-e", "drift_check_report_dir=%s" % fleet["reports"], *extra)


def test_drift_check_runs_the_dry_run_and_writes_the_report(installed, fleet):
    result = drift_check(installed, fleet, "-e", "drift_check_playbook=%s" % fleet["playbook"])
    assert result.returncode == 2, result.stdout + result.stderr  # drift: the command fails
    report = json.loads((fleet["reports"] / "latest.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == 1
    assert {host: info["status"] for host, info in report["hosts"].items()} == {"node-a": "clean", "node-b": "drift"}
    assert "drift reports: %s" % fleet["reports"] in result.stdout  # a line says where
    assert "node-b  drift" in result.stdout and "-edited" in result.stdout  # the summary, with the diff
    assert ("drift check: drift: 2 hosts, 1 clean, 1 drift; exit code 1 (a host drifted, none failed or was "
            "unreachable)") in result.stdout
    assert len(list(fleet["reports"].glob("drift-*.json"))) == 1 and (fleet["reports"] / "summary.txt").is_file()
    assert os.listdir(fleet["inventory"]) == ["hosts.yml"]  # nothing written beside the inventory
    assert (fleet["inventory"].parent / "node-b.txt").read_text(encoding="utf-8") == "edited\n"  # a dry run


def test_drift_check_passes_the_limit_on_and_a_clean_run_succeeds(installed, fleet):
    result = drift_check(installed, fleet, "-e", "drift_check_playbook=%s" % fleet["playbook"], "--limit", "node-a")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((fleet["reports"] / "latest.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == 0 and sorted(report["hosts"]) == ["node-a"]
    assert "drift check: clean" in result.stdout


def test_drift_check_runs_the_collections_drift_playbook_by_default(installed, fleet):
    """No stand-in: the installed drift playbook runs (with the callback from the installed ansible.posix); on
    this machine, which has no GPUs, gpu_preflight stops the host, which the report calls an error."""
    result = drift_check(installed, fleet, "--limit", "node-a")
    assert result.returncode == 2, result.stdout + result.stderr
    report = json.loads((fleet["reports"] / "latest.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == 2 and report["hosts"]["node-a"]["status"] == "error", report["hosts"]
    assert "gpu_preflight" in result.stdout


def test_drift_check_without_a_run_says_why(installed, fleet):
    result = drift_check(installed, fleet, "-e", "drift_check_playbook=%s" % (fleet["playbook"].parent / "none.yml"))
    assert result.returncode == 2
    assert "The drift check wrote no report" in result.stdout and "none.yml could not be found" in result.stdout, (
        result.stdout)


def test_the_drift_playbook_refuses_a_real_run_by_its_fqcn(installed, fleet):
    result = run(installed, "ansible-playbook", "-i", str(fleet["inventory"] / "hosts.yml"), "gpufleet.sglang.drift",
                 "-e", "sglang_hosts=gpu_nodes")
    assert result.returncode == 2
    assert "gpufleet.sglang.drift (playbooks/drift.yml in a checkout) only reports" in result.stdout, result.stdout
    assert "gpufleet.sglang.drift_check" in result.stdout
