#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/server_fingerprint.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_fingerprint
short_description: Fingerprint what an SGLang server runs (files, the venv symlink, the GPU driver) and decide its restart
version_added: "0.1.0"
description:
  - Reads each path without following a final symlink (a file's SHA-1, a symlink's target, "-" for what is absent
    or neither) and hashes them with the extra values. sglang_server records the result at every proven start and
    restarts when it differs; the benchmark gate attaches its verdict to it.
  - A path in I(keyed_paths) (the API key's options) is keyed with the host's salt (I(salt_file)) instead of
    hashed plainly, so the fingerprint, recorded world-readable and shown in Ansible's output, does not let anyone
    guess a weak key offline.
  - Reads only, but for the salt file, which it makes (random, root-only) the first time a keyed path needs it.
    In check mode it makes none and keys the keyed paths with a throwaway salt (the fingerprint then matches no
    record, as the real run's first one will not).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  paths:
    description: Absolute paths, in a fixed order (the unit, the venv symlink, the patch record, environment files).
    type: list
    elements: path
    required: true
  keyed_paths:
    description: Those of I(paths) whose content is secret; their part is an HMAC-SHA256 keyed with the salt.
    type: list
    elements: path
    default: []
  salt_file:
    description:
      - The host's salt (64 hex digits, owned by the user the module runs as, mode 0600); made when absent and a
        keyed path needs it. Required with I(keyed_paths).
    type: path
  extra:
    description: Values that belong to the fingerprint but are not files (the GPU driver version).
    type: list
    elements: str
    default: []
  names:
    description:
      - A name for each input, in order (every path, then every extra value), as the per-input digests and the
        restart's reasons name them (C(unit), C(nccl env), C(GPU driver), ...). Default, the paths themselves and
        C(extra[N]).
    type: list
    elements: str
  pending:
    description:
      - What this run writes, before the server would start, to paths it has not written yet (a dry run's earlier
        roles), by path. C(sha1:<hex>) the new content's SHA-1, C(link:<target>) a symlink, C(like:<path>) what that
        other path holds now, C(absent) a removal, C(changes) a write whose content is not known before it is made
        (it then matches no record). The fingerprint, the digests and the decision are those of the files once
        written. Paths that are not inputs are ignored. A real run, which has written them, passes nothing.
    type: dict
    default: {}
  pending_content:
    description:
      - As I(pending), the new text itself, for a secret file in I(keyed_paths) (its part is keyed with the salt).
        Never logged.
    type: dict
    default: {}
  rewritten:
    description:
      - Names of inputs this run rewrites whose rewrite restarts the server even when the content ends up as
        recorded (the unit, which systemd must load again).
    type: list
    elements: str
    default: []
  recorded:
    description:
      - The file that holds the fingerprint recorded at the last proven start (line 1) and, when recorded by this
        version, the per-input digests (line 2). Read in the same call, so the restart decision costs one module
        run. A record without the digests (an older one) gives C(changed_inputs) null, "unknown which input".
    type: path
  service:
    description:
      - A systemd unit whose C(ActiveState) is read in the same call (C(systemctl show)), the last input of the
        restart decision.
    type: str
"""

EXAMPLES = r"""
- name: Fingerprint what the server runs
  sglang_server_fingerprint:
    paths: [/etc/systemd/system/sglang.service, /opt/sglang/current, /etc/sglang/runtime.env,
            /etc/sglang/api-key.yaml]
    keyed_paths: [/etc/sglang/api-key.yaml]
    salt_file: /var/lib/sglang-deploy/.fingerprint-salt
    extra: ["580.65.06"]
    recorded: /var/lib/sglang-deploy/deployed-config
    service: sglang.service
  register: fingerprint

- name: Predict in a dry run, naming the inputs (nccl.env would be rewritten to this content)
  sglang_server_fingerprint:
    paths: [/etc/systemd/system/sglang.service, /opt/sglang/current, /etc/sglang/nccl.env]
    names: [unit, venv target, nccl env, GPU driver]
    extra: ["580.65.06"]
    pending:
      /etc/sglang/nccl.env: "sha1:0a4d55a8d778e5022fab701977c5d840bbc486d0"
    recorded: /var/lib/sglang-deploy/deployed-config
    service: sglang.service
  register: prediction
"""

RETURN = r"""
fingerprint:
  description: SHA-256 hex digest.
  returned: success
  type: str
inputs:
  description: The digest of each input by its name (a file's C(sha1:), a secret file's C(hmac-sha256:), a symlink's C(link:), C(-)).
  returned: success
  type: dict
record:
  description: The text to record in I(recorded) after a proven start (the fingerprint, then the inputs' digests).
  returned: success
  type: str
recorded:
  description: The fingerprint in I(recorded) (its first line, stripped); null when the file does not exist (never started).
  returned: when I(recorded) is given
  type: str
recorded_inputs:
  description: The per-input digests in I(recorded); null when there is no record or it predates them.
  returned: when I(recorded) is given
  type: dict
restart:
  description: Whether the server must restart to run this fingerprint (it differs from the record, there is none,
    an input in I(rewritten) is rewritten, or the unit is not active).
  returned: when I(recorded) is given
  type: bool
changed_inputs:
  description: The names of the inputs that differ from the record; null when unknown (no record, or a record without per-input digests).
  returned: when I(recorded) is given
  type: list
  elements: str
reasons:
  description: >-
    Why the server restarts, in words (C(changed: nccl env), C(unit rewritten), C(not active (failed)), ...);
    empty when it does not.
  returned: when I(recorded) is given
  type: list
  elements: str
salt_created:
  description: Whether this run made the salt file (would have, in check mode).
  returned: success
  type: bool
active_state:
  description: The unit's C(ActiveState) (C(active), C(inactive), C(failed), ...; C(inactive) for a unit that does not exist).
  returned: when I(service) is given
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import server_fingerprint
from ansible.module_utils import param_checks


def salt_for(module, keyed):
    """(salt, made now): the host's salt, made when absent; a throwaway one in check mode; None without secrets."""
    if not keyed:
        return None, False
    salt = server_fingerprint.read_salt(module.params["salt_file"])
    if salt is not None:
        return salt, False
    if module.check_mode:
        return server_fingerprint.new_salt(), True
    return server_fingerprint.make_salt(module.params["salt_file"]), True


def main():
    module = AnsibleModule(
        argument_spec=dict(paths=dict(type="list", elements="path", required=True),
                           keyed_paths=dict(type="list", elements="path", default=[], no_log=False),  # paths, not secrets
                           salt_file=dict(type="path"),
                           extra=dict(type="list", elements="str", default=[]),
                           names=dict(type="list", elements="str"),
                           pending=dict(type="dict", default={}),
                           pending_content=dict(type="dict", default={}, no_log=True),
                           rewritten=dict(type="list", elements="str", default=[]),
                           recorded=dict(type="path"), service=dict(type="str")),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_server_fingerprint", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    relative = [path for path in module.params["paths"] if not path.startswith("/")]
    if relative:
        module.fail_json(msg="sglang_server_fingerprint: paths must be absolute: %s" % ", ".join(relative))
    keyed = module.params["keyed_paths"]
    stray = [path for path in keyed if path not in module.params["paths"]]
    if stray:
        module.fail_json(msg="sglang_server_fingerprint: keyed_paths not in paths: %s" % ", ".join(stray))
    if keyed and not module.params["salt_file"]:
        module.fail_json(msg="sglang_server_fingerprint: keyed_paths need salt_file")
    not_text = server_fingerprint.input_problems(module.params["extra"])
    if not_text:
        module.fail_json(msg="sglang_server_fingerprint: %s" % "; ".join(not_text),
                         invocation={"module_args": param_checks.printable(module.params)})
    paths, extra = module.params["paths"], module.params["extra"]
    names = module.params["names"] or server_fingerprint.default_names(paths, extra)
    wrong = server_fingerprint.name_problems(names, paths, extra)
    wrong += server_fingerprint.pending_problems(paths, module.params["pending"], module.params["pending_content"])
    wrong += ["pending_content[%s] must be text" % path for path, text in sorted(module.params["pending_content"].items())
              if not isinstance(text, str)]
    wrong += ["pending_content is for keyed_paths only: %s" % path for path in sorted(module.params["pending_content"])
              if path not in keyed]
    wrong += ["rewritten names no input: %s" % name for name in module.params["rewritten"] if name not in names]
    if wrong:
        module.fail_json(msg="sglang_server_fingerprint: %s" % "; ".join(wrong),
                         invocation={"module_args": param_checks.printable(module.params)})
    try:
        salt, created = salt_for(module, keyed)
        described = server_fingerprint.apply_pending(
            paths, server_fingerprint.describe_all(paths, keyed, salt), module.params["pending"],
            module.params["pending_content"], keyed, salt)
        value = server_fingerprint.fingerprint_of(described, extra)
        inputs = server_fingerprint.input_digests(names, described, extra)
        result = {"fingerprint": value, "salt_created": created, "inputs": inputs,
                  "record": server_fingerprint.render_record(value, inputs)}
        if module.params["recorded"]:
            recorded, recorded_inputs = server_fingerprint.parse_record(
                server_fingerprint.read_record(module.params["recorded"]))
            result.update(recorded=recorded, recorded_inputs=recorded_inputs)
    except OSError as exc:
        module.fail_json(msg="sglang_server_fingerprint: cannot read %s: %s" % (exc.filename, exc.strerror))
    except server_fingerprint.SaltError as exc:
        module.fail_json(msg="sglang_server_fingerprint: %s" % exc)
    except UnicodeDecodeError as exc:
        module.fail_json(msg="sglang_server_fingerprint: %s is not text: %s" % (module.params["recorded"], exc))
    if module.params["service"]:
        systemctl = module.get_bin_path("systemctl", required=True)
        rc, out, err = module.run_command([systemctl, "show", "--property=ActiveState", "--value", "--",
                                           module.params["service"]])
        if rc != 0:
            module.fail_json(msg="sglang_server_fingerprint: systemctl show %s failed (rc %d): %s"
                             % (module.params["service"], rc, err.strip()), **result)
        result["active_state"] = out.strip()
    if module.params["recorded"]:
        result.update(server_fingerprint.restart_decision(
            value, result["recorded"], inputs, result["recorded_inputs"], result.get("active_state", "active"),
            module.params["rewritten"]))
    module.exit_json(changed=result["salt_created"], **result)


if __name__ == "__main__":
    main()
