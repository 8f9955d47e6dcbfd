# -*- coding: utf-8 -*-
"""The deploy's one preflight: every role's inputs read at once, before any host changes, every problem in one message.

Pure logic, no I/O: the action plugin sglang_deploy_preflight reads the roles' files, the host's GPU facts and the
locks, and passes them here. Each problem names the rule it checks and the variable that breaks it:

* a variable named with a role's prefix that no role reads (a misspelling the roles would ignore, running with
  their default), with the closest input of that role;
* the server's tensor-parallel and expert-parallel sizes: positive integers, within the GPUs the server spans;
* the model's fit against the GPUs' memory, where the host holds its size (module_utils/model_fit.py);
* the NCCL settings' names and values (nccl_settings' rules, without what only the installed venv tells);
* the benchmark client's packages, in the lock the client's venv is installed from;
* whether this run installs or fetches anything, which sizes the free-space check (gpu_preflight).
"""
from __future__ import annotations

import difflib
import re

from ansible.module_utils import nccl_settings as ns
from ansible.module_utils import nccl_tuner as nt

# The top-level packages SGLang's benchmark client (python -m sglang.benchmark.serving) imports first: a venv that
# lacks one fails at the gate, after everything else ran. Pin names as pip normalizes them.
CLIENT_PACKAGES = ("sglang", "numpy", "aiohttp", "requests", "tqdm", "transformers")
# A requirement line of an exact-pin lock: name==version (extras and markers allowed).
_PIN = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==")
_SIGNED = re.compile(r"[+-]?[0-9]{1,18}")
# The capabilities whose differences mean this run installs a venv or fetches a model (sglang_fast_path's table),
# and the shared code, whose change may do either.
INSTALLING = ("install", "model", "code")


def role_prefixes(roles):
    """{prefix: role} for the roles' names: each role's public variables start with '<role>_'."""
    return {role + "_": role for role in roles}


def spec_options(argument_specs):
    """Every option of every entry point of a parsed meta/argument_specs.yml (None: none)."""
    names = set()
    for entry in ((argument_specs or {}).get("argument_specs") or {}).values():
        names.update(((entry or {}).get("options") or {}).keys())
    return names


def mentioned(text, prefixes):
    """Every name in TEXT that starts with one of PREFIXES (a whole identifier): what roles and playbooks read, set
    or register, their published results included."""
    if not prefixes:
        return set()
    longest_first = sorted(prefixes, key=len, reverse=True)
    pattern = r"(?<![A-Za-z0-9_])(?:%s)[A-Za-z0-9_]*" % "|".join(re.escape(prefix) for prefix in longest_first)
    return set(re.findall(pattern, text))


def _prefix_of(name, prefixes):
    found = [prefix for prefix in prefixes if name.startswith(prefix)]
    return max(found, key=len) if found else None


def unknown_variables(names, prefixes, inputs, known):
    """A problem for each of NAMES that starts with a role's prefix (PREFIXES: {prefix: role}) and is none of KNOWN
    (every name the roles and playbooks mention); the closest of the role's INPUTS (the roles' documented inputs)
    is offered."""
    problems = []
    for name in sorted(names):
        prefix = _prefix_of(name, prefixes)
        if prefix is None or name in known or name in inputs:
            continue
        role = prefixes[prefix]
        # Compared after the prefix, which every name of the role shares (it would make any two names close).
        own = sorted(option[len(prefix):] for option in inputs if option.startswith(prefix))
        close = [prefix + found for found in difflib.get_close_matches(name[len(prefix):], own, n=1, cutoff=0.6)]
        hint = ("did you mean %s?" % close[0]) if close else (
            "its inputs are listed in roles/%s/meta/argument_specs.yml" % role)
        problems.append("%s is not a variable any role reads (a name with the prefix %s must be one of role %s's "
                        "inputs; misspelled, it is ignored and the default holds): %s" % (name, prefix, role, hint))
    return problems


