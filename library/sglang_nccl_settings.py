#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/nccl_tuner.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_nccl_settings
short_description: Validate NCCL settings and deliver them to an SGLang venv and its server unit
version_added: "0.1.0"
description:
  - Chooses settings from a profile and the host's GPU facts, merges the operator's settings, validates them all
    against NCCL's documented names and values and known-bad combinations, and refuses, writing nothing, on any error.
  - Writes, from the same data, a start-up hook in the venv (C(<hook_name>.pth) importing C(<hook_name>.py), which
    sets each variable with C(os.environ.setdefault) so an explicit environment wins) and an EnvironmentFile for
    the server unit. A .pth is used because a venv C(sitecustomize.py) is silently shadowed by Ubuntu's apport one.
  - Reads the NCCL version from the venv's nvidia-nccl-* package metadata and the variables the installed SGLang
    overwrites at start-up from its C(_set_envs_and_config) source; nothing is imported.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  venv:
    description: The virtualenv the server runs from.
    type: path
    required: true
  state:
    description: C(absent) removes the hook and the environment file.
    type: str
    choices: [present, absent]
    default: present
  profile:
    description:
      - C(pcie) sets C(NCCL_P2P_LEVEL=PHB) only where GPUs meet across host bridges with P2P OK; C(nvlink) sets
        nothing; C(custom) only what I(settings) says; C(auto) picks pcie or nvlink from I(gpu_facts).
    type: str
    choices: [auto, pcie, nvlink, custom]
    default: auto
  gpu_facts:
    description: The C(nvidia_gpu) facts of the host (from nvidia_gpu_facts).
    type: dict
    default: {}
  settings:
    description: "Operator settings, merged over the profile: C(NAME: value) or C(NAME: {value: ..., reason: ...})."
    type: dict
    default: {}
  release_policy:
    description: What an installed NCCL release with known bugs on these GPUs does.
    type: str
    choices: [warn, fail]
    default: warn
  env_file:
    description: "EnvironmentFile for the server unit: an absolute, normalized path to a file (not a directory)."
    type: path
    default: /etc/sglang/nccl.env
  hook_name:
    description: Module name of the start-up hook in the venv's site-packages (a Python identifier).
    type: str
    default: sglang_nccl_env
  server_environment:
    description:
      - The server's other environment (its runtime environment file). Its C(NCCL_*) variables reach the same
        processes, so they are validated with the settings here, and one set here to another value is refused;
        nothing of it is written by this module.
    type: dict
    default: {}
notes:
  - Supports check mode and diff mode.
  - Every name, value and reason is checked by module_utils/unit_values.py before anything is written (a newline,
    whitespace, a quote, a backslash, C($) or C(%) in a value is refused, so the EnvironmentFile and the hook hold
    the same string and neither gains a line). The hook, the .pth and the environment file are made 0644 and root's
    on every run.
  - Follows no symlink it did not expect. The hook's two files are refused when a symlink lies anywhere below the
    venv on the way to them (site-packages included), the environment file when it is a symlink itself (its
    directory is the operator's to place); each message names the link. Modes and owners are set on descriptors
    opened without following a link, so a link's target never changes mode or owner, and a file edited between
    the module's read and its rename is not overwritten (the run fails naming it, nothing changed).
"""

EXAMPLES = r"""
- name: Deliver NCCL settings chosen for this host
  sglang_nccl_settings:
    venv: /opt/sglang/current
    gpu_facts: "{{ nvidia_gpu }}"
    settings:
      NCCL_ALGO:
        value: allreduce:tree
        reason: measured faster for verify-size all-reduces on this host
"""

RETURN = r"""
venv_exists:
  description: Whether I(venv)/bin/python exists. When it does not (a dry run before the install), nothing is read or written.
  returned: always
  type: bool
profile: {description: The profile used., returned: success, type: str}
settings:
  description: The effective settings, each with its value and reason.
  returned: always
  type: dict
nccl_version: {description: "NCCL version in the venv, or null.", returned: always, type: str}
sglang_overrides:
  description: Variables the installed SGLang sets at start-up, C(always) or C(conditional).
  returned: always
  type: dict
notes: {description: Why the profile set what it set., returned: always, type: list, elements: str}
errors: {description: Why the settings were refused., returned: failure, type: list, elements: str}
files: {description: "The hook module, the .pth and the environment file.", returned: always, type: list, elements: str}
env_file_changed:
  description:
    - Whether the environment file's content is (would be) written, created or removed. Only that file is part of
      the server's restart fingerprint (the hook sets the same values as defaults, under the unit's environment), so
      sglang_server predicts a dry run's restart from this and C(env_file_checksum), not from C(changed), which a
      mode fix also sets.
  returned: success
  type: bool
