"""The operators' guide (collection/README.md, the collection's page) run as it is written.

Its venv block runs verbatim once per session (a venv of ansible-core only, at the version requirements-dev.txt
pins); its install block runs verbatim in a folder holding nothing but the two tarballs it names, with that venv
first on PATH and no ANSIBLE_* setting; then its inventory files, its manifest command and its deploy command are
used from that folder. A guide whose commands stop working fails here.
"""
import json
import os
import re
import subprocess

import pytest
from tests.helpers.markdown_blocks import blocks, sections
from tests.helpers.operator_guide import GUIDE, fleet_folder, install, install_block, venv_block
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
bc = load_file("scripts/build_collection.py", "build_collection")

INVENTORY = "Your inventory"
MODEL = "The model: a manifest, then staging"
DEPLOY = "Deploy, dry run, drift, rollback"


def guide():
    with open(GUIDE, encoding="utf-8") as handle:
        return sections(handle.read())


def pinned_core():
    with open(os.path.join(REPO, "requirements-dev.txt"), encoding="utf-8") as handle:
        return re.search(r"^ansible-core==(\S+)$", handle.read(), re.M).group(1)


def bash(script, cwd, env):
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)


@pytest.fixture(name="bare_core", scope="session")
def _bare_core(tmp_path_factory):
    """The guide's venv block run verbatim with HOME in a fresh folder: {'home', 'env'} (that venv first on PATH,
    no ANSIBLE_* setting)."""
    home = tmp_path_factory.mktemp("operator-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(home), PIP_CACHE_DIR=os.path.join(os.path.expanduser("~"), ".cache", "pip"),
               PYTHONWARNINGS="ignore::DeprecationWarning", ANSIBLE_NOCOLOR="1")
    result = bash(venv_block(), str(home), env)
    assert result.returncode == 0, result.stdout + result.stderr
    venv_bin = re.search(r"^\. (\S+)/activate$", venv_block(), re.M).group(1).replace("~", str(home))
    env["PATH"] = venv_bin + os.pathsep + env["PATH"]
    return {"home": home, "env": env, "bin": venv_bin}


@pytest.fixture(name="fleet", scope="module")
def _fleet(bare_core, tmp_path_factory):
    """The fleet folder after the guide's install block ran verbatim there: {'dir', 'env', 'install'} (the
    block's result)."""
    tmp = tmp_path_factory.mktemp("guide")
    tarball = bc.build_tarball(bc.build_tree(str(tmp / "build")), str(tmp / "dist"))
    folder = fleet_folder(str(tmp / "fleet"), tarball)
    return {"dir": tmp / "fleet", "env": bare_core["env"], "install": install(folder, bare_core["env"])}


def run(fleet, command):
    return bash(command, str(fleet["dir"]), fleet["env"])


def test_the_guide_installs_the_ansible_core_the_project_is_tested_with():
    assert re.findall(r"pip install (\S+)", venv_block()) == ["ansible-core==" + pinned_core()]


def test_the_guide_names_the_tarball_the_build_writes():
    meta = bc.galaxy_meta()
    assert "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]) in install_block()


