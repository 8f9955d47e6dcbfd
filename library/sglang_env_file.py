#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/env_file.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_env_file
short_description: Write a systemd EnvironmentFile whose every line systemd reads as written, in one module run
version_added: "0.1.0"
description:
  - Checks every line of I(content) first (blank, a comment, or C(NAME=VALUE) with a variable name and a value that
    needs no quoting and holds no C($), C(%), quote, backslash or control character); a refused line names its
    number and the rule, and nothing is written.
  - Writes the file atomically (temporary file in the same directory, owner, group and mode set, fsync, rename), or
    fixes only its owner, group and mode. One module run, where a template task costs two.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  dest: {description: "Absolute path of the EnvironmentFile.", type: path, required: true}
  content: {description: "The whole file (e.g. from a template lookup).", type: str, required: true}
  owner: {description: User name., type: str, default: root}
  group: {description: Group name., type: str, default: root}
  mode: {description: "Octal mode as a string.", type: str, default: "0644"}
  names:
    description:
      - The variables I(content) may set; a line setting any other is refused (a value holding a line break, from
        whatever variable, would add such a line, and each line of it passes on its own). Unset, any name.
    type: list
    elements: str
notes:
  - Supports check mode and diff mode (the file's content before and after).
  - The directory must exist.
"""

EXAMPLES = r"""
- name: Write the runtime environment for the server
  sglang_env_file:
    dest: /etc/sglang/runtime.env
    content: "{{ lookup('ansible.builtin.template', 'runtime.env.j2') }}"
    names: [HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE, FLASHINFER_WORKSPACE_BASE, HOME, PATH]
    group: sglang
    mode: "0640"
"""

RETURN = r"""
content_changed: {description: Whether the content was (would be) replaced., returned: success, type: bool}
checksum:
  description:
    - SHA-1 of I(content) as the file holds it once written (also in check mode, where nothing is written), as
      C(ansible.builtin.stat) gives it; sglang_server predicts a dry run's restart from it.
  returned: success
  type: str
attributes_changed: {description: "Whether owner, group or mode were (would be) set.", returned: success, type: bool}
"""

import hashlib

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import env_file
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True), content=dict(type="str", required=True),
            owner=dict(type="str", default="root"), group=dict(type="str", default="root"),
            mode=dict(type="str", default="0644"), names=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_env_file", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    try:
        change = env_file.plan(p["dest"], p["content"], p["owner"], p["group"], p["mode"], p["names"])
        if (change["content"] or change["attributes"]) and not module.check_mode:
            env_file.apply(p["dest"], p["content"], p["owner"], p["group"], change)
    except env_file.EnvFileError as exc:
        module.fail_json(msg="sglang_env_file: %s" % exc,
                         invocation={"module_args": param_checks.printable(module.params)})
    except OSError as exc:
        module.fail_json(msg="sglang_env_file: %s: %s" % (exc.filename or p["dest"], exc.strerror))
    result = dict(changed=change["content"] or change["attributes"], content_changed=change["content"],
                  attributes_changed=change["attributes"],
                  checksum=hashlib.sha1(p["content"].encode("utf-8")).hexdigest())
    if module._diff and change["content"]:
        result["diff"] = {"before_header": p["dest"], "after_header": p["dest"],
                          "before": change["before"] or "", "after": p["content"]}
    elif module._diff and change["attributes"]:  # owner or mode only: a changed result without a diff says nothing
        result["diff"] = {"before_header": p["dest"], "after_header": p["dest"],
                          "before": "owner/group/mode as found\n",
                          "after": "owner %s, group %s, mode %s\n" % (p["owner"], p["group"], p["mode"])}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
