"""The guide a user of the tarball reads (collection/README.md) and molecule/collection, which plays that user, run
the same commands: the install block is read from the guide by the scenario and run as written; the deploy, drift,
manifest and requirements commands the scenario runs are the guide's, with the scenario's own group and paths.
(tests/integration/test_operator_guide.py runs the guide's blocks themselves.)"""
import os
import re

import yaml

from tests.helpers.ansible_run import REPO

GUIDE = os.path.join(REPO, "collection", "README.md")
SCENARIO = os.path.join(REPO, "molecule", "collection")


def guide():
    with open(GUIDE, encoding="utf-8") as handle:
        return handle.read()


def sh_blocks():
    return re.findall(r"```sh\n(.*?)```", guide(), flags=re.S)


def commands():
    """Every command line of the guide's sh blocks, without its comment."""
    return [line.split("  #")[0].strip() for block in sh_blocks() for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def scenario_vars():
    with open(os.path.join(SCENARIO, "vars", "user.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_the_install_block_the_scenario_runs_is_the_guides_one_block_that_writes_ansible_cfg():
    with open(os.path.join(SCENARIO, "tasks", "install.yml"), encoding="utf-8") as handle:
        install = handle.read()
    pattern = re.search(r"regex_search\('\(\?s\)```sh\\n\((.*?)\.\*\?\)```'", install).group(1)
    found = [block for block in sh_blocks() if re.match(pattern, block)]
    assert len(found) == 1, found
    assert "ansible-galaxy collection install --offline -p ./collections" in found[0]
    assert "collections_path = ./collections" in found[0] and "inventory = ./inventory" in found[0]


def test_the_deploy_and_drift_commands_the_scenario_runs_are_the_guides_with_its_group():
    variables = scenario_vars()
    group = variables["user_group"]
    deploy = " ".join(variables["user_deploy"]).replace("{{ user_group }}", group)
    with open(os.path.join(SCENARIO, "verify.yml"), encoding="utf-8") as handle:
        verify = yaml.safe_load(handle)
    drift = " ".join(verify[0]["vars"]["user_drift_check"][:4]).replace("{{ user_group }}", group)
    own = [line.replace("gpu_nodes", group) for line in commands()]
    assert deploy in own and deploy + " --check --diff" in own
    assert drift in own
    assert group not in guide()  # the scenario's names are its own


def test_the_gates_requirements_the_scenario_installs_are_the_guides():
    with open(os.path.join(SCENARIO, "converge.yml"), encoding="utf-8") as handle:
        converge = handle.read()
    assert '"{{ user_collections }}/ansible_collections/gpufleet/sglang/requirements.txt"' in converge
    assert "`pip install -r collections/ansible_collections/gpufleet/sglang/requirements.txt`" in guide()


def test_the_manifest_command_the_scenario_runs_is_the_guides_for_a_path_source():
    with open(os.path.join(SCENARIO, "tasks", "manifests.yml"), encoding="utf-8") as handle:
        manifests = handle.read()
    assert "'-m', 'gpufleet.sglang.sglang_model_manifest', '-a'" in manifests
    assert "'path=/srv/models/' ~ item ~ ' dest=" in manifests
    assert any(re.fullmatch(r"ansible localhost -m gpufleet\.sglang\.sglang_model_manifest -a 'path=\S+ dest=\S+'", line)
               for line in commands())
