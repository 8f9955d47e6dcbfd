#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/server_fingerprint.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_fingerprint
short_description: Fingerprint what an SGLang server runs (files, the venv symlink, the GPU driver) in one call
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
  recorded:
    description:
      - The file that holds the fingerprint recorded at the last proven start. Read in the same call (its text,
        stripped), so the restart decision costs one module run.
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
    salt_file: /var/lib/sglang/.fingerprint-salt
    extra: ["580.65.06"]
    recorded: /var/lib/sglang/deployed-config
    service: sglang.service
  register: fingerprint
"""

RETURN = r"""
fingerprint:
  description: SHA-256 hex digest.
  returned: success
  type: str
recorded:
  description: The fingerprint in I(recorded), stripped; null when the file does not exist (never started).
  returned: when I(recorded) is given
  type: str
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
    try:
        salt, created = salt_for(module, keyed)
        value = server_fingerprint.fingerprint(module.params["paths"], module.params["extra"], keyed, salt)
        result = {"fingerprint": value, "salt_created": created}
        if module.params["recorded"]:
            result["recorded"] = server_fingerprint.read_recorded(module.params["recorded"])
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
    module.exit_json(changed=result["salt_created"], **result)


if __name__ == "__main__":
    main()
