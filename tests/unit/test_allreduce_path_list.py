"""The all-reduce path list is typed once (module_utils/allreduce_paths.py: AUTO_ORDER, each kernel's rules in
KERNELS); every other place that names the paths is held to it here: the module's and the role's choices, the lab
stand-in's path table and its README, and the docs page's table. Adding a path fails here until all agree."""
import ast
import os
import re

import yaml

from ansible.module_utils import allreduce_paths as ap
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8") as handle:
        return handle.read()


def module_documentation(rel):
    """The module's DOCUMENTATION, parsed from its source (the module is not imported)."""
    for node in ast.parse(read(rel)).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no DOCUMENTATION" % rel)


def test_every_kernel_a_path_names_has_its_rules():
    named = {kernel for path in ap.PATHS for kernel in ap.kernels(path)}
    assert named == set(ap.KERNELS), "paths name kernels %s; KERNELS has rules for %s" % (
        sorted(named), sorted(ap.KERNELS))
    assert ap.kernels("nccl") == () and "nccl" in ap.PATHS and len(set(ap.PATHS)) == len(ap.PATHS)


def test_the_module_documents_the_paths_it_accepts():
    doc = module_documentation("library/sglang_allreduce_paths.py")
    assert doc["options"]["path"]["choices"] == list(ap.REQUESTS)
    described = " ".join(doc["description"])
    missing = [path for path in ap.PATHS if "C(%s)" % path not in described]
    assert not missing, "library/sglang_allreduce_paths.py's description does not name %s" % missing


def test_the_role_accepts_the_same_paths():
    specs = yaml.safe_load(read("roles/sglang_allreduce/meta/argument_specs.yml"))["argument_specs"]
    assert specs["main"]["options"]["sglang_allreduce_path"]["choices"] == list(ap.REQUESTS)
    assert specs["apply"]["options"]["sglang_allreduce_apply_path"]["choices"] == list(ap.PATHS)


def test_the_lab_standin_knows_every_path():
    standin = load_file("lab/standins/sglang_standin/config.py", "sglang_standin_config_paths")
    assert set(standin.ALLREDUCE_PATHS) == set(ap.PATHS)
    row = [line for line in read("lab/standins/README.md").splitlines() if line.startswith("| `allreduce_paths` |")]
    assert len(row) == 1, "lab/standins/README.md has no allreduce_paths row"
    named = set(re.findall(r"`([a-z_+]+)`", row[0].split("paths", 2)[-1]))
    assert set(ap.PATHS) <= named, "lab/standins/README.md's allreduce_paths row names %s" % sorted(named)


def test_the_docs_table_has_a_row_per_path():
    lines = read("docs/allreduce-paths.md").splitlines()
    start = lines.index("| path | what runs | SGLang | FlashInfer | server arguments | environment |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(re.match(r"\| `([^`]+)`", line).group(1))
    assert rows == list(ap.PATHS) + ["auto"], "docs/allreduce-paths.md's table lists %s" % rows
