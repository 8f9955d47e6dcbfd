# -*- coding: utf-8 -*-
"""sglang_converge_state: the controller computes what it deploys, the host compares (one module run a host).

Per capability (the role sglang_fast_path passes the table: prefixes and roles), the inputs are digests of
  - every variable whose name starts with one of its prefixes, as templated for the host, with the content of any
    controller file a value names (a lock file whose content changes under the same path counts),
  - the code of its roles and, as the capability ``code``, the plugins, modules and playbooks (Markdown left out),
  - which of the deploy's tags (the role passes them) and whether untagged tasks the run's --tags and --skip-tags
    select (a run that selects other work is another input).
What the run itself set for the host (set_fact, registered results, facts) is no input: a role's published result
carries its prefix, and it is there at the end of a converge but not before the next one.
Only names and digests reach the host. The logic of the comparison is the module's (module_utils/converge_state.py).

A comparison (mode compare) runs module_utils/converge_probe.py on the host without Ansible's module wrapper, in one
Python process over the task's connection (its become and environment included): the wrapper's start-up is most of
what a host with nothing to do costs, on the host and here. That needs pipelining. The host's Python is the one named
(ansible_python_interpreter, interpreter_python) or, with "auto", the one Ansible discovered there in this run, else
the one its discovery would pick, found in the same round trip (the first of INTERPRETER_PYTHON_FALLBACK the host has,
else /usr/bin/python3). Without pipelining, or for a record, the module runs as any module does, as it does under
Mitogen's strategy. Both run the same code.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "mode": {"type": "str", "choices": ["compare", "record"], "default": "compare"},
    "record": {"type": "str", "required": True},
    "capabilities": {"type": "dict", "required": True},
    "covers": {"type": "dict", "default": {}},
    "deploy_tags": {"type": "list", "elements": "str", "default": []},
    "forget": {"type": "bool", "default": False},
    "compare_tags": {"type": "bool", "default": True},
    "ignore_covers": {"type": "list", "elements": "str", "default": []},
}
SHARED_CODE = ("library", "module_utils", "filter_plugins", "action_plugins", "plugins", "playbooks")
_CODE_CACHE = {}
# The module_utils the comparison runs on the host, each after those it imports (tests/unit/test_converge_probe.py
# holds the list closed: every one of the project's module_utils they import is here, ansible's own none).
PROBE_MODULES = ("param_checks", "root_trust", "atomic_files", "nvidia_smi", "converge_state", "converge_probe")
# The host's side: the request and the modules' sources arrive on stdin; each module is registered under its package
# (ansible.module_utils in a checkout, the collection's plugins.module_utils when installed) before the next runs.
PROBE_BOOTSTRAP = """import json, sys, types
request = json.loads(sys.stdin.read())
package = request["package"]
parts = package.split(".")
for depth in range(1, len(parts) + 1):
    name = ".".join(parts[:depth])
    module = sys.modules.setdefault(name, types.ModuleType(name))
    module.__path__ = []
    if depth > 1:
        setattr(sys.modules[".".join(parts[:depth - 1])], parts[depth - 1], module)
for short, source in request["modules"]:
    module = types.ModuleType(package + "." + short)
    sys.modules[module.__name__] = module
    setattr(sys.modules[package], short, module)
    exec(compile(source, module.__name__, "exec"), module.__dict__)
