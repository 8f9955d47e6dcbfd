# -*- coding: utf-8 -*-
"""Render NCCL settings for the two channels that reach an SGLang server.

One source of truth, two files:
  * a start-up hook in the venv: ``<name>.pth`` (one ``import`` line, run by
    ``site`` for every interpreter of the venv) and ``<name>.py``, which sets
    defaults with ``os.environ.setdefault`` so an explicit environment wins.
    A ``.pth`` is used, not ``sitecustomize.py``: Python imports only the first
    sitecustomize on sys.path, and Ubuntu's apport ships one in
    /usr/lib/python3.X that shadows a venv's, silently.
  * an ``EnvironmentFile`` for the server's systemd unit.
"""
from __future__ import annotations

import json

HEADER = "Managed by Ansible (role nccl_tuning): NCCL settings for SGLang. Do not edit; changes are reverted."


def _comment(text, prefix="# "):
    return "".join(prefix + line + "\n" for line in text.splitlines())


def hook_module(settings, env_file):
    lines = ['"""%s"""\n' % HEADER, "# The same values are in %s (the server unit's EnvironmentFile).\n" % env_file,
             "# SGLANG_NCCL_ENV_DISABLE=1 skips them (the all-reduce microbenchmark measures NCCL's defaults so).\n",
             "import os\n"]
    if not settings:
        lines.append("# No NCCL settings: NCCL's defaults apply.\n")
    if settings:
        lines.append("\nif os.environ.get(\"SGLANG_NCCL_ENV_DISABLE\") != \"1\":\n")
    for name in sorted(settings):
        lines.append(_comment(settings[name]["reason"], prefix="    # "))
        lines.append("    os.environ.setdefault(%s, %s)\n" % (json.dumps(name), json.dumps(settings[name]["value"])))
    return "".join(lines).encode("utf-8")


def hook_pth(module_name):
    # A .pth line that starts with "import" is executed at start-up (site.addpackage).
    return ("import %s\n" % module_name).encode("utf-8")


def env_file(settings, hook_path):
    lines = [_comment(HEADER), "# The same values are set by the venv start-up hook %s.\n" % hook_path]
    if not settings:
        lines.append("# No NCCL settings: NCCL's defaults apply.\n")
    for name in sorted(settings):
        value = settings[name]["value"]
        if any(ch in value for ch in " \t\"'\\$`"):
            value = json.dumps(value)
        lines.append("\n" + _comment(settings[name]["reason"]) + "%s=%s\n" % (name, value))
    return "".join(lines).encode("utf-8")
