#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/model_manifest_writer.py (runs where the model's folder is)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_manifest
short_description: Write the manifest of a model folder, the file sglang_model verifies a revision against
version_added: "0.1.0"
description:
  - >-
    Lists every regular file below I(path) with its size and sha256 and writes the manifest to I(dest), atomically,
    in the format the C(sglang_model) role reads (C({"files": [{"name", "size", "sha256"}, ...]}), names relative to
    I(path), C(/)-separated, sorted).
  - The manifest never lists itself. When I(dest) lies inside I(path) (the default, C(<path>/manifest.json), is where
    an C(http) source serves it) its file is left out; any other file in the folder is listed, an old manifest under
    another name included.
  - Follows no link inside I(path) (I(path) itself may be one). A symlink, FIFO, socket or device below it is
    refused, every one named, and nothing is written. An empty folder is refused too.
  - Writes only when the text differs from what I(dest) holds, so a second run reports no change; refuses a I(dest)
    that is a symlink or not a regular file, and one another process changed while the folder was being hashed.
  - Every file is read in full, in check mode too (a model of hundreds of GB takes minutes).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  path:
    description: The model's folder (absolute), holding the revision's files exactly as the server is to load them.
    type: path
    required: true
  dest:
    description:
      - Where the manifest is written (absolute); its directory must exist. Default C(<path>/manifest.json).
      - For a C(path) source, a file beside the folder (its C(manifest)); for an C(http) source, the served folder's
        C(manifest.json) (or where its C(manifest_url) points).
    type: path
notes:
  - Supports check mode (the manifest computed, nothing written) and diff mode (the manifest's text before and
    after).
  - 'Ad hoc, on the controller: C(ansible localhost -m gpufleet.sglang.sglang_model_manifest -a path=/srv/models/m/v1).'
"""

EXAMPLES = r"""
- name: Write the manifest an http source serves beside the files
  sglang_model_manifest:
    path: /srv/model-mirror/Kimi-K2.5/v3

- name: Write the manifest of a folder staged by other means (a path source's manifest)
  sglang_model_manifest:
    path: /shared/models/eagle3-v1
    dest: /shared/models/eagle3-v1.json
"""

RETURN = r"""
dest:
  description: The manifest's path.
  returned: success
  type: str
  sample: /srv/model-mirror/Kimi-K2.5/v3/manifest.json
files:
  description: How many files the manifest lists.
  returned: success
  type: int
  sample: 64
total_bytes:
  description: The size of the files listed, in bytes.
  returned: success
  type: int
manifest_sha256:
  description: The manifest's digest (over every file's name, size and sha256); what a C(peer) source's
    C(manifest_sha256) pins and the role records.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import model_manifest_writer
from ansible.module_utils import param_checks
from ansible.module_utils.model_manifest import ModelError


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", required=True), dest=dict(type="path")),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_model_manifest", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    try:
        made = model_manifest_writer.make(params["path"], params["dest"], module.check_mode)
    except ModelError as exc:
        module.fail_json(msg="sglang_model_manifest: %s" % exc, changed=False)
    result = {key: made[key] for key in ("changed", "dest", "files", "total_bytes", "manifest_sha256")}
    if module._diff and made["changed"]:
        result["diff"] = {"before": made["before"] or "", "after": made["after"], "before_header": made["dest"],
                          "after_header": made["dest"]}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
