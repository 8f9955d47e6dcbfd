"""execution-environment.yml: valid for ansible-builder (v3), naming the collection this checkout builds.

ansible-builder create renders the build context (no image, no registry); introspect reads the installed
collection's Python and system needs the way the image build does.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
bc = load_file("scripts/build_collection.py", "build_collection")


def tool(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.fail("%s is not installed in this venv (requirements-dev.txt; make setup)" % name)
    return path


def load_ee():
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def pins():
    with open(os.path.join(REPO, "requirements-dev.txt"), encoding="utf-8") as handle:
        return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", handle.read(), re.M))


def test_ee_names_the_tarball_of_this_version_and_the_pinned_toolchain():
    ee, meta, pinned = load_ee(), bc.galaxy_meta(), pins()
    tarball = "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"])
    assert ee["version"] == 3
    assert [f["src"] for f in ee["additional_build_files"]] == ["dist/" + tarball]
    galaxy = ee["dependencies"]["galaxy"]["collections"]
    assert {"name": "collections/" + tarball, "type": "file"} in galaxy
    assert ee["dependencies"]["ansible_core"]["package_pip"] == "ansible-core==" + pinned["ansible-core"]
    assert ee["dependencies"]["ansible_runner"]["package_pip"] == "ansible-runner==" + pinned["ansible-runner"]


@pytest.fixture(name="built", scope="module")
def _built(tmp_path_factory):
    """A copy of the EE definition beside a freshly built tarball, and the collection installed from it."""
    tmp = tmp_path_factory.mktemp("ee")
    root = bc.build_tree(str(tmp / "build"))
    tarball = bc.build_tarball(root, str(tmp / "dist"))
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), tmp / "execution-environment.yml")
    subprocess.run([tool("ansible-galaxy"), "collection", "install", "--force", tarball, "-p", str(tmp / "installed")],
                   check=True, capture_output=True)
    return tmp


def test_ansible_builder_renders_the_build_context(built):
    result = subprocess.run([tool("ansible-builder"), "create", "-f", "execution-environment.yml",
                             "-c", "context", "--output-filename", "Containerfile"],
                            cwd=built, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    meta = bc.galaxy_meta()
    tarball = "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"])
    assert (built / "context" / "_build" / "collections" / tarball).is_file()
    with open(built / "context" / "_build" / "requirements.yml", encoding="utf-8") as handle:
        assert {"name": "collections/" + tarball, "type": "file"} in yaml.safe_load(handle)["collections"]
    containerfile = (built / "context" / "Containerfile").read_text(encoding="utf-8")
    assert "COPY _build /build" in containerfile and "WORKDIR /build" in containerfile
    assert "ansible-core==%s" % pins()["ansible-core"] in containerfile


def test_ansible_builder_refuses_a_broken_definition(built):
    """The check above can fail: a schema violation is an error, not a silently rendered context."""
    ee = load_ee()
    ee["dependencies"]["galaxy"] = 42
    (built / "broken.yml").write_text(yaml.safe_dump(ee), encoding="utf-8")
    result = subprocess.run([tool("ansible-builder"), "create", "-f", "broken.yml", "-c", "broken"],
                            cwd=built, capture_output=True, text=True, check=False)
    assert result.returncode != 0


def test_the_installed_collection_declares_its_control_node_needs(built):
    result = subprocess.run([tool("ansible-builder"), "introspect", str(built / "installed")],
                            capture_output=True, text=True, check=True)
    found = yaml.safe_load(result.stdout)
    python = json.dumps(found.get("python"))
    system = json.dumps(found.get("system"))
    assert "matplotlib==%s" % pins()["matplotlib"] in python
    assert "openssh-client" in system
