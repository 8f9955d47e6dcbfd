#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/converge_state.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_converge_state
short_description: Record a host's converged state, or compare the host with its record, in one module run
version_added: "0.1.0"
description:
  - I(mode=record) reads what I(covers) names on the host (files with content, mode and owner, directory listings,
    the sizes of the files under a directory, the fusion patch record and every file it lists, units' state, main PID and start, the GPUs and driver, a URL's
    status) and writes it with I(inputs) to I(record) (JSON, mode 0600, atomically), per capability.
  - I(mode=compare) reads the record, reads every cover it lists again and names, per capability, each input of
    another value (by name, never its value), each input added or gone, and each difference on the host.
    C(matched) is true only when no capability has a difference.
  - Run through its action plugin, which computes I(inputs) on the controller (every variable of a capability's
    prefixes, the code of its roles and plugins, the run's tags); from a copy without the plugin, pass I(inputs).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  mode:
    description: Record the state, or compare the host with its record (changes nothing).
    type: str
    choices: [compare, record]
    default: compare
  record: {description: Absolute path of the converge record on the host., type: path, required: true}
  inputs:
    description: "Per capability, C({name: digest}) of what the controller deploys (see the action plugin)."
    type: dict
    required: true
  forget:
    description:
      - In compare mode, and not in check mode, remove the record when the host differs from it, so a run that goes
        on to change the host and fails part-way leaves no record a later run could match (a run that ends well
        writes a new one).
    type: bool
    default: false
  ignore_inputs:
    description: In compare mode, input names (in every capability) left out of the comparison, e.g. C(tags).
    type: list
    elements: str
    default: []
  ignore_covers:
    description:
      - In compare mode, kinds of I(covers) neither read again nor compared, e.g. C(http) for a deploy, whose full
        roles never ask the server's health either (a drift check does).
    type: list
    elements: str
    choices: [gpu, http, listings, secrets, units]
    default: []
  covers:
    description:
      - Per capability, what it owns on the host (record mode; compare reads the record's own). Keys C(files) and
        C(fusion_states) (absolute paths; a glob matches a sorted list), C(secrets) (absolute paths, never hashed;
        their size, change time, inode, mode and owner), C(listings) (C(path), optional C(glob)), C(sizes)
        (absolute directories; every file under one and its size, no content read, as for a model's weights),
        C(units) (names), C(gpu) (bool), C(http) (C(url), optional C(key_file) whose content is sent as a bearer
        token and never returned).
    type: dict
    default: {}
notes:
  - Supports check mode (record reports whether it would write) and diff mode (the record before and after).
"""

EXAMPLES = r"""
- name: Compare the host with its converge record
  sglang_converge_state:
    record: /var/lib/sglang-deploy/converged.json
  register: state

- name: Record the converged state
  sglang_converge_state:
    mode: record
    record: /var/lib/sglang-deploy/converged.json
    covers:
      server: {files: [/etc/systemd/system/sglang.service], units: [sglang]}
"""

RETURN = r"""
matched: {description: "Compare mode: whether every capability matches its record.", returned: success, type: bool}
forgotten: {description: "Compare mode: whether the record was (would be) removed (I(forget)).", returned: compare, type: bool}
differences:
  description: Per capability, what differs (names and paths, never values); an empty list where it matches.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import converge_probe
from ansible.module_utils import converge_state
from ansible.module_utils import nvidia_smi
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(mode=dict(type="str", choices=["compare", "record"], default="compare"),
                           record=dict(type="path", required=True),
                           inputs=dict(type="dict", required=True),
                           covers=dict(type="dict", default={}),
                           forget=dict(type="bool", default=False),
                           ignore_inputs=dict(type="list", elements="str", default=[]),
                           ignore_covers=dict(type="list", elements="str", default=[],
                                              choices=sorted(converge_state.IGNORABLE_KINDS))),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_converge_state", module.argument_spec, module.params)
    problems = converge_state.cover_problems(module.params["covers"])
    if refused or problems:
        module.fail_json(msg=refused or "sglang_converge_state: " + "; ".join(problems))

    path, inputs = module.params["record"], module.params["inputs"]
    if module.params["mode"] == "compare":
        result = converge_probe.compare(dict((name, module.params[name]) for name in converge_probe.COMPARE_OPTIONS),
                                        module.check_mode)
        if result.get("failed"):
            module.fail_json(msg=result["msg"])
        module.exit_json(**result)
    try:
        before = atomic_files.read_record(path)
        covers = module.params["covers"]
        after = converge_state.render(inputs, covers, converge_state.observe(
            covers, converge_probe.run, converge_probe.fetch, nvidia_smi.parse_query_xml))
        changed = after != before
        if changed and not module.check_mode:
            atomic_files.put_record(path, after, mode=0o600)
    except (converge_state.StateError, atomic_files.RecordError) as exc:
        module.fail_json(msg="sglang_converge_state: %s" % exc)
    except OSError as exc:
        module.fail_json(msg="sglang_converge_state: %s: %s" % (exc.filename or path, exc.strerror))
    result = dict(changed=changed, matched=True, differences={})
    if module._diff:
        result["diff"] = dict(before=before or "", after=after, before_header=path, after_header=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
