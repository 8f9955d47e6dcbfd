# -*- coding: utf-8 -*-
"""sglang_deploy_preflight runs on the controller: every role's inputs for the host, read at once, before any change.

The rules live in module_utils/deploy_preflight.py; this plugin gathers what they read: the names of the host's
variables, the roles' documented inputs (meta/argument_specs.yml, defaults/main.yml) and every name the roles and
playbooks mention, the values the roles will see (the host's variable, else the role's default, templated here),
the locks on the controller, the host's GPUs (gpu_preflight's nvidia_gpu_facts module, one read-only run on the
host) and the size of the server model's weights where the host holds it (sglang_model_weights, read only). The fast
path's comparison comes as an argument. library/sglang_deploy_preflight.py documents the options.
"""
from __future__ import annotations

import os

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase

try:
    from ansible.module_utils import deploy_preflight, model_fit
except ImportError:  # the checkout: module_utils/ is on ansible.cfg's module_utils path, which modules see, not plugins
    import ansible.module_utils
    from ansible import constants as C

    ansible.module_utils.__path__.extend(p for p in C.DEFAULT_MODULE_UTILS_PATH
                                         if p not in ansible.module_utils.__path__)
    from ansible.module_utils import deploy_preflight, model_fit

ARGUMENT_SPEC = {
    "comparison": {"type": "raw"},
    "ep_size": {"type": "raw"},
    "pp_size": {"type": "raw"},
    "quantization": {"type": "raw"},
}
# Where roles and playbooks mention variable names: a checkout, or the installed collection (plugins/).
MENTIONING = ("roles", "playbooks", "filter_plugins", "action_plugins", "plugins")
TEXT_SUFFIXES = (".yml", ".yaml", ".j2", ".py")
_CATALOGS = {}


def collection_root(here=__file__):
    """The checkout (action_plugins/ at its top) or the installed collection (plugins/action/) of this plugin."""
    plugins = os.path.dirname(os.path.abspath(here))
    for root in (os.path.dirname(plugins), os.path.dirname(os.path.dirname(plugins))):
        if os.path.isdir(os.path.join(root, "roles")):
            return root
    raise AnsibleError("sglang_deploy_preflight: no roles/ beside or above %s" % plugins)


