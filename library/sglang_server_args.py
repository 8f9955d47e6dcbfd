#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/sglang_cli_args.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_args
short_description: Check an SGLang server command line against the flags the installed SGLang declares
version_added: "0.1.0"
description:
  - Reads every command-line flag of the SGLang installed in a venv from its source with Python's C(ast)
    (C(sglang/srt/server_args.py) and, from 0.5.21, C(sglang/srt/arg_groups/fields/*.py)); nothing is imported,
    so no torch or GPU is needed.
  - Fails, listing every problem, when a flag is unknown (with the closest known flags), lacks its value, gets a
    value that is not an allowed choice or not a number where one is needed, is refused by that SGLang, or when
    a required flag is missing. Each message names the flag, the SGLang version and the file it was looked up in.
  - Changes nothing.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  venv:
    description: The virtualenv that holds sglang.
    type: path
    required: true
  argv:
    description: The arguments after C(python -m sglang.launch_server).
    type: list
    elements: str
    default: []
  site_packages:
    description: The site-packages that holds sglang, when it is not the venv's own.
    type: path
  allow_abbrev:
    description:
      - Accept an unambiguous prefix of a flag (C(--tp) for C(--tp-size)) as argparse does. Off by default
        because such a prefix breaks, or changes meaning, when a later release adds a flag that shares it.
    type: bool
    default: false
  renamed:
    description:
      - Flags some releases renamed, mapping each old flag to a list of its successors; an old flag this SGLang
        lacks is replaced by the first successor it knows, for example C(--cuda-graph-max-bs) to
        C(--cuda-graph-max-bs-decode) for 0.5.21+.
    type: dict
    default: {}
  optional:
    description:
      - Flags taking no value that are passed only where this SGLang declares them (for example
        C(--enable-metrics)); one it lacks is left out of RV(argv), with a warning saying so.
    type: list
    elements: str
    default: []
notes:
  - Supports check mode (it never changes anything).
  - Choices computed by SGLang at start-up (parser registries, enums, plugins) are not checked.
"""

EXAMPLES = r"""
- name: Check the server command line before it goes into the unit file
  sglang_server_args:
    venv: /opt/sglang/current
    argv:
      - --model-path
      - moonshotai/Kimi-K2.5
      - --tp-size
      - "8"
      - --speculative-algorithm
      - EAGLE3
  register: server_args
"""

RETURN = r"""
venv_exists:
  description: Whether I(venv)/bin/python exists. When it does not (a dry run before the install), I(argv) comes back unchecked.
  returned: always
  type: bool
sglang_version: {description: The sglang version read from the venv's metadata., returned: when the venv exists, type: str}
flags_known: {description: How many flags (aliases included) that SGLang declares., returned: success, type: int}
parsed:
  description: Destination name -> value, as argparse would store it (numbers converted, lists for multi-value flags).
  returned: success
  type: dict
argv:
  description: The command line after renames and without the optional flags this SGLang lacks; what the unit should run.
  returned: success
  type: list
  elements: str
errors: {description: Every problem found., returned: failure, type: list, elements: str}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import pkg_versions as pv
from ansible.module_utils import sglang_cli_args as cli
from ansible.module_utils import unit_values
from ansible.module_utils import param_checks


def rename_flags(flags, argv, renamed, notes):
    """Replace a flag this SGLang lacks by the first of its successors that it knows (e.g. 0.5.21 split
    --cuda-graph-max-bs into --cuda-graph-max-bs-decode/-prefill)."""
    out = []
    for arg in argv:
        flag, sep, value = arg.partition("=")
        if flag in renamed and flag not in flags:
            successor = next((new for new in renamed[flag] if new in flags), None)
            if successor:
                notes.append("%s is not a flag of this sglang; using %s" % (flag, successor))
                arg = successor + sep + value
        out.append(arg)
    return out


def drop_optional(flags, argv, optional, notes):
    """ARGV without the flags of OPTIONAL this SGLang does not declare (each a flag without a value)."""
    missing = [flag for flag in optional if flag not in flags]
    for flag in missing:
        notes.append("%s is not a flag of this sglang; left out" % flag)
    return [arg for arg in argv if arg not in missing]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            argv=dict(type="list", elements="str", default=[]),
            site_packages=dict(type="path"),
            allow_abbrev=dict(type="bool", default=False),
            renamed=dict(type="dict", default={}),
            optional=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_server_args", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    bad = [flag for flag, successors in p["renamed"].items()
           if not str(flag).startswith("--") or not isinstance(successors, list) or not successors
           or not all(isinstance(new, str) and new.startswith("--") for new in successors)]
    if bad:
        module.fail_json(msg="renamed maps an old flag to a list of its successors, each a --flag string "
                             "(e.g. --cuda-graph-max-bs: [--cuda-graph-max-bs-decode]); not so for %s"
                             % ", ".join(sorted(str(flag) for flag in bad)))
    bad = [flag for flag in p["optional"] if not flag.startswith("--") or "=" in flag]
    if bad:
        module.fail_json(msg="optional names flags without a value, each a --flag string; not so for %s"
                             % ", ".join(sorted(bad)))
    # The command line goes into ExecStart=: nothing systemd would split, expand or read as a new directive.
    unsafe = [error for index, arg in enumerate(p["argv"]) for error in unit_values.word("argv[%d]" % index, arg)]
    if unsafe:
        module.fail_json(msg="command line refused before it reaches the unit: %s" % "; ".join(unsafe),
                         errors=unsafe)
    if not os.path.exists(os.path.join(p["venv"], "bin", "python")):
        module.exit_json(changed=False, venv_exists=False, argv=p["argv"],
                         msg="%s/bin/python does not exist: the flags are not checked" % p["venv"])
    candidates = [p["site_packages"]] if p["site_packages"] else pv.site_packages_dirs(p["venv"])
    site = next((path for path in candidates if os.path.isdir(os.path.join(path, "sglang"))), None)
    if site is None:
        module.fail_json(msg="sglang is not installed in venv %s: no sglang/ package in %s" % (
            p["venv"], ", ".join(candidates) or os.path.join(p["venv"], "lib/python3*/site-packages")))
    version = pv.find_distribution(pv.installed_versions(site), "sglang")
    if version is None:
        module.fail_json(msg="sglang package found in %s but no sglang-*.dist-info metadata: cannot tell its "
                             "version" % site)
    try:
        flags = cli.known_flags(site)
    except (cli.SourceError, SyntaxError, OSError) as exc:
        module.fail_json(msg="cannot read the flags of sglang %s: %s" % (version, exc), sglang_version=version)
    notes = []
    argv = drop_optional(flags, rename_flags(flags, p["argv"], p["renamed"], notes), p["optional"], notes)
    errors, parsed = cli.check_argv(flags, argv, allow_abbrev=p["allow_abbrev"], notes=notes)
    for note in notes:
        module.warn(note)
    if errors:
        module.fail_json(msg="command line refused for sglang %s: %s" % (version, "; ".join(errors)),
                         errors=errors, sglang_version=version, flags_known=len(flags))
    module.exit_json(changed=False, venv_exists=True, sglang_version=version, flags_known=len(flags), parsed=parsed,
                     argv=argv)


if __name__ == "__main__":
    main()