sys.modules[package + ".converge_probe"].main(request["request"])
"""
# An interpreter as the shell gets it (Ansible puts it there unquoted too, so "/usr/bin/env python3" works).
INTERPRETER = re.compile(r"/[A-Za-z0-9_./+-]+( [A-Za-z0-9_./+-]+)*\Z")
# A name Ansible's interpreter discovery tries (INTERPRETER_PYTHON_FALLBACK): a command or a path, one word.
FALLBACK_NAME = re.compile(r"[A-Za-z0-9_./+-]+\Z")
# What that discovery settles on when the host has none of them.
DISCOVERY_DEFAULT = "/usr/bin/python3"
_PROBE_SOURCES = {}


def project_root(here=__file__):
    """The checkout or the installed collection this plugin belongs to: the nearest folder above with roles/."""
    folder = os.path.dirname(os.path.abspath(here))
    while folder != os.path.dirname(folder):
        if os.path.isdir(os.path.join(folder, "roles")):
            return folder
        folder = os.path.dirname(folder)
    raise AnsibleError("sglang_converge_state: no roles/ folder above %s" % here)


def tree_digest(folder):
    """sha256 over every file below FOLDER (relative name and content), Markdown and bytecode left out."""
    if folder in _CODE_CACHE:
        return _CODE_CACHE[folder]
    digest = hashlib.sha256()
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".md", ".pyc")):
                continue
            path = os.path.join(parent, name)
            digest.update(os.path.relpath(path, folder).encode("utf-8", "surrogateescape") + b"\0")
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    _CODE_CACHE[folder] = digest.hexdigest()
    return _CODE_CACHE[folder]


def _files_named(value):
    """Every absolute path in VALUE (strings inside lists and mappings too) that is a regular file here."""
    if isinstance(value, str):
        return [value] if value.startswith("/") and "\n" not in value and os.path.isfile(value) else []
    if isinstance(value, dict):
        return [path for item in value.values() for path in _files_named(item)]
    if isinstance(value, (list, tuple)):
        return [path for item in value for path in _files_named(item)]
    return []


def value_digest(value):
    """sha256 of VALUE as canonical JSON, followed by the content digest of each controller file it names."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8", "surrogateescape"))
    for path in sorted(set(_files_named(value))):
        with open(path, "rb") as handle:
            digest.update(b"\0file\0" + path.encode("utf-8", "surrogateescape") + b"\0"
                          + hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()[:32]


def probe_sources(root):
    """(package, [(module, source)]) of PROBE_MODULES as this checkout or installed collection holds them."""
    if root not in _PROBE_SOURCES:
        for folder in (os.path.join(root, "module_utils"), os.path.join(root, "plugins", "module_utils")):
            if os.path.isfile(os.path.join(folder, "converge_probe.py")):
                break
        else:
            raise AnsibleError("sglang_converge_state: no module_utils/converge_probe.py under %s" % root)
        sources = []
        for name in PROBE_MODULES:
            with open(os.path.join(folder, name + ".py"), encoding="utf-8") as handle:
                sources.append((name, handle.read()))
        # The package the sources import each other from (the collection build rewrites ansible.module_utils).
        found = re.search(r"^from (\S+) import converge_state$", sources[-1][1], re.M)
        if not found:
            raise AnsibleError("sglang_converge_state: converge_probe.py does not import converge_state")
        _PROBE_SOURCES[root] = (found.group(1), sources)
    return _PROBE_SOURCES[root]


def probe_command(interpreter):
    """The shell command that runs the comparison (PROBE_BOOTSTRAP; the rest comes on stdin) with INTERPRETER, a
    path, or, given a list of names (INTERPRETER_PYTHON_FALLBACK), with the one Ansible's discovery would pick: the
    first the host's shell finds as an absolute path, else DISCOVERY_DEFAULT. Same round trip either way."""
    code = shlex.quote(PROBE_BOOTSTRAP)
    if isinstance(interpreter, str):
        return "%s -c %s" % (interpreter, code)
    if not interpreter:
        return "%s -c %s" % (DISCOVERY_DEFAULT, code)
    names = " ".join(shlex.quote(name) for name in interpreter)
    return ('python=%s; for name in %s; do found="$(command -v "$name")"; case "$found" in /*) python="$found"; '
            'break;; esac; done; exec "$python" -c %s' % (DISCOVERY_DEFAULT, names, code))


def probe_answer(res):
    """The comparison's result from the host's answer to probe_command (rc, stdout, stderr)."""
    try:
        answer = json.loads(res.get("stdout") or "")
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return {"failed": True, "rc": res.get("rc"),
                "msg": "sglang_converge_state: the comparison on the host gave no answer (exit %s): %s"
                       % (res.get("rc"), ((res.get("stderr") or "").strip() or "no output")[-2000:])}
    return answer


def tags_selected(tags, run_tags, skip_tags):
    """Whether a run with RUN_TAGS and SKIP_TAGS plays each of TAGS, and untagged tasks (as Ansible selects them):
    a tag the deploy does not carry (molecule's idempotence skip, say) changes nothing."""
    run, skip = set(run_tags or ["all"]), set(skip_tags or [])

    def plays(tag):
        return tag not in skip and ("all" in run or tag in run or (tag == "untagged" and "untagged" in run))
    return {tag: plays(tag) for tag in sorted(set(tags) | {"untagged"})}


def code_folders(root):
    """Every folder of ROOT whose code is an input: each role, and SHARED_CODE."""
    roles = os.path.join(root, "roles")
    return ([os.path.join(roles, role) for role in sorted(os.listdir(roles))]
            + [os.path.join(root, name) for name in SHARED_CODE if os.path.isdir(os.path.join(root, name))])


def warm_code_digests(root):
    """Digest ROOT's code folders now (tree_digest keeps them). Called when Ansible imports this plugin: it does so
    in its main process, before it forks a worker for each host, and every worker inherits the digests; computed in
    the worker, each host of a fleet would walk and hash the whole tree again. Quietly does nothing where the
    tree cannot be read (a sanity test's import): the comparison then digests in the worker, as before."""
    try:
        for folder in code_folders(root):
            tree_digest(folder)
    except (OSError, AnsibleError):
        _CODE_CACHE.clear()


def capability_inputs(table, values, root, tags):
    """{capability: {name: digest}} for TABLE ({capability: {prefixes, roles}}) from VALUES ({name: templated})."""
    inputs = {}
    for capability, spec in sorted(table.items()):
        prefixes = tuple(spec.get("prefixes") or ())
        entry = {"var " + name: value_digest(value) for name, value in values.items()
                 if prefixes and name.startswith(prefixes)}
        for role in spec.get("roles") or ():
            entry["role " + role] = tree_digest(os.path.join(root, "roles", role))[:32]
        inputs[capability] = entry
    inputs["code"] = {"code " + name: tree_digest(os.path.join(root, name))[:32]
                      for name in SHARED_CODE if os.path.isdir(os.path.join(root, name))}
    inputs["code"]["tags"] = value_digest(tags)
    return inputs


try:
    warm_code_digests(project_root())
except AnsibleError:  # no roles/ above this file (a copy of the plugin alone)
    pass


class ActionModule(ActionBase):
    """Compute the inputs here, then run the module once on the host."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    @staticmethod
    def _set_this_run(task_vars):
        """Names this run set for the host (set_fact, register, module facts): published results, not inputs."""
        manager = getattr(task_vars.get("hostvars"), "_variable_manager", None)
        host = task_vars.get("inventory_hostname")
        if manager is None or host is None:
            return set()
        names = set(getattr(manager, "_nonpersistent_fact_cache", {}).get(host) or {})
        try:
            names.update(manager._fact_cache.get(host) or {})
        except (AttributeError, KeyError):
            pass
        return names

    def _templated(self, task_vars, prefixes):
        values = {}
        results = self._set_this_run(task_vars)
        for name in task_vars:
            if not name.startswith(prefixes) or name in results:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError as exc:  # e.g. a value naming a variable only a role's run defines
                values[name] = "untemplated: %r (%s)" % (task_vars[name], type(exc).__name__)
        return values

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        table = args["capabilities"]
        prefixes = tuple(prefix for spec in table.values() for prefix in spec.get("prefixes") or ())
        tags = tags_selected(args["deploy_tags"], task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags"))
        inputs = capability_inputs(table, self._templated(task_vars, prefixes), project_root(), tags)
        module_args = {"mode": args["mode"], "record": args["record"], "inputs": inputs, "forget": args["forget"]}
        if not args["compare_tags"]:  # a drift check runs no tagged play: what the converge's tags selected is moot
            del inputs["code"]["tags"]
            module_args["ignore_inputs"] = ["tags"]
        if args["ignore_covers"]:
            module_args["ignore_covers"] = args["ignore_covers"]
        if args["mode"] == "record":
            module_args["covers"] = args["covers"]
        interpreter = self._probe_interpreter(task_vars) if args["mode"] == "compare" else None
        if interpreter is not None:
            result.update(self._probe(interpreter, {name: value for name, value in module_args.items()
                                                    if name != "mode"}))
        else:
            result.update(self._execute_module(module_name=self._task.action, module_args=module_args,
                                               task_vars=task_vars))
        return result

    def _probe_interpreter(self, task_vars):
        """The host's Python when the comparison can run without the module wrapper (Ansible's own connection
        machinery, pipelining on): the path named or discovered in this run, or the names Ansible's discovery
        tries (probe_command picks as it does); else None (the module runs)."""
        # Mitogen's strategy runs modules its own way (one interpreter a host, kept) and refuses this machinery.
        if any(cls.__module__.startswith("ansible_mitogen") for cls in type(self).__mro__):
            return None
        if not self._is_pipelining_enabled("new"):
            return None
        interpreter = task_vars.get("ansible_python_interpreter")
        if interpreter is None:
            interpreter = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
        interpreter = self._templar.template(interpreter) if interpreter is not None else None
        if isinstance(interpreter, str) and interpreter.startswith("auto"):
            interpreter = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python")
            if interpreter is None:
                names = C.config.get_config_value("INTERPRETER_PYTHON_FALLBACK", variables=task_vars) or []
                usable = all(isinstance(name, str) and FALLBACK_NAME.match(name) for name in names)
                return list(names) if usable else None
        return interpreter if isinstance(interpreter, str) and INTERPRETER.match(interpreter) else None

    def _probe(self, interpreter, params):
        """Run module_utils/converge_probe.py's comparison on the host (one Python process, no module wrapper)."""
        package, modules = probe_sources(project_root())
        request = {"package": package, "modules": modules,
                   "request": {"params": params, "check_mode": bool(self._task.check_mode)}}
        command = probe_command(interpreter)
        environment = self._compute_environment_string()
        res = self._low_level_execute_command(("%s %s" % (environment, command)).strip(), sudoable=True,
                                              in_data=json.dumps(request).encode("ascii"))
        return probe_answer(res)