def _texts(root):
    for name in MENTIONING:
        for parent, dirs, files in os.walk(os.path.join(root, name)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for file_name in sorted(files):
                if file_name.endswith(TEXT_SUFFIXES):
                    with open(os.path.join(parent, file_name), encoding="utf-8", errors="replace") as handle:
                        yield handle.read()


def catalog(root, load):
    """{'prefixes': {prefix: role}, 'inputs': {name}, 'defaults': {name: raw value}, 'known': {name}} of the roles
    under ROOT; LOAD reads a YAML file (None where absent)."""
    if root in _CATALOGS:
        return _CATALOGS[root]
    roles = sorted(entry for entry in os.listdir(os.path.join(root, "roles"))
                   if os.path.isdir(os.path.join(root, "roles", entry)))
    prefixes = deploy_preflight.role_prefixes(roles)
    inputs, defaults = set(), {}
    for role in roles:
        inputs |= deploy_preflight.spec_options(load(os.path.join(root, "roles", role, "meta", "argument_specs.yml")))
        defaults.update(load(os.path.join(root, "roles", role, "defaults", "main.yml")) or {})
    inputs |= set(defaults)
    known = set()
    for text in _texts(root):
        known |= deploy_preflight.mentioned(text, prefixes)
    _CATALOGS[root] = {"prefixes": prefixes, "inputs": inputs, "defaults": defaults, "known": known}
    return _CATALOGS[root]


def _load_yaml(path):
    """A role's YAML as Ansible loads it for the role: its defaults are templates (trusted as Ansible trusts them)."""
    return DataLoader().load_from_file(path, trusted_as_template=True) if os.path.isfile(path) else None


# Read once a run, when Ansible imports this plugin in its main process: the worker it forks for each host inherits
# the catalog (~0.15 s of CPU a host otherwise). Quietly left to the worker where the tree cannot be read here.
try:
    catalog(collection_root(), _load_yaml)
except (OSError, AnsibleError):
    _CATALOGS.clear()


class ActionModule(ActionBase):
    """Name every problem of the host's inputs in one message; changes nothing."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _values(self, task_vars, defaults):
        """value(NAME): what a role will see as NAME on this host, its variable, else the role's default, templated
        with the roles' defaults under the host's variables (a default names others: sglang_layout_current)."""
        variables = dict(defaults)
        variables.update(task_vars)
        templar = self._templar.copy_with_new_env(available_variables=variables)

        def value(name):
            try:
                return templar.template(variables.get(name))
            except AnsibleError:  # a value naming what only a role's run defines: its role checks it there
                return None
        return value

    def _lock(self, path):
        """(path, text) of a lock on the controller; (path, None) where there is none to read (its role says so)."""
        if not isinstance(path, str) or not path or not os.path.isfile(os.path.expanduser(path)):
            return path, None
        with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as handle:
            return path, handle.read()

    def _client_problems(self, value, task_vars):
        """The benchmark client's packages, where the gate runs and its venv's lock is on the controller."""
        if not deploy_preflight.gate_runs(task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags")):
            return []
        client = value("sglang_benchmark_client")
        if client == "controller":
            path, text = self._lock(value("sglang_benchmark_client_lock"))
            return deploy_preflight.client_problems(client, path, text, "sglang_benchmark_client_lock")
        # The host's client is the deployed venv's only where it points there; that venv holds what the lock pins
        # (no lock given: the role's own, SGLang's whole closure).
        if client != "host" or value("sglang_benchmark_client_python") != "%s/bin/python" % value(
                "sglang_layout_current"):
            return []
        path, text = self._lock(value("sglang_install_lock"))
        return deploy_preflight.client_problems(client, path, text, "sglang_install_lock")

    def _module(self, name):
        namespace = self._task.action.rpartition(".")[0]
        return (namespace + "." if namespace else "") + name

    def _model_fit(self, value, args, gpu_facts, tp_size, task_vars):
        """([problem] or [], why): the server's model against the host's GPU memory, judged only where the host
        holds the size of its weights (sglang_model_weights reads the revision's record or path manifest there)."""
        models_dir = value("sglang_model_dir")
        model = model_fit.server_model(value("sglang_server_model_path"), value("sglang_model_models"), models_dir)
        if model is None:
            return [], ("no verdict on the model's fit: sglang_server_model_path is none of sglang_model_models' "
                        "folders (their current links, or a path source's folder)")
        ranks = deploy_preflight.ranks(tp_size, args["pp_size"], gpu_facts.get("gpu_count"))
        memory = max([gpu.get("memory_total_mib") or 0 for gpu in gpu_facts.get("gpus") or []] or [0])
        if not ranks or not memory:
            return [], ("no verdict on the model's fit: the GPUs' memory is not known, or the server's tp or pp "
                        "size is not a positive integer")
        source = model.get("source") or {}
        module_args = {"models_dir": models_dir, "name": model["name"], "revision": model.get("revision")}
        if source.get("type") == "path" and source.get("manifest"):
            module_args["manifest"] = source["manifest"]
        weights = self._execute_module(module_name=self._module("sglang_model_weights"), module_args=module_args,
                                       task_vars=task_vars)
        if weights.get("failed") or weights.get("unreachable"):
            weights = {"known": False, "why": weights.get("msg") or "its size could not be read on the host"}
        problem, why = model_fit.fit_problem("%s revision %s" % (model["name"], model.get("revision")), weights,
                                             ranks, memory, value("sglang_server_mem_fraction_static"),
                                             args["quantization"])
        return [problem] if problem else [], why

    def _gpu_facts(self, nvidia_smi, task_vars):
        """The host's nvidia_gpu facts as gpu_preflight reads them (its module, read only); {} where they cannot be
        read, which gpu_preflight refuses with its own message (nothing is compared with the GPUs here then)."""
        found = self._execute_module(module_name=self._module("nvidia_gpu_facts"),
                                     module_args={} if nvidia_smi is None else {"nvidia_smi": nvidia_smi},
                                     task_vars=task_vars)
        if found.get("unreachable"):
            return None, found
        if found.get("failed"):
            return {}, found
        return (found.get("ansible_facts") or {}).get("nvidia_gpu") or {}, found

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        task_vars = task_vars or {}
        found = catalog(collection_root(), _load_yaml)

        value = self._values(task_vars, found["defaults"])
        gpu_facts, read = self._gpu_facts(value("gpu_preflight_nvidia_smi"), task_vars)
        if gpu_facts is None:
            result.update(read)
            return result
        group = value("sglang_server_multinode_group")
        nodes = len((task_vars.get("groups") or {}).get(group) or []) if group else 1
        # Unset, the server's tp size is the host's GPU count (sglang_server's default): nothing to compare.
        tp_size = value("sglang_server_tp_size") if "sglang_server_tp_size" in task_vars else None
        problems = deploy_preflight.unknown_variables(task_vars, found["prefixes"], found["inputs"], found["known"])
        problems += deploy_preflight.parallel_problems(tp_size, args["ep_size"], gpu_facts.get("gpu_count"), nodes)
        problems += deploy_preflight.nccl_problems(value("nccl_tuning_settings"), value("sglang_install_environment"),
                                                   gpu_facts)
        fit, fit_why = self._model_fit(value, args, gpu_facts, tp_size, task_vars)
        problems += fit
        problems += self._client_problems(value, task_vars)
        installs, why = deploy_preflight.installs(args["comparison"])
        result.update(changed=False, problems=problems, installs=installs, installs_why=why, model_fit=fit_why)
        if problems:
            result.update(failed=True, msg=deploy_preflight.refusal(task_vars.get("inventory_hostname"), problems))
        return result
