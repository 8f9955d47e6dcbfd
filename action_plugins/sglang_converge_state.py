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
"""
from __future__ import annotations

import hashlib
import json
import os

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


def tags_selected(tags, run_tags, skip_tags):
    """Whether a run with RUN_TAGS and SKIP_TAGS plays each of TAGS, and untagged tasks (as Ansible selects them):
    a tag the deploy does not carry (molecule's idempotence skip, say) changes nothing."""
    run, skip = set(run_tags or ["all"]), set(skip_tags or [])

    def plays(tag):
        return tag not in skip and ("all" in run or tag in run or (tag == "untagged" and "untagged" in run))
    return {tag: plays(tag) for tag in sorted(set(tags) | {"untagged"})}


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
        result.update(self._execute_module(module_name=self._task.action, module_args=module_args,
                                           task_vars=task_vars))
        return result
