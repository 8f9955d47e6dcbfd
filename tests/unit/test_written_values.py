"""No value reaches a file the roles write unchecked (issue 35).

Every task of every role that writes a file from variables (a template, a copy or lineinfile with content, an
EnvironmentFile through sglang_env_file) is found by walking roles/*/tasks; every template of roles/*/templates must
be written by one. For each, every variable that can reach the file (the ones its content names, and the ones
those name, through the layout's, the role's and the task's own variables) is set in turn to hostile values that
carry a line break (each variable whole, each string inside a list or mapping, a new mapping key): where the
rendered file then holds the line break's payload as a line of its own, a sglang_unit_values task before the write,
in the same task file, must refuse the value. The file is rendered and the checks are evaluated by Ansible's own
templating, in this process, from the roles' YAML as written (no playbook run).

A new template, a new writing task, or a new variable in one, without a check that refuses a line break in it,
fails here.
"""
import copy
import glob
import json
import os
import re

import pytest

from ansible.module_utils import unit_values
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader, init_plugin_loader
from ansible.template import Templar, trust_as_template

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ansible.builtin's lookups (the layout's controller folders read the environment), as ansible-playbook loads them.
init_plugin_loader()
filter_loader.add_directory(os.path.join(REPO, "filter_plugins"))
LOADER = DataLoader()

# Writing tasks: module -> the argument holding what is written (a template's src names a file).
WRITERS = {"ansible.builtin.template": "src", "ansible.builtin.copy": "content", "sglang_env_file": "content",
           "ansible.builtin.lineinfile": "line"}
GUARD = "sglang_unit_values"
# Modules that write from their arguments and check every value themselves, before writing.
SELF_CHECKING = {
    "sglang_nccl_settings": "names, values and reasons through unit_values (module_utils/nccl_tuner.check_settings),"
                            " tests/integration/test_nccl_settings_hostile.py",
}
MARK = "X_INJECTED=1"
BREAKS = ("\n", "\r")
# Never poisoned: Ansible's own (the template action sets ansible_managed when no variable does).
NOT_VARIABLES = {"item", "omit", "groups", "hostvars", "role_path", "ansible_check_mode", "playbook_dir",
                 "inventory_dir", "ansible_managed"}

