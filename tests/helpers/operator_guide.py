"""The operators' guide (collection/README.md, the collection's page) as tests use it: its sections' code blocks,
and the tarballs its install block names, so a test installs the collection the way the guide writes it."""
import json
import os
import shutil
import subprocess
import sys

import yaml

from tests.helpers.ansible_run import REPO
from tests.helpers.markdown_blocks import blocks, sections

GUIDE = os.path.join(REPO, "collection", "README.md")
INSTALL = "Install, offline, with ansible-core only"
BIN = os.path.dirname(sys.executable)


def guide_blocks(section, lang):
    """The fenced blocks of one language in a section of the guide."""
    with open(GUIDE, encoding="utf-8") as handle:
        return blocks(sections(handle.read())[section], lang)


def venv_block():
    return guide_blocks(INSTALL, "sh")[0]


def install_block():
    return guide_blocks(INSTALL, "sh")[1]


def install(folder, env):
    """The guide's install block run verbatim in `folder` (which holds the tarballs it names); the result."""
    return subprocess.run(["bash", "-euo", "pipefail", "-c", install_block()], cwd=str(folder), env=env,
                          capture_output=True, text=True, check=False)


def posix_standin_tarball(dest):
    """A STAND-IN for the ansible.posix tarball an operator downloads from Galaxy (not reachable here): the
    `ansible` package's copy of ansible.posix (the files of a Galaxy release) built into a collection artifact by
    ansible-galaxy, its galaxy.yml written from that copy's MANIFEST.json. Returns the tarball's path."""
    import ansible  # pylint: disable=import-outside-toplevel
    source = os.path.join(os.path.dirname(os.path.dirname(ansible.__file__)), "ansible_collections", "ansible", "posix")
    tree = os.path.join(dest, "ansible-posix-src")
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(tree, "MANIFEST.json"), encoding="utf-8") as handle:
        info = json.load(handle)["collection_info"]
    for name in ("MANIFEST.json", "FILES.json"):
        os.remove(os.path.join(tree, name))
    with open(os.path.join(tree, "galaxy.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({k: v for k, v in info.items() if v not in ([], {}, None)}, handle)
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", tree, "--output-path", dest],
                   check=True, capture_output=True)
    return os.path.join(dest, "ansible-posix-%s.tar.gz" % info["version"])


def fleet_folder(folder, tarball):
    """`folder` made holding what the guide's install block names: the collection's tarball and ansible.posix's."""
    os.makedirs(folder)
    shutil.copy(tarball, folder)
    shutil.copy(posix_standin_tarball(os.path.dirname(os.path.abspath(tarball))), folder)
    return folder
