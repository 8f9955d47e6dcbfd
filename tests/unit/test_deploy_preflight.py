"""The deploy's one preflight (module_utils/deploy_preflight.py, action_plugins/sglang_deploy_preflight.py): every
variable the repository's inventories, molecule scenarios, role tests and lab scripts pass is one the roles read;
a misspelling is named with the closest input; sizes, NCCL settings, the benchmark client's lock and the install
decision each refused or passed by the rule the message names."""
import os
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader

from action_plugins import sglang_deploy_preflight as plugin
from ansible.module_utils import deploy_preflight as dp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Where the repository passes variables to the roles (inventories, scenarios, per-role tests, the lab's scripts).
PASSING = ("inventories", "molecule", "tests/roles", "tests/playbooks", "lab")
# Keys whose mapping value is variables (play vars, inventory vars, molecule's provisioner inventory, a group's
# hosts with their inline vars).
VAR_KEYS = {"vars", "group_vars", "host_vars", "extra_vars", "hosts"}
# -e name=value, --extra-vars, a Python inventory's "name": value.
PASSED_IN_TEXT = re.compile(r"([a-z][a-z0-9_]*)\s*(?:=|\"?\s*:)")
LOADER = DataLoader()


def load(path):
    return LOADER.load_from_file(path) if os.path.isfile(path) else None


@pytest.fixture(scope="module")
def catalog():
    return plugin.catalog(ROOT, load)


def keys_passed(node, as_vars=False):
    """Variable names in a parsed YAML document: the keys of every mapping held by a VAR_KEYS key, and of a YAML
    mapping written out as text (a task writing group_vars with copy: content)."""
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if as_vars and isinstance(key, str):
                found.add(key)
            found |= keys_passed(value, key in VAR_KEYS)
    elif isinstance(node, list):
        for item in node:
            found |= keys_passed(item)
    elif isinstance(node, str) and "\n" in node:
        try:
            written = yaml.safe_load(node)
        except yaml.YAMLError:
            written = None
        if isinstance(written, dict):
            found |= {key for key in written if isinstance(key, str)} | keys_passed(written)
    return found


def passed_names():
    """{name: [files]} of every variable the repository passes anywhere in PASSING."""
    names = {}
    for top in PASSING:
        for parent, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for file_name in files:
                path = os.path.join(parent, file_name)
                try:
                    with open(path, encoding="utf-8") as handle:
                        text = handle.read()
                except (UnicodeDecodeError, OSError):
                    continue
                if file_name.endswith((".yml", ".yaml")):
                    whole_file_is_vars = any(part in ("group_vars", "host_vars", "vars")
                                             for part in os.path.relpath(path, ROOT).split(os.sep))
                    found = set()
                    for doc in yaml.safe_load_all(text):
                        if whole_file_is_vars and isinstance(doc, dict):
                            found |= set(doc)
                        found |= keys_passed(doc)
                else:
                    found = set(PASSED_IN_TEXT.findall(text))
                for name in found:
                    names.setdefault(name, []).append(os.path.relpath(path, ROOT))
    return names


# Mistakes made on purpose, where a test shows the preflight naming them: name -> the only file that passes it.
DELIBERATE = {"sglang_server_tp_szie": ["molecule/collection/verify.yml"]}


def test_every_variable_the_repository_passes_is_one_the_roles_read(catalog):
    names = passed_names()
    for name, files in DELIBERATE.items():
        assert names.pop(name, None) == files, name  # made there, and nowhere else
    with_prefix = [name for name in names if name.startswith(tuple(catalog["prefixes"]))]
    # The collector finds what the lab and the scenarios pass (a collector finding nothing would pass vacuously).
    assert {"sglang_server_tp_size", "sglang_install_lock", "gpu_preflight_disk_space",
            "sglang_benchmark_client"} <= set(with_prefix)
    problems = dp.unknown_variables(names, catalog["prefixes"], catalog["inputs"], catalog["known"])
    assert problems == [], ["%s (in %s)" % (problem, names[problem.split()[0]]) for problem in problems]


@pytest.mark.parametrize("typo,meant", [
    ("sglang_server_tp_szie", "sglang_server_tp_size"),
    ("nccl_tuning_setings", "nccl_tuning_settings"),
    ("sglang_install_lcok", "sglang_install_lock"),
    ("gpu_preflight_disk_spaces", "gpu_preflight_disk_space"),
    ("sglang_benchmark_clinet", "sglang_benchmark_client"),
    ("sglang_model_model", "sglang_model_models"),
])
def test_a_misspelled_variable_is_named_with_the_closest_input(catalog, typo, meant):
    problems = dp.unknown_variables({typo: 1, "sglang_server_tp_size": 2, "ansible_host": "x"},
                                    catalog["prefixes"], catalog["inputs"], catalog["known"])
    assert len(problems) == 1
    assert problems[0].startswith(typo + " is not a variable any role reads")
    assert problems[0].endswith("did you mean %s?" % meant)


def test_a_name_far_from_any_input_points_at_the_roles_inputs(catalog):
    problems = dp.unknown_variables(["sglang_server_zzzzzzzzzzzz"], catalog["prefixes"], catalog["inputs"],
                                    catalog["known"])
    assert problems == [problems[0]] and "roles/sglang_server/meta/argument_specs.yml" in problems[0]


def test_the_catalog_holds_published_results_and_names_without_a_prefix_pass(catalog):
    # Published by a role (set_fact), read by the playbooks: in task_vars of a later play, never refused.
    assert "sglang_install_active_venv" in catalog["known"]
    assert dp.unknown_variables(["sglang_hosts", "deploy_serial", "my_own_var"], catalog["prefixes"],
                                catalog["inputs"], catalog["known"]) == []


@pytest.mark.parametrize("tp,ep,gpus,nodes,expected", [
    (2, None, 2, 1, []),
    ("2", "1", 2, 1, []),
    (8, None, 4, 2, []),
    (4, None, None, 1, []),  # no GPU facts: the count is not known, nothing said about it
    (None, None, 2, 1, []),  # unset: the GPU count
    (None, None, None, 1, []),
    (None, "4", 2, 1, ["--ep-size 4 in sglang_server_extra_args does not divide sglang_server_tp_size 2: SGLang "
                       "splits the tensor-parallel ranks into expert-parallel groups of equal size"]),
    (4, None, 2, 1, ["sglang_server_tp_size is 4 and this host has 2 GPU(s): the server runs one tensor-parallel "
                     "rank per GPU, so its tp size can be at most the GPUs it spans"]),
    (8, None, 2, 2, ["sglang_server_tp_size is 8 and its 2 hosts (sglang_server_multinode_group) have 4 together "
                     "GPU(s): the server runs one tensor-parallel rank per GPU, so its tp size can be at most the "
                     "GPUs it spans"]),
    ("-2", None, 2, 1, ["sglang_server_tp_size must be a positive integer (one tensor-parallel rank per GPU), "
                        "got -2"]),
    (0, None, 2, 1, ["sglang_server_tp_size must be a positive integer (one tensor-parallel rank per GPU), got 0"]),
    ("two", None, 2, 1, ["sglang_server_tp_size must be a positive integer (one tensor-parallel rank per GPU), "
                         "got 'two'"]),
    (4, "3", 4, 1, ["--ep-size 3 in sglang_server_extra_args does not divide sglang_server_tp_size 4: SGLang "
                    "splits the tensor-parallel ranks into expert-parallel groups of equal size"]),
    (2, "0", 2, 1, ["--ep-size in sglang_server_extra_args must be a positive integer (experts spread over the "
                    "tensor-parallel ranks), got 0"]),
])
def test_parallel_sizes_against_the_gpus(tp, ep, gpus, nodes, expected):
    assert dp.parallel_problems(tp, ep, gpus, nodes) == expected


def test_nccl_names_and_values_are_checked_as_nccl_tuning_checks_them():
    assert dp.nccl_problems({"NCCL_P2P_LEVEL": "PHB"}, {}, {"gpu_count": 2}) == []
    typo = dp.nccl_problems({"NCCL_P2P_LEVLE": "PHB"}, {}, {})
    assert typo == ["nccl_tuning_settings: NCCL_P2P_LEVLE is not an NCCL setting this role knows; did you mean "
                    "NCCL_P2P_LEVEL?"]
    bad_value = dp.nccl_problems({"NCCL_P2P_LEVEL": "NOWHERE"}, {}, {})
    assert len(bad_value) == 1 and bad_value[0].startswith("nccl_tuning_settings: NCCL_P2P_LEVEL")
    # The server's runtime environment reaches the same processes: checked with the settings.
    inherited = dp.nccl_problems({}, {"NCCL_PROTOO": "simple", "OTHER": "x"}, {})
    assert len(inherited) == 1 and inherited[0].startswith("sglang_install_environment: NCCL_PROTOO")
    assert "NCCL_PROTO?" in inherited[0]
    # Set in both with other values: the unit's later file would win unseen.
    both = dp.nccl_problems({"NCCL_P2P_LEVEL": "PHB"}, {"NCCL_P2P_LEVEL": "SYS"}, {})
    assert both == ["nccl_tuning_settings: NCCL_P2P_LEVEL is SYS in the server's runtime environment "
                    "(sglang_install_environment) and PHB here: set it in one place"]
    assert dp.nccl_problems({}, ["not", "a", "mapping"], {}) == [
        "sglang_install_environment must be a mapping of NAME: value"]


LIGHT_LOCK = "# lab\nsglang==0.5.21\nflashinfer-python==0.6.18\n"
FULL_LOCK = "".join("%s==1.0\n" % name for name in ("SGLang", "numpy", "aiohttp", "requests", "tqdm",
                                                     "Transformers", "torch")) + "  --hash=sha256:00\n"


def test_the_client_lock_must_pin_the_clients_packages():
    assert dp.client_problems("host", "/l.txt", FULL_LOCK, "sglang_install_lock") == []
    assert dp.client_problems("host", "/l.txt", None, "sglang_install_lock") == []  # the role's own lock
    host = dp.client_problems("host", "/locks/light.txt", LIGHT_LOCK, "sglang_install_lock")
    assert len(host) == 1
    assert ("sglang_install_lock (/locks/light.txt) pins none of numpy, aiohttp, requests, tqdm, transformers"
            in host[0])
    assert "sglang_benchmark_client: controller" in host[0] and "--skip-tags benchmark" in host[0]
    controller = dp.client_problems("controller", "/c.txt", LIGHT_LOCK, "sglang_benchmark_client_lock")
    assert "client venv on the controller" in controller[0] and "--no-deps" in controller[0]


@pytest.mark.parametrize("run_tags,skip_tags,expected", [
    (None, None, True), (["all"], [], True), (["benchmark"], [], True), (["all"], ["benchmark"], False),
    (["never_gate"], [], False),
])
def test_the_client_matters_only_where_the_gate_runs(run_tags, skip_tags, expected):
    assert dp.gate_runs(run_tags, skip_tags) is expected


@pytest.mark.parametrize("comparison,expected", [
    (None, True),
    ({"skipped": True}, True),
    ({"differences": {"record": ["no converge record on the host"]}}, True),
    ({"differences": {"install": [], "model": [], "code": [], "server": ["input var sglang_server_port"],
                      "nccl": ["input var nccl_tuning_settings"]}}, False),
    ({"differences": {"install": ["input var sglang_install_lock"], "model": [], "code": []}}, True),
    ({"differences": {"install": [], "model": ["observed file /m/current"], "code": []}}, True),
    ({"differences": {"install": [], "model": []}}, True),  # code not compared: may install
])
def test_whether_this_run_installs_or_fetches(comparison, expected):
    installs, why = dp.installs(comparison)
    assert installs is expected and why


def test_one_message_names_every_problem():
    message = dp.refusal("gpu1", ["a is wrong", "b is wrong"])
    assert message == "Preflight refused gpu1 before any change (2 problems): 1. a is wrong | 2. b is wrong"
