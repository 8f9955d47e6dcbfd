#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/unit_values.py (all rules live there)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_unit_values
short_description: Refuse values that would change the meaning of a systemd unit, an EnvironmentFile or a start-up hook
version_added: "0.1.0"
description:
  - Checks named values before a role writes anything (newlines and control characters, whitespace, systemd
    specifiers (C(%)), environment expansion (C($)), quotes and backslashes, relative or unnormalized paths, paths
    outside their expected directory, names that are not identifiers, out-of-range integers).
  - Fails with one message per refused value, naming the variable and the rule. Changes nothing; runs in check mode.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  values:
    description:
      - "C(variable: {value: ..., kind: ...}). I(kind) is one of C(word) (one ExecStart argument), C(text) (free text
        on one unit line), C(comment) (a comment line), C(line) (one line the writer quotes itself), C(path)
        (absolute, normalized; I(under) a directory it must lie in), C(identifier) (Python module name),
        C(unit_name), C(host), C(integer) (I(low), I(high)), C(env_value), C(env_name), C(url) (one word of a
        config file), C(requirement) (one package line of a pip requirements file), C(requirements) (a whole
        exact-pin lock). I(items=true) checks every element of a list; I(optional=true) accepts an empty value;
        I(secret=true) leaves the value out of the messages."
    type: dict
    required: true
  context:
    description: Who asks (a role name), put in front of the failure message.
    type: str
    default: settings
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Refuse unit values that systemd would read differently
  sglang_unit_values:
    context: sglang_server
    values:
      sglang_server_host: {value: "{{ sglang_server_host }}", kind: host}
      sglang_server_model_path: {value: "{{ sglang_server_model_path }}", kind: path}
      sglang_server_extra_args: {value: "{{ sglang_server_extra_args }}", kind: word, items: true}
"""

RETURN = r"""
checked: {description: The variables checked., returned: always, type: list, elements: str}
errors: {description: One message per refused value., returned: failure, type: list, elements: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import unit_values


def main():
    module = AnsibleModule(
        argument_spec=dict(values=dict(type="dict", required=True), context=dict(type="str", default="settings")),
        supports_check_mode=True,
    )
    values = module.params["values"]
    errors = unit_values.check_all(values)
    if errors:
        module.fail_json(msg=unit_values.refusal(module.params["context"], errors),
                         errors=errors, checked=sorted(values))
    module.exit_json(changed=False, checked=sorted(values))


if __name__ == "__main__":
    main()
