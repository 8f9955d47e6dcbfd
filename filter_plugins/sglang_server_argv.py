# -*- coding: utf-8 -*-
"""A flag's value in the server's extra arguments, as argparse reads it: `--flag N` and `--flag=N`, the last wins.

    sglang_allreduce_ep_size: >-
      {{ extra_args | sglang_flag_value(['--ep-size', '--expert-parallel-size', '--ep'], 1) }}

Roles that size something after the server read its command line through this one parser, so a spelling SGLang
accepts is never missed (a Jinja split on spaces saw `--ep-size 2`, not `--ep-size=2`).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def sglang_flag_value(argv, flags, default=None):
    """The value argv gives the last of `flags` (a name or a list of equivalent names), else `default`."""
    if argv is None:
        return default
    if isinstance(argv, str) or not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("sglang_flag_value: expects the server's arguments as a list, got %r" % (argv,))
    names = [flags] if isinstance(flags, str) else list(flags or [])
    if not names or not all(isinstance(name, str) and name.startswith("--") for name in names):
        raise AnsibleFilterError("sglang_flag_value: flags must be names starting with --, got %r" % (flags,))
    value, index = default, 0
    while index < len(argv):
        token = str(argv[index])
        index += 1
        if token == "--":  # argparse: what follows is no option
            break
        name, equals, given = token.partition("=")
        if equals and name in names:
            value = given
        elif token in names:
            if index >= len(argv) or str(argv[index]).startswith("--"):
                raise AnsibleFilterError("sglang_flag_value: %s has no value in %r" % (token, list(argv)))
            value = str(argv[index])
            index += 1
    return value


class FilterModule(object):
    """A flag's value in the server's arguments."""

    def filters(self):
        return {"sglang_flag_value": sglang_flag_value}
