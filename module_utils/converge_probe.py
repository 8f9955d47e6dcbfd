# -*- coding: utf-8 -*-
"""The host's side of comparing it with its converge record, with the standard library only.

The module sglang_converge_state runs ``compare`` inside Ansible's module wrapper; its action plugin runs the same
function without the wrapper (``main`` answers a request with JSON on stdout: one Python process over the task's
own connection): on a host with nothing to do, the wrapper's start-up (importing
ansible.module_utils.basic, compiling it afresh on every run) is most of what a fleet pays for the host.
System calls (systemctl, nvidia-smi, the health URL) go through ``run`` and ``fetch``; the logic is converge_state's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible.module_utils import atomic_files
from ansible.module_utils import converge_state
from ansible.module_utils import nvidia_smi
from ansible.module_utils import param_checks

# What compare takes (the module's options of compare mode), with their defaults.
COMPARE_OPTIONS = {"record": None, "inputs": None, "forget": False, "ignore_inputs": [], "ignore_covers": []}
USER_AGENT = "gpufleet-sglang-fast-path"


def run(argv):
    """(rc, stdout, stderr) of ARGV in the C locale; a command that is not there is an observation (rc 127)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                              env=dict(os.environ, LC_ALL="C"))
    except OSError as exc:
        return 127, "", "%s: %s" % (argv[0], exc.strerror)
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def fetch(url, key_file):
    """The status of GET URL (a bearer token from KEY_FILE when named), or a text saying why there is none."""
    # Imported here: a deploy's comparison asks no URL, and urllib.request is a third of the comparison's start-up.
    import urllib.error
    import urllib.request
    headers = {"User-Agent": USER_AGENT}
    if key_file:
        try:
            with open(key_file, encoding="utf-8") as handle:
                headers["Authorization"] = "Bearer " + handle.read().strip()
        except OSError as exc:
            return "key file unreadable (%s)" % exc.strerror
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return "no answer (%s)" % getattr(exc, "reason", exc)


def request_problems(params):
    """Why PARAMS (compare's options) cannot be used, one message each; [] when they can."""
    found = ["unknown option %s" % name for name in sorted(set(params) - set(COMPARE_OPTIONS))]
    record, inputs = params.get("record"), params.get("inputs")
    if not isinstance(record, str) or not os.path.isabs(record):
        found.append("record must be an absolute path (got %r)" % (record,))
    else:
        found += param_checks.problems({"record": {"type": "path"}}, {"record": record})
    if not isinstance(inputs, dict):
        found.append("inputs must be a mapping of capability to {name: digest}")
    for name in ("ignore_inputs", "ignore_covers"):
        value = params.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            found.append("%s must be a list of names" % name)
    covers = params.get("ignore_covers") if isinstance(params.get("ignore_covers"), list) else []
    unknown = sorted(set(kind for kind in covers if isinstance(kind, str)) - set(converge_state.IGNORABLE_KINDS))
    if unknown:
        kinds = ", ".join(sorted(converge_state.IGNORABLE_KINDS))
        found.append("ignore_covers: %s is none of %s" % (", ".join(unknown), kinds))
    return found


def compare(params, check_mode, run=run, fetch=fetch):
    """The comparison's result ({changed, matched, differences, forgotten}), or {failed, msg} saying why there is
    none. With ``forget``, a host that differs loses its record (not in check mode)."""
    problems = request_problems(params)
    if problems:
        return {"failed": True, "msg": "sglang_converge_state: " + "; ".join(problems)}
    params = dict(COMPARE_OPTIONS, **params)
    path = params["record"]
    try:
        before = atomic_files.read_record(path)
        recorded = converge_state.parse(before)
        ignored = params["ignore_covers"]
        observed = converge_state.observe(converge_state.covers_of(recorded, ignored), run, fetch,
                                          nvidia_smi.parse_query_xml)
        differences = converge_state.compare(recorded, params["inputs"], observed, params["ignore_inputs"], ignored)
        matched = not any(differences.values())
        forget = bool(params["forget"]) and not matched and before is not None
        if forget and not check_mode:
            atomic_files.put_record(path, None)
    except (converge_state.StateError, atomic_files.RecordError) as exc:
        return {"failed": True, "msg": "sglang_converge_state: %s" % exc}
    except OSError as exc:
        return {"failed": True, "msg": "sglang_converge_state: %s: %s" % (exc.filename or path, exc.strerror)}
    return {"changed": forget, "matched": matched, "differences": differences, "forgotten": forget}


def main(request, stdout=None):
    """Write compare's result for REQUEST ({"params": {...}, "check_mode": bool}) as JSON; never a traceback."""
    try:
        result = compare(request["params"], bool(request.get("check_mode")))
    except (KeyError, TypeError) as exc:
        result = {"failed": True, "msg": "sglang_converge_state: unreadable request (%s: %s)"
                                         % (type(exc).__name__, exc)}
    except Exception as exc:  # pylint: disable=broad-except  # the controller gets a message, never a traceback
        result = {"failed": True, "msg": "sglang_converge_state: %s: %s" % (type(exc).__name__, exc)}
    stdout = stdout or sys.stdout
    stdout.write(json.dumps(result))
    stdout.flush()