# What each role's writing tasks read besides the layout's, the role's defaults and vars: settings without a default,
# facts other roles publish, results registered by earlier tasks (as those tasks leave them).
FIXTURES = {
    "sglang_server": {
        "sglang_server_model_path": "/srv/models/m", "sglang_server_api_key_file": "/etc/sglang/key",
        "sglang_server_args": ["--model-path", "/srv/models/m", "--port", "30000"], "__sglang_server_fused": True,
        "sglang_server_draft_model_path": "/srv/models/d", "sglang_server_tp_size": 2,
        "__sglang_server_key": {"content": "c2stWnE4MXhLZGZlMA=="}, "__sglang_server_fingerprint": "ab" * 32,
        "__sglang_server_fingerprint_inputs": '{"inputs": {"GPU driver": "580.159.04"}}',
        "nvidia_gpu": {"driver_version": "580.159.04"}, "__sglang_server_restart_at": "2026-12-01T00:00:00+00:00",
        "__sglang_server_ready": {"stdout": '{"waited_s": 12.5, "main_pid": 4242}'},
    },
    "sglang_install": {
        "sglang_install_environment": {"NCCL_DEBUG": "WARN"}, "sglang_install_base_site_packages": True,
        "__sglang_install_lock_text": "sglang==0.5.21\ntorch==2.9.1\n", "__sglang_install_lock_id": "sglang-0.5.21",
        "__sglang_install_venv": "/opt/sglang/venvs/sglang-0.5.21",
        "__sglang_install_lock_copy": "/opt/sglang/locks/sglang-0.5.21.txt",
        "__sglang_install_base_sites": {"stdout": '["/usr/lib/python3/dist-packages"]'},
        "__sglang_install_python_version": {"stdout": "3.11"}, "__sglang_install_pip_conf": {"path": "/tmp/p.conf"},
        "sglang_install_pip_index_url": "https://pypi.example/simple/",
        "sglang_install_pip_extra_index_urls": ["https://a.example/simple/"],
    },
    "sglang_allreduce": {
        "sglang_allreduce_result": {"facts": {}, "candidates": ["nccl"], "path": "nccl", "msg": "m",
                                    "server_args": [], "environment": {}},
        "sglang_allreduce_applied": "nccl", "sglang_allreduce_environment": {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"},
        "sglang_allreduce_server_args": ["--disable-custom-all-reduce"],
        "__sglang_allreduce_canary_result": {"passed": True, "summary": "fusion canary PASSED on 2 GPU(s)"},
        "__sglang_allreduce_canary": {"key": "fusion", "value": {
            "file": "/var/lib/sglang/fusion-canary.json", "key": {"gpu": "g"}, "gpus": 2, "argv": [], "environment": {}}},
    },
    "drift_schedule": {
        "drift_schedule_inventory": "/etc/ansible/hosts.yml", "drift_schedule_config": "/opt/deploy/ansible.cfg",
        "drift_schedule_collections_path": "/opt/collections", "drift_schedule_extra_args": ["--forks", "20"],
        "drift_schedule_environment": {"HTTPS_PROXY": "http://proxy:3128"},
        "drift_schedule_notify_command": ["/usr/local/bin/notify", "sglang drift"],
        "__drift_schedule_group": "sglang-drift",
    },
    "gpu_probes": {  # a result as the microbenchmark's stand-in leaves it, read back with runuser cat
        "item": {"item": "deployed", "stdout": "{\"tool\": \"allreduce_bench\", \"label\": \"deployed\"}"},
    },
    "sglang_benchmark": {
        "__sglang_benchmark_rolled_back": "to the state that passed at 2026-12-01: restore /x; server healthy.",
    },
}
COMMON = {"inventory_hostname": "gpu1", "ansible_check_mode": False, "groups": {}, "hostvars": {},
          "ansible_managed": "Ansible managed", "playbook_dir": "/opt/deploy", "inventory_dir": "/opt/deploy"}


def load(path):
    return LOADER.load_from_file(path, trusted_as_template=True) or {}


def flatten(tasks):
    """Tasks in the order they run, blocks opened (block, rescue, always)."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if "block" in task:
            inherited = {key: task[key] for key in ("vars", "when") if key in task}
            for section in ("block", "rescue", "always"):
                for inner in flatten(task.get(section)):
                    yield dict(inherited, **inner) if inherited else inner
        else:
            yield task


def action(task):
    for key in task:
        if key in WRITERS or key == GUARD or key in SELF_CHECKING:
            return key
    return None


def discover():
    """[(role, task file, task, guards before it in that file)] for every writing task; the self-checking ones."""
    writers, self_checking = [], []
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))):
        role = path.split(os.sep)[-3]
        guards = []
        for task in flatten(load(path)):
            module = action(task)
            if module == GUARD:
                guards.append(task)
            elif module in SELF_CHECKING:
                self_checking.append((role, os.path.basename(path), task))
            elif module in WRITERS and (module != "ansible.builtin.copy" or "content" in task[module]):
                writers.append((role, os.path.basename(path), task, list(guards)))
    return writers, self_checking


WRITING, SELF = discover()


def context(role, task):
    """The variables a task of ROLE sees: layout defaults, the role's defaults and vars, fixtures, the task's vars."""
    variables = dict(COMMON)
    for path in ["roles/sglang_layout/defaults/main.yml", "roles/%s/defaults/main.yml" % role,
                 "roles/%s/vars/main.yml" % role]:
        if os.path.exists(os.path.join(REPO, path)):
            variables.update(load(os.path.join(REPO, path)))
    variables.update(FIXTURES.get(role, {}))
    variables.update(task.get("vars") or {})
    return variables


def render(variables, value):
    """VALUE templated as Ansible templates a task's arguments (a string from a template file is trusted here)."""
    return Templar(loader=LOADER, variables=variables).template(
        trust_as_template(value) if isinstance(value, str) else value)


def truthy(variables, condition):
    if condition in (None, ""):
        return True
    conditions = condition if isinstance(condition, list) else [condition]
    return all(render(variables, "{{ (%s) | bool }}" % c) if isinstance(c, str) else bool(c) for c in conditions)


def sources(task):
    """The text the task writes, as a template (a template file, or the content argument)."""
    module = action(task)
    argument = task[module][WRITERS[module]]
    if module == "ansible.builtin.template":
        return [("file", name) for name in _template_names(argument, task)]
    lookup = re.fullmatch(r"\{\{\s*lookup\('ansible\.builtin\.template',\s*'([^']+)'\)\s*\}\}", argument.strip())
    if lookup:
        return [("file", lookup.group(1))]
    return [("text", argument)]


def _template_names(argument, task):
    if "{{" not in argument:
        return [argument]
    return [render(dict(item=item), argument) for item in task.get("loop") or []]


def source_text(role, kind, value):
    if kind == "file":
        with open(os.path.join(REPO, "roles", role, "templates", value), encoding="utf-8") as handle:
            return handle.read()
    return value


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def names_in(value):
    """Identifiers in VALUE's strings (an over-approximation of the variables it reads)."""
    found = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            found.update(NAME.findall(node))
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def reaching(variables, text, task):
    """The variables TEXT (and the task's conditions and loop) can read, through the others."""
    todo = names_in([text, task.get("when"), task.get("loop")]) & set(variables)
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo |= (names_in(variables[name]) & set(variables)) - seen
    return sorted(seen - NOT_VARIABLES)


def leaves(value, path=()):
    """(path, value) of every string or number inside VALUE (lists and mappings followed, three levels)."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path, value
    elif len(path) < 3 and isinstance(value, dict):
        for key in value:
            yield from leaves(value[key], path + (key,))
    elif len(path) < 3 and isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, path + (index,))


def hostile(value):
    """(label, value) pairs: VALUE with a line break and the mark after or before it, at every string inside it, as a
    new list item, as a new mapping key and value; a string holding JSON (a registered command's stdout) also
    poisoned inside its JSON."""
    for path, leaf in leaves(value):
        if isinstance(leaf, str) and leaf[:1] in "[{":
            try:
                decoded = json.loads(leaf)
            except ValueError:
                continue
            for what, inner in hostile(decoded):
                changed = copy.deepcopy(value)
                if not path:
                    yield "JSON %s" % what, json.dumps(inner)
                    continue
                node = changed
                for step in path[:-1]:
                    node = node[step]
                node[path[-1]] = json.dumps(inner)
                yield "%s JSON %s" % ("/".join(map(str, path)), what), changed
    for brk in BREAKS:
        payload = brk + MARK + brk
        for path, leaf in leaves(value):
            for text in (str(leaf) + payload, payload + str(leaf)):
                changed = copy.deepcopy(value)
                if not path:
                    yield "%r" % text, text
                    continue
                node = changed
                for step in path[:-1]:
                    node = node[step]
                node[path[-1]] = text
                yield "%s=%r" % ("/".join(map(str, path)), text), changed
        if isinstance(value, list):
            yield "new item", list(value) + [payload]
        if isinstance(value, dict):
            yield "new key", dict(value, **{"X_OK" + payload: "1"})
            yield "new value", dict(value, X_OK=payload)
        if value is None or value == "" or value == [] or value == {}:
            yield "%r" % payload, payload


def refused(variables, guards):
    """Whether a guard refuses (it fails, or its values cannot even be rendered)."""
    for guard in guards:
        scoped = dict(variables, **(guard.get("vars") or {}))
        try:
            if not truthy(scoped, guard.get("when")):
                continue
            values = render(scoped, guard[GUARD]["values"])
        except Exception:  # pylint: disable=broad-except  # a guard that cannot render fails the task: refused
            return True
        if unit_values.check_all(values):
            return True
    return False


def written(variables, text, task):
    """The file's text under VARIABLES, or None when the task would not write (skipped, or it fails first)."""
    try:
        if not truthy(variables, task.get("when")):
            return None
        return render(variables, text)
    except Exception:  # pylint: disable=broad-except  # the template fails: nothing is written
        return None


def label(role, name, task):
    return "%s/tasks/%s: %s" % (role, name, task.get("name"))


INJECTED = re.compile("[\n\r]" + re.escape("X_OK") + "?[\n\r]?" + re.escape(MARK) + "|[\n\r]" + re.escape(MARK))


@pytest.mark.parametrize("role,name,task,guards", WRITING, ids=[label(*w[:3]) for w in WRITING])
def test_no_value_reaches_a_written_file_unchecked(role, name, task, guards):
    base = context(role, task)
    unchecked = []
    for kind, source in sources(task):
        text = source_text(role, kind, source)
        before = written(base, text, task)
        assert before is not None, "%s does not render with the test's variables: add a fixture" % source
        assert not INJECTED.search(before)
        for guard in guards:  # each check works, and passes the role's defaults
            scoped = dict(base, **(guard.get("vars") or {}))
            if truthy(scoped, guard.get("when")):
                assert unit_values.check_all(render(scoped, guard[GUARD]["values"])) == [], guard["name"]
        for variable in reaching(base, text, task):
            for what, value in hostile(base[variable]):
                variables = dict(base, **{variable: value})
                after = written(variables, text, task)
                if after is None or not INJECTED.search(after):
                    continue  # the line break never reaches the file as a line of its own
                if not refused(variables, guards):
                    unchecked.append("%s (%s) reaches %s (%s/tasks/%s) unchecked" % (variable, what, source, role,
                                                                                     name))
    assert not unchecked, "\n".join(unchecked)


def test_every_template_is_written_by_a_task_the_walk_covers():
    covered = set()
    for role, _name, task, _guards in WRITING:
        for kind, source in sources(task):
            if kind == "file":
                covered.add(os.path.join("roles", role, "templates", source))
    templates = {os.path.relpath(path, REPO) for path in glob.glob(os.path.join(REPO, "roles", "*", "templates",
                                                                                "*.j2"))}
    assert templates - covered == set()


def test_the_walk_finds_the_writers_it_is_meant_to():
    found = {(role, name) for role, name, _task, _guards in WRITING}
    assert {("sglang_server", "unit.yml"), ("sglang_install", "environment.yml"), ("drift_schedule", "install.yml"),
            ("sglang_allreduce", "apply.yml"), ("sglang_server", "restart.yml")} <= found
    assert {role for role, _name, _task in SELF} == {"nccl_tuning"}


def test_a_planted_unchecked_variable_is_found():
    """The walk itself: a template line naming a variable no guard checks fails it."""
    base = context("sglang_server", {})
    base["sglang_server_planted"] = "x"
    text = "[Service]\nEnvironment=PLANTED={{ sglang_server_planted }}\n"
    task = {"ansible.builtin.template": {"src": "planted.j2"}}
    guards = [w[3] for w in WRITING if w[:2] == ("sglang_server", "unit.yml")][0]
    hits = [what for what, value in hostile(base["sglang_server_planted"])
            if INJECTED.search(written(dict(base, sglang_server_planted=value), text, task) or "")
            and not refused(dict(base, sglang_server_planted=value), guards)]
    assert hits, "a planted variable must be reported"
    assert not refused(base, guards)