def _count(name, value, rule):
    """(integer or None, problems): VALUE as a positive integer; an int, or a string of digits, signed or not."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, str) and not _SIGNED.fullmatch(value.strip())):
        return None, ["%s must be a positive integer (%s), got %r" % (name, rule, value)]
    number = int(value)
    if number < 1:
        return None, ["%s must be a positive integer (%s), got %d" % (name, rule, number)]
    return number, []


def parallel_problems(tp_size, ep_size, gpu_count, nodes=1):
    """The server's tensor-parallel size (TP_SIZE) and expert-parallel size (EP_SIZE, from --ep-size in its extra
    arguments; None: not given) against the GPUs it spans: GPU_COUNT a host (None: unknown) times NODES hosts.
    TP_SIZE None: not set, the GPU count (sglang_server's default)."""
    tp, problems = None, []
    if tp_size is not None:
        tp, problems = _count("sglang_server_tp_size", tp_size, "one tensor-parallel rank per GPU")
    elif gpu_count:
        tp = gpu_count
    ep = None
    if ep_size is not None:
        ep, found = _count("--ep-size in sglang_server_extra_args", ep_size,
                           "experts spread over the tensor-parallel ranks")
        problems += found
    if tp is not None and gpu_count is not None:
        gpus = gpu_count * max(1, nodes)
        if tp > gpus:
            where = ("this host has %d" % gpu_count if nodes <= 1 else
                     "its %d hosts (sglang_server_multinode_group) have %d together" % (nodes, gpus))
            problems.append("sglang_server_tp_size is %d and %s GPU(s): the server runs one tensor-parallel rank "
                            "per GPU, so its tp size can be at most the GPUs it spans" % (tp, where))
    if tp is not None and ep is not None and (ep > tp or tp % ep):
        problems.append("--ep-size %d in sglang_server_extra_args does not divide sglang_server_tp_size %d: SGLang "
                        "splits the tensor-parallel ranks into expert-parallel groups of equal size" % (ep, tp))
    return problems


def ranks(tp_size, pp_size, gpu_count):
    """The server's GPU ranks, tensor-parallel (TP_SIZE; None: the GPU count, sglang_server's default) times
    pipeline-parallel (PP_SIZE, --pp-size; None: 1); None where one is not a positive integer (refused above)."""
    tp = gpu_count if tp_size is None else _count("tp", tp_size, "")[0]
    pp = 1 if pp_size is None else _count("pp", pp_size, "")[0]
    return tp * pp if tp and pp else None


def nccl_problems(settings, server_environment, gpu_facts):
    """nccl_tuning_settings and the NCCL_* of the server's runtime environment (sglang_install_environment), named
    and valued as nccl_tuning will check them; what needs the installed NCCL or SGLang (release, overrides) is left
    to nccl_tuning."""
    if not isinstance(server_environment or {}, dict):
        return ["sglang_install_environment must be a mapping of NAME: value"]
    inherited = nt.server_nccl(server_environment)
    shape = nt.check_settings(settings or {}) + nt.check_settings(inherited)
    if shape:
        return ["nccl_tuning_settings or sglang_install_environment: %s" % problem for problem in shape]
    effective = ns.normalize(settings)
    facts = gpu_facts or {}
    context = ns.Context(nvlink=bool(facts.get("nvlink")), gpu_count=facts.get("gpu_count"))
    values = dict({name: str(value) for name, value in inherited.items()},
                  **{name: spec["value"] for name, spec in effective.items()})
    errors, _warnings = ns.validate(values, context)

    def origin(problem):  # the variable that holds the NCCL name a problem starts with
        name = re.match(r"NCCL_[A-Z0-9_]*", problem)
        inherited_only = name and name.group(0) in inherited and name.group(0) not in effective
        return "sglang_install_environment" if inherited_only else "nccl_tuning_settings"
    return ["%s: %s" % (origin(problem), problem) for problem in nt.conflicts(inherited, effective) + errors]


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(lock_text):
    """The normalized names an exact-pin lock pins."""
    names = set()
    for line in (lock_text or "").splitlines():
        found = _PIN.match(line)
        if found and not line.lstrip().startswith("#"):
            names.add(_normalized(found.group(1)))
    return names


def gate_runs(run_tags, skip_tags, tag="benchmark"):
    """Whether a run with RUN_TAGS and SKIP_TAGS (ansible_run_tags, ansible_skip_tags) plays the benchmark gate."""
    run, skip = set(run_tags or ["all"]), set(skip_tags or [])
    return tag not in skip and bool({"all", tag} & run)


def client_problems(client, lock_path, lock_text, setting):
    """The benchmark client's packages missing from the lock its venv is installed from (LOCK_TEXT of LOCK_PATH,
    named by the variable SETTING; None: not known here), for CLIENT (host or controller)."""
    if lock_text is None:
        return []
    missing = [name for name in CLIENT_PACKAGES if name not in pinned(lock_text)]
    if not missing:
        return []
    where = ("the deployed venv on the host (sglang_benchmark_client: host)" if client == "host" else
             "the client venv on the controller (sglang_benchmark_client: controller)")
    fix = ("use a lock with SGLang's whole dependency closure, or run the client on the controller "
           "(sglang_benchmark_client: controller, with sglang_benchmark_client_lock)" if client == "host" else
           "add them to the lock (--no-deps installs only what it pins)")
    return ["the benchmark gate runs SGLang's client (python -m sglang.benchmark.serving) from %s, which imports "
            "%s; %s (%s) pins none of %s: %s, or leave the gate out (--skip-tags benchmark)"
            % (where, ", ".join(CLIENT_PACKAGES), setting, lock_path, ", ".join(missing), fix)]


def installs(comparison):
    """(whether this run may install a venv or fetch a model, why) from the fast path's comparison of the host
    (sglang_fast_path_comparison; None or skipped: nothing compared)."""
    if not isinstance(comparison, dict) or comparison.get("skipped") or "differences" not in comparison:
        return True, "no comparison with the last converge (fast path off or not run)"
    differences = comparison.get("differences") or {}
    if "record" in differences:
        return True, "no converge record on the host"
    due = [name for name in INSTALLING if differences.get(name, ["not compared"])]
    if due:
        return True, "changed since the last converge: %s" % ", ".join(due)
    return False, "install, model and code as the last converge left them: nothing to install or fetch"


def refusal(host, problems):
    """The one message for every problem found on HOST."""
    return ("Preflight refused %s before any change (%d problem%s): %s"
            % (host, len(problems), "" if len(problems) == 1 else "s",
               " | ".join("%d. %s" % (number, problem) for number, problem in enumerate(problems, 1))))