env_file:
  description: The environment file (I(env_file)).
  returned: success
  type: str
env_file_checksum:
  description:
    - SHA-1 of the environment file's content as this run leaves it (also in check mode, where nothing is
      written); null when it is (would be) removed or absent. With C(env_file_changed), what sglang_server's dry
      run predicts its fingerprint from.
  returned: success
  type: str
modes_fixed:
  description: Delivered files whose content was right but whose mode or owner was not (now 0644, root).
  returned: success
  type: list
  elements: str
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import nccl_tuner
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            profile=dict(type="str", choices=["auto", "pcie", "nvlink", "custom"], default="auto"),
            gpu_facts=dict(type="dict", default={}),
            settings=dict(type="dict", default={}),
            release_policy=dict(type="str", choices=["warn", "fail"], default="warn"),
            env_file=dict(type="path", default="/etc/sglang/nccl.env"),
            hook_name=dict(type="str", default="sglang_nccl_env"),
            server_environment=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_nccl_settings", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    if not os.path.exists(os.path.join(p["venv"], "bin", "python")):
        module.exit_json(changed=False, venv_exists=False, msg="%s/bin/python does not exist" % p["venv"])
    try:
        if p["state"] == "absent":
            paths = nccl_tuner.removal(p["venv"], p["env_file"], p["hook_name"])
            diff = nccl_tuner.diff_entries([(path, atomic_files.read_bytes(path), b"") for path in paths])
            if paths and not module.check_mode:
                for path in paths:
                    os.unlink(path)
            module.exit_json(changed=bool(paths), removed=paths, venv_exists=True,
                             env_file_changed=p["env_file"] in paths, env_file=p["env_file"], env_file_checksum=None,
                             **({"diff": diff} if module._diff else {}))
        try:  # the venv's Python's standard library; one that does not start: this interpreter's list
            rc, out, _err = module.run_command([os.path.join(p["venv"], "bin", "python"), "-I", "-S", "-c",
                                                nccl_tuner.STDLIB_QUERY], expand_user_and_vars=False,
                                               handle_exceptions=False)
        except OSError:
            rc, out = 1, ""
        result, changes = nccl_tuner.plan(p["venv"], p["profile"], p["gpu_facts"], p["settings"],
                                          p["release_policy"], p["env_file"], p["hook_name"],
                                          p["server_environment"], nccl_tuner.stdlib_names_from(rc, out))
    except nccl_tuner.Refused as exc:
        module.fail_json(msg=exc.msg, invocation={"module_args": param_checks.printable(module.params)},
                         **param_checks.printable(exc.result))
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg="NCCL settings not delivered, nothing written: %s" % exc)
    for warning in result.pop("warnings"):
        module.warn(warning)
    # Modes and owners are enforced on every run, not only when a file is created.
    wrong_modes = [path for path in nccl_tuner.mode_problems(result["files"])
                   if path not in [change[0] for change in changes]]
    if (changes or wrong_modes) and not module.check_mode:
        directory = os.path.dirname(p["env_file"])
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory)
                os.chmod(directory, nccl_tuner.DIR_MODE)  # makedirs' mode is filtered by the umask
            atomic_files.replace_all(changes, root=nccl_tuner.write_roots(p["venv"], result["files"]))
            nccl_tuner.enforce_modes(result["files"])
        except atomic_files.TransactionError as exc:
            module.fail_json(msg=str(exc), **result)
        except OSError as exc:
            module.fail_json(msg="NCCL settings: could not write %s: %s" % (directory, exc), **result)
    result["changed"] = bool(changes or wrong_modes)
    result["modes_fixed"] = wrong_modes
    result["env_file_changed"] = any(change[0] == result["files"][2] for change in changes)
    env_content = [change[2] for change in changes if change[0] == result["files"][2]]
    if not env_content and os.path.isfile(result["files"][2]):
        env_content = [atomic_files.read_bytes(result["files"][2])]
    result["env_file"] = result["files"][2]
    result["env_file_checksum"] = hashlib.sha1(env_content[0]).hexdigest() if env_content else None
    result["venv_exists"] = True
    if module._diff:
        result["diff"] = nccl_tuner.diff_entries(changes) + [
            {"before_header": path, "after_header": path, "before": "mode/owner as found\n",
             "after": "mode %o, owner root\n" % nccl_tuner.FILE_MODE} for path in wrong_modes]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