def test_the_venv_holds_ansible_core_only(bare_core):
    python = os.path.join(bare_core["bin"], "python")
    version = subprocess.run([python, "-c", "import ansible.release as r; print(r.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == pinned_core()
    bundled = subprocess.run([python, "-c", "import ansible_collections"], capture_output=True, text=True,
                             check=False)
    assert "No module named 'ansible_collections'" in bundled.stderr  # not the full `ansible` package


def test_the_install_block_runs_verbatim_and_warns_of_nothing(fleet):
    result = fleet["install"]
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "gpufleet.sglang:%s was installed successfully" % bc.galaxy_meta()["version"] in out
    assert "ansible.posix:" in out and "[WARNING]" not in out, out
    collections = fleet["dir"] / "collections"
    assert re.search(r"# %s/ansible_collections\n(?:.*\n)*?gpufleet\.sglang +%s" % (re.escape(str(collections)),
                     re.escape(bc.galaxy_meta()["version"])), out), out
    assert "> MODULE gpufleet.sglang.sglang_model_manifest (" in result.stdout and "OPTIONS" in result.stdout


def test_the_installed_collection_is_found_from_the_fleet_folder_only_through_its_ansible_cfg(fleet):
    shown = "> MODULE gpufleet.sglang.sglang_model_manifest ("  # ansible-doc's rc is 0 when it finds nothing
    assert shown in run(fleet, "ansible-doc gpufleet.sglang.sglang_model_manifest").stdout
    elsewhere = bash("ansible-doc gpufleet.sglang.sglang_model_manifest", str(fleet["dir"].parent), fleet["env"])
    assert "gpufleet.sglang.sglang_model_manifest was not found" in elsewhere.stdout + elsewhere.stderr
    pointed = bash("ansible-doc gpufleet.sglang.sglang_model_manifest", str(fleet["dir"].parent),
                   dict(fleet["env"], ANSIBLE_CONFIG=str(fleet["dir"] / "ansible.cfg")))
    assert shown in pointed.stdout, pointed.stdout + pointed.stderr


def write_inventory(fleet):
    """The guide's inventory files, each YAML block whose first line names its path, written where it says."""
    written = []
    for body in blocks(guide()[INVENTORY], "yaml"):
        rel = re.match(r"# (inventory/\S+)\n", body).group(1)
        path = fleet["dir"] / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        written.append(rel)
    assert written == ["inventory/hosts.yml", "inventory/group_vars/gpu_nodes.yml"]


def test_the_guides_deploy_command_plays_on_the_inventorys_group(fleet):
    write_inventory(fleet)
    deploy = blocks(guide()[DEPLOY], "sh")[0].splitlines()[0].split("#")[0].strip()
    assert deploy.endswith("--check --diff")
    result = run(fleet, deploy + " --list-hosts")
    assert result.returncode == 0, result.stdout + result.stderr
    prepare = result.stdout.split("Prepare SM120 hosts", 1)[1]
    assert "gpu-a" in prepare and "gpu-b" in prepare and "[WARNING]" not in result.stdout + result.stderr


def test_the_guides_inventory_names_the_python_so_nothing_is_discovered(fleet):
    """Reached over a local connection (the hosts' addresses are examples), the group runs a module with the
    interpreter the inventory names: no discovery and no warning about it."""
    write_inventory(fleet)
    result = run(fleet, "ansible gpu_nodes -m ansible.builtin.ping -e ansible_connection=local "
                        "-e ansible_become=false")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 2 and "discovered Python" not in result.stdout + result.stderr


def test_the_guides_manifest_command_writes_the_manifest(fleet, tmp_path):
    """The guide's first manifest command, its example folder replaced by a model folder of a few files."""
    write_inventory(fleet)
    command = blocks(guide()[MODEL], "sh")[0].splitlines()[1]
    example = re.search(r"-a path=(\S+)$", command).group(1)
    model = tmp_path / "v3"
    (model / "tokenizer").mkdir(parents=True)
    (model / "config.json").write_text("{}\n", encoding="utf-8")
    (model / "tokenizer" / "vocab.json").write_text('{"a": 1}\n', encoding="utf-8")
    result = run(fleet, command.replace(example, str(model)))
    assert result.returncode == 0 and "[WARNING]" not in result.stdout + result.stderr, result.stdout + result.stderr
    manifest = json.loads((model / "manifest.json").read_text(encoding="utf-8"))
    assert [f["name"] for f in manifest["files"]] == ["config.json", "tokenizer/vocab.json"]


def test_everything_the_guide_calls_by_fqcn_is_in_the_collection(fleet):
    with open(GUIDE, encoding="utf-8") as handle:
        named = set(re.findall(r"gpufleet\.sglang\.(\w+)", handle.read()))
    root = fleet["dir"] / "collections" / "ansible_collections" / "gpufleet" / "sglang"
    shipped = {p.stem for p in (root / "plugins" / "modules").glob("*.py")}
    shipped |= {p.stem for p in (root / "playbooks").glob("*.yml")} | {p.name for p in (root / "roles").iterdir()}
    assert named and named <= shipped, named - shipped
