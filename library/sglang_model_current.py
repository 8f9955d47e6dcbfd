#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/model_store.py's switch_current (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_current
short_description: Point a model's current link at a verified revision (the server's restart path only)
version_added: "0.1.0"
description:
  - Points C(<models_dir>/<name>/current) at I(revision), atomically (a new link renamed over the old one). The
    revision must be one that C(sglang_model_fetch) verified and recorded
    (C(<models_dir>/<name>/.state/<revision>.json)) and whose folder is there.
  - The server loads its model through this link, so only its restart path calls this, right before the restart
    (a running server never sees its weights change).
  - Refuses, changing nothing, when the link's place holds a file or a folder instead of a link.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  models_dir:
    description: The models directory (absolute), as sglang_model_fetch was given it.
    type: path
    required: true
  name:
    description: The model's folder under I(models_dir).
    type: str
    required: true
  revision:
    description: The verified revision the link is to point at.
    type: str
    required: true
notes:
  - Supports check mode (what would change, nothing written) and diff mode (the link's target before and after).
"""

EXAMPLES = r"""
- name: Point the model's current link at the revision the server is to run
  sglang_model_current:
    models_dir: /var/lib/sglang-models
    name: Kimi-K2.5
    revision: v3
"""

RETURN = r"""
link:
  description: The link.
  returned: success
  type: str
  sample: /var/lib/sglang-models/Kimi-K2.5/current
previous:
  description: What the link held before (null when there was none).
  returned: success
  type: str
target:
  description: What the link holds now (a revision's name, or a path source's own folder).
  returned: success
  type: str
  sample: "v3"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import model_manifest
from ansible.module_utils import model_store
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(models_dir=dict(type="path", required=True), name=dict(type="str", required=True),
                           revision=dict(type="str", required=True)),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_model_current", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    models_dir, name, revision = (module.params[key] for key in ("models_dir", "name", "revision"))
    link = model_store.current_link(models_dir, name)
    try:
        previous, target = model_store.switch_current(models_dir, name, revision, check_mode=module.check_mode)
    except model_manifest.ModelError as exc:
        module.fail_json(msg=param_checks.printable("sglang_model_current: %s" % exc), changed=False, link=link)
    except OSError as exc:
        module.fail_json(msg=param_checks.printable("sglang_model_current: %s: %s; current left as it was" % (
            exc.filename or link, exc.strerror or exc)), changed=False, link=link)
    result = dict(changed=previous != target, link=link, previous=param_checks.printable(previous),
                  target=target)
    if module._diff:
        result["diff"] = {"before": "%s\n" % previous if previous else "", "after": "%s\n" % target,
                          "before_header": link, "after_header": link}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
